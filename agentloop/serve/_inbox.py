"""What the pages show, read from stored sessions: pure functions, no I/O.

``pending_approvals`` turns a stored checkpoint document into the inbox's
rows; ``session_view`` turns a session's transcript into the read-only view.
Everything here is data; escaping happens in the templates (autoescape).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from ..core._items import (
    Item,
    ItemKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_outcome,
)
from ..host._problems import session_problems
from ..loop._session_store import StoredSession, input_digest
from ._redact import Redactor

__all__ = [
    "InboxRow",
    "PermissionLine",
    "SessionView",
    "TranscriptEntry",
    "pending_approvals",
    "pretty",
    "round_call_ids",
    "session_view",
    "waiting_calls",
]


def pretty(value: Any) -> str:
    """Indented JSON for display (non-ASCII kept)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@attrs.frozen(kw_only=True)
class PermissionLine:
    """One permission request behind an approval: its kind, summary and reason."""

    kind: str
    summary: str
    reason: str


@attrs.frozen(kw_only=True)
class InboxRow:
    """One tool call of a session waiting for a decision (an inbox row).

    ``input`` is the model's input as stored (the digest is over it);
    ``display_input`` is the same, redacted, for the page.
    """

    session_id: str
    agent: str
    call_id: str
    tool_name: str
    input: Any
    display_input: str
    digest: str
    requests: tuple[PermissionLine, ...]
    asked_at: datetime | None
    deadline: datetime | None
    schema: Any
    version: int

    def expired(self, now: datetime) -> bool:
        """Whether the deadline has passed at ``now``."""
        return self.deadline is not None and now >= self.deadline


def pending_approvals(
    stored: StoredSession,
    *,
    schemas: Mapping[str, Any],
    agent_name: str,
    ttl: float | None,
    redactor: Redactor,
) -> list[InboxRow]:
    """The calls of ``stored``'s round that await approval and have no decision recorded."""
    document = stored.checkpoint
    if document.get("state") != "AWAITING_APPROVAL":
        return []
    config = document.get("config")
    metadata = config.get("metadata") if isinstance(config, Mapping) else None
    agent = metadata.get("agent") if isinstance(metadata, Mapping) else None
    asked = _asked_times(document.get("transcript"))
    rows: list[InboxRow] = []
    for call in _round_calls(document):
        inner = call.get("call")
        if call.get("status") != "awaiting_approval" or not isinstance(inner, Mapping):
            continue
        call_id, name, tool_input = inner.get("id"), inner.get("name"), inner.get("input")
        if not isinstance(call_id, str) or not isinstance(name, str):
            continue
        if call_id in stored.approvals:
            continue
        approval = call.get("approval")
        approval = approval if isinstance(approval, Mapping) else {}
        asked_at = asked.get(call_id)
        rows.append(
            InboxRow(
                session_id=stored.session_id,
                agent=redactor.text(str(agent)) if agent else agent_name,
                call_id=call_id,
                tool_name=name,
                input=tool_input,
                display_input=pretty(redactor.json(tool_input)),
                digest=input_digest(name, tool_input),
                requests=_requests(approval, redactor),
                asked_at=asked_at,
                deadline=_deadline(approval, asked_at, ttl),
                schema=schemas.get(name),
                version=stored.version,
            )
        )
    return rows


def find_call(document: Mapping[str, Any], call_id: str) -> Mapping[str, Any] | None:
    """The round call ``call_id`` of the document's current turn, or ``None``."""
    for call in _round_calls(document):
        inner = call.get("call")
        if isinstance(inner, Mapping) and inner.get("id") == call_id:
            return call
    return None


def round_call_ids(document: Mapping[str, Any]) -> list[str]:
    """The ids of the calls in the document's current tool round."""
    ids = []
    for call in _round_calls(document):
        inner = call.get("call")
        if isinstance(inner, Mapping) and isinstance(inner.get("id"), str):
            ids.append(inner["id"])
    return ids


def waiting_calls(document: Mapping[str, Any]) -> dict[str, str]:
    """The round's calls waiting on an approval (decided or not): call id -> tool name."""
    waiting: dict[str, str] = {}
    for call in _round_calls(document):
        inner = call.get("call")
        if call.get("status") == "awaiting_approval" and isinstance(inner, Mapping):
            waiting[str(inner.get("id"))] = str(inner.get("name"))
    return waiting


def _round_calls(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    turn = document.get("turn")
    tool_round = turn.get("round") if isinstance(turn, Mapping) else None
    calls = tool_round.get("calls") if isinstance(tool_round, Mapping) else None
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _asked_times(transcript: Any) -> dict[str, datetime]:
    """When each tool call was made: its assistant item's ``created_at``."""
    times: dict[str, datetime] = {}
    for item in transcript if isinstance(transcript, list) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("created_at"), int | float):
            continue
        when = datetime.fromtimestamp(float(item["created_at"]), UTC)
        for part in item.get("parts") or ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call":
                times[str(part.get("id"))] = when
    return times


def _requests(approval: Mapping[str, Any], redactor: Redactor) -> tuple[PermissionLine, ...]:
    metadata = approval.get("metadata")
    listed = metadata.get("requests") if isinstance(metadata, Mapping) else None
    entries = listed if isinstance(listed, list) else [approval]
    lines = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        lines.append(
            PermissionLine(
                kind=redactor.text(str(entry.get("request_kind") or entry.get("kind") or "")),
                summary=redactor.text(str(entry.get("summary") or "")),
                reason=redactor.text(str(entry.get("reason") or "")),
            )
        )
    return tuple(lines)


def _deadline(
    approval: Mapping[str, Any], asked_at: datetime | None, ttl: float | None
) -> datetime | None:
    metadata = approval.get("metadata")
    stated = metadata.get("deadline") if isinstance(metadata, Mapping) else None
    if isinstance(stated, int | float) and not isinstance(stated, bool):
        return datetime.fromtimestamp(float(stated), UTC)
    if isinstance(stated, str):
        try:
            parsed = datetime.fromisoformat(stated)
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if ttl is not None and asked_at is not None:
        return asked_at + timedelta(seconds=ttl)
    return None


# -- the session view ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TranscriptEntry:
    """One block of the rendered transcript.

    ``kind`` is the item kind, or ``"tool_call"`` for a call with its
    ``result`` text and ``outcome`` (``denied``, ``cancelled``, ``in_doubt``...,
    ``error``, ``ok``; ``waiting_for_approval`` or ``waiting_for_a_worker``
    while its round waits). ``edited_arguments`` are the arguments the call
    was approved with when a person edited them (``arguments`` stay the
    model's).
    """

    kind: str
    text: str = ""
    tool_name: str = ""
    call_id: str = ""
    arguments: str = ""
    result: str = ""
    outcome: str = ""
    edited_arguments: str = ""


@attrs.frozen(kw_only=True)
class SessionView:
    """The read-only session page: transcript, usage, cost and state.

    ``waiting`` says, per call of a round waiting on approvals, what it
    waits for ("waiting for approval of call call-1 (publish_report)").
    """

    session_id: str
    state: str
    status: str
    version: int
    updated_at: datetime
    entries: tuple[TranscriptEntry, ...]
    usage: Mapping[str, Any]
    pending: tuple[str, ...]
    decided: Mapping[str, bool]
    in_doubt: tuple[str, ...]
    waiting: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    """How the stored status disagrees with the transcript (``session_problems``)."""


def session_view(stored: StoredSession, items: Sequence[Item], redactor: Redactor) -> SessionView:
    """The view of ``stored`` whose transcript is ``items``."""
    document = stored.checkpoint
    waiting = waiting_calls(document)
    usage = document.get("session_usage")
    return SessionView(
        session_id=stored.session_id,
        state=str(document.get("state", "")),
        status=stored.status.value,
        version=stored.version,
        updated_at=stored.updated_at,
        entries=tuple(_entries(stored, items, waiting, redactor)),
        usage=usage if isinstance(usage, Mapping) else {},
        pending=tuple(redactor.text(call_id) for call_id in waiting),
        decided={redactor.text(c): a.approved for c, a in stored.approvals.items()},
        in_doubt=tuple(sorted(redactor.text(c) for c in stored.started_calls)),
        waiting=tuple(_waiting_line(stored, c, t, redactor) for c, t in waiting.items()),
        problems=tuple(redactor.text(problem) for problem in session_problems(stored)),
    )


def _waiting_line(stored: StoredSession, call_id: str, tool: str, redactor: Redactor) -> str:
    shown = f"call {redactor.text(call_id)} ({redactor.text(tool)})"
    decision = stored.approvals.get(call_id)
    if decision is None:
        return f"waiting for approval of {shown}"
    verdict = "approved" if decision.approved else "denied"
    if decision.edited_input is not None:
        verdict += " with edited arguments"
    return f"{shown} {verdict}; waiting for a worker to resume the session"


def _entries(
    stored: StoredSession, items: Sequence[Item], waiting: Mapping[str, str], redactor: Redactor
) -> list[TranscriptEntry]:
    results: dict[str, ToolResultPart] = {}
    for item in items:
        for part in item.parts:
            if isinstance(part, ToolResultPart):
                results[part.call_id] = part
    shown: set[str] = set()
    entries: list[TranscriptEntry] = []
    for item in items:
        texts = [
            p.text if isinstance(p, TextPart) else f"(reasoning) {p.text}"
            for p in item.parts
            if isinstance(p, TextPart | ReasoningPart) and not getattr(p, "redacted", False)
        ]
        if texts and item.kind is not ItemKind.TOOL:
            entries.append(
                TranscriptEntry(kind=item.kind.value, text=redactor.text("\n".join(texts)))
            )
        for part in item.parts:
            if isinstance(part, ToolCallPart):
                shown.add(part.id)
                outcome = _open_outcome(stored, part.id, waiting)
                entries.append(_call_entry(part, results.get(part.id), outcome, stored, redactor))
            elif isinstance(part, ToolResultPart) and part.call_id not in shown:
                entries.append(
                    TranscriptEntry(
                        kind="tool_result",
                        call_id=redactor.text(part.call_id),
                        result=redactor.text(_output_text(part.output)),
                        outcome=_outcome(part),
                    )
                )
    return entries


def _open_outcome(stored: StoredSession, call_id: str, waiting: Mapping[str, str]) -> str:
    """The outcome shown for a call that has no result yet."""
    if call_id not in waiting:
        return "pending"
    return "waiting_for_a_worker" if call_id in stored.approvals else "waiting_for_approval"


def _call_entry(
    part: ToolCallPart,
    result: ToolResultPart | None,
    open_outcome: str,
    stored: StoredSession,
    redactor: Redactor,
) -> TranscriptEntry:
    decision = stored.approvals.get(part.id)
    edited = None if decision is None else decision.edited_input
    return TranscriptEntry(
        kind="tool_call",
        tool_name=redactor.text(part.name),
        call_id=redactor.text(part.id),
        arguments=pretty(redactor.json(part.input)),
        result="" if result is None else redactor.text(_output_text(result.output)),
        outcome=open_outcome if result is None else _outcome(result),
        edited_arguments="" if edited is None else pretty(redactor.json(edited)),
    )


def _outcome(result: ToolResultPart) -> str:
    outcome = result_outcome(result)
    if outcome is not None:
        return outcome.value
    return "error" if result.is_error else "ok"


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = [p.text for p in output if isinstance(p, TextPart)]
        if len(texts) == len(output):
            return "\n".join(texts)
    try:
        from ..loop._converter import unstructure

        return pretty(unstructure(output))
    except Exception:
        return repr(output)
