"""Whether a stored session's status agrees with its document and transcript.

A session a store lists as "awaiting input" while its transcript ends in a
tool result nobody answered, or one whose state says it waits for an
approval no call asks for, is parked where no worker and no approver will
ever look. :func:`session_problems` names every such disagreement (a pure
function of the stored session); :func:`find_session_problems` runs it over a
whole store. The approval inbox shows what they find and the
:class:`~agentloop.SessionWorker` logs it for every session it leases, so a
stranded session is reported, never silently parked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..loop._session_store import SessionStatus, SessionStore, StoredSession, summarize

__all__ = ["SessionProblem", "find_session_problems", "session_problems"]


@attrs.frozen(kw_only=True)
class SessionProblem:
    """A stored session whose status disagrees with its document: what and what to do."""

    session_id: str
    status: SessionStatus
    problems: tuple[str, ...]


def session_problems(stored: StoredSession) -> tuple[str, ...]:
    """Every way ``stored``'s status and document disagree (empty: consistent).

    Never raises: a document too damaged to read is itself a problem.
    """
    document = stored.checkpoint
    if not isinstance(document, Mapping):
        return (f"the checkpoint is a {type(document).__name__}, not a document",)
    found: list[str] = []
    status, _ = summarize(document)
    if status is not stored.status:
        found.append(
            f"the store lists it as {stored.status.value!r} but its document reads "
            f"{status.value!r} (state {document.get('state')!r})"
        )
    found.extend(_state_problems(document))
    found.extend(_unanswered_calls(document))
    if not found:
        found.extend(_unanswered_results(document))
    return tuple(found)


async def find_session_problems(store: SessionStore) -> list[SessionProblem]:
    """The sessions of ``store`` that :func:`session_problems` finds fault with,
    most recently updated first (loads every session: for an inbox or a sweep)."""
    found: list[SessionProblem] = []
    for info in await store.list_sessions():
        stored = await store.load(info.session_id)
        if stored is None:  # deleted since it was listed
            continue
        problems = session_problems(stored)
        if problems:
            session_id, status = stored.session_id, stored.status
            found.append(SessionProblem(session_id=session_id, status=status, problems=problems))
    return found


def _state_problems(document: Mapping[str, Any]) -> list[str]:
    state = document.get("state")
    turn = document.get("turn")
    if not isinstance(turn, Mapping):
        if state in ("AWAITING_APPROVAL", "AFTER_TOOL_RESULT", "AWAITING_ANSWER"):
            return [f"its state is {state} but no turn is open"]
        return []
    waiting = [call for call in _round_calls(document) if call.get("status") == "awaiting_approval"]
    if state == "AWAITING_APPROVAL" and not waiting:
        return ["its state is AWAITING_APPROVAL but no call of its round waits for approval"]
    if state == "AWAITING_ANSWER" and not any(
        call.get("question") for call in _round_calls(document)
    ):
        return ["its state is AWAITING_ANSWER but no call of its round waits on a question"]
    if state == "IDLE" and not turn.get("interrupted"):
        return [
            f"its state is IDLE but turn {turn.get('turn_id')!r} is open: saved before its "
            "next model call, it waits for a worker to continue it (restored, it continues)"
        ]
    return []


def _round_calls(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    turn = document.get("turn")
    tool_round = turn.get("round") if isinstance(turn, Mapping) else None
    calls = tool_round.get("calls") if isinstance(tool_round, Mapping) else None
    return [call for call in calls if isinstance(call, Mapping)] if isinstance(calls, list) else []


def _parts(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    transcript = document.get("transcript")
    found: list[Mapping[str, Any]] = []
    for item in transcript if isinstance(transcript, list) else ():
        parts = item.get("parts") if isinstance(item, Mapping) else None
        if isinstance(parts, list):
            found.extend(part for part in parts if isinstance(part, Mapping))
    return found


def _unanswered_calls(document: Mapping[str, Any]) -> list[str]:
    """Calls of the transcript with no result that no open round will answer."""
    parts = _parts(document)
    calls = [part.get("id") for part in parts if part.get("type") == "tool_call"]
    answered = {part.get("call_id") for part in parts if part.get("type") == "tool_result"}
    held = {
        call["call"].get("id")
        for call in _round_calls(document)
        if isinstance(call.get("call"), Mapping)
    }
    orphans = [str(call_id) for call_id in calls if call_id not in answered | held]
    if not orphans:
        return []
    return [
        f"call{'s' if len(orphans) > 1 else ''} {', '.join(orphans)} "
        + (
            "have no result and no open round answers them"
            if len(orphans) > 1
            else "has no result and no open round answers it"
        )
    ]


def _unanswered_results(document: Mapping[str, Any]) -> list[str]:
    """Idle, nothing queued, and the transcript ends in results the model never answered."""
    if document.get("state") != "IDLE" or document.get("turn") is not None:
        return []
    if any(document.get(key) for key in ("pending_input", "steering", "follow_ups")):
        return []
    if document.get("retry_point") is not None or document.get("detached"):
        return []  # a failed model call waits for retry(); background results are due
    transcript = document.get("transcript")
    last = transcript[-1] if isinstance(transcript, list) and transcript else None
    if not isinstance(last, Mapping) or last.get("kind") != "tool":
        return []
    return [
        "it awaits input but its transcript ends in tool results the model never answered "
        "(a turn ended at a limit, or was cut short): submit input, or continue_turn() "
        "to let the model answer them"
    ]
