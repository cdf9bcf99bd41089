"""The decisions of :class:`BackendSessionStore`: versions, fences, leases, claims, answers.

Plain synchronous functions over what a write read; each raises the typed
error with the message the user sees, or returns.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from ..core._errors import InvalidInputError
from ..loop._session_store import (
    ClaimError,
    LeaseHeldError,
    LeaseLostError,
    RecordedApproval,
    SessionStatus,
    SessionSummary,
    StaleSessionError,
    input_digest,
    pending_calls,
)
from ..loop._stored_answers import ANSWER_ACTIONS, PendingQuestion, pending_questions
from ..tools._questions import Question, QuestionAnswer, check_answer
from ._records import AnswerRow, DecisionRow, LeaseRecord, SessionMeta, timestamp

__all__ = [
    "check_acquire",
    "check_claim",
    "check_decision",
    "check_fence",
    "check_new_answer",
    "check_owner",
    "check_version",
    "decision_details",
    "is_ready",
    "with_details",
]


def check_owner(owner: str, operation: str) -> None:
    """``InvalidInputError`` unless ``owner`` is a non-empty str."""
    if not isinstance(owner, str) or not owner:
        raise InvalidInputError(f"cannot {operation}: owner must be a non-empty str, got {owner!r}")


def check_version(session_id: str, expected: int | None, found: int | None) -> None:
    """Refuse a save based on ``expected`` when the stored version is ``found`` (None: no row)."""
    if expected is None:
        return
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise InvalidInputError(
            f"cannot save checkpoint for session {session_id!r}: expected_version must be an "
            f"int >= 0 (0: the session must not exist yet), got {expected!r}"
        )
    stored = found or 0
    if stored == expected:
        return
    raise StaleSessionError(
        f"cannot save checkpoint for session {session_id!r}: the save was based on version "
        f"{expected}, but the store holds version {stored}"
        + (" (the session was deleted)" if found is None else "")
        + "; another writer saved it since: load the session again and redo the step",
        session_id=session_id,
        expected=expected,
        found=stored,
    )


def check_fence(
    session_id: str, token: int | None, lease: LeaseRecord | None, now: float, operation: str
) -> None:
    """Refuse a write whose ``token`` is not the current lease's (or unfenced under a live one)."""
    if token is None:
        if lease is not None and lease.live(now):
            raise LeaseLostError(
                f"cannot {operation}: session {session_id!r} is leased to {lease.owner!r} "
                f"(token {lease.token}) until {timestamp(lease.expires_at).isoformat()}; "
                "acquire the lease and pass its fencing_token",
                session_id=session_id,
            )
        return
    if isinstance(token, bool) or not isinstance(token, int):
        raise InvalidInputError(f"cannot {operation}: fencing_token must be an int, got {token!r}")
    if lease is None:
        found = "the session has no lease"
    elif lease.token != token:
        found = f"a newer lease (token {lease.token}, owner {lease.owner!r}) was granted"
    elif lease.released:
        found = "the lease was released"
    else:
        return
    raise LeaseLostError(
        f"cannot {operation}: fencing token {token} of session {session_id!r} is no longer "
        f"current: {found}; stop driving this session (another worker owns it)",
        session_id=session_id,
    )


def check_acquire(session_id: str, owner: str, lease: LeaseRecord | None, now: float) -> None:
    """Refuse a lease while another owner's is live."""
    if lease is None or not lease.live(now) or lease.owner == owner:
        return
    raise LeaseHeldError(
        f"cannot acquire session {session_id!r} for {owner!r}: it is leased to "
        f"{lease.owner!r} until {timestamp(lease.expires_at).isoformat()}; try another "
        "session or wait for the lease to expire",
        session_id=session_id,
        holder=lease.owner,
        expires_at=timestamp(lease.expires_at),
    )


def check_claim(
    session_id: str,
    call_id: str,
    digest: str,
    claimed: bool,
    decision: DecisionRow | None,
) -> None:
    """Refuse a claim of a call claimed before, denied, or approved for another digest."""
    prefix = f"cannot claim call {call_id!r} of session {session_id!r}"
    if not isinstance(digest, str) or not digest:
        raise InvalidInputError(
            f"{prefix}: input_digest must be a non-empty str (agentloop.store.input_digest), "
            f"got {digest!r}"
        )
    if claimed:
        raise _clash(
            session_id, call_id, "claimed",
            f"{prefix}: it was claimed before and may have run; answer it as in doubt, never "
            "run it again",
        )  # fmt: skip
    if decision is None:
        return
    if not decision.approved:
        raise _clash(
            session_id, call_id, "denied", f"{prefix}: a denial was recorded for it; answer it "
            "as denied",
        )  # fmt: skip
    if decision.input_digest != digest:
        raise _clash(
            session_id, call_id, "digest",
            f"{prefix}: the approval recorded for it was for input {decision.input_digest}, this "
            f"claim is for {digest}; ask for a new approval of these arguments",
        )  # fmt: skip


def check_decision(
    session_id: str,
    call_id: str,
    digest: str,
    approved: bool,
    existing: RecordedApproval | None,
    claimed: bool,
) -> bool:
    """Whether to write a decision (``False``: the same one is stored); ClaimError on a clash."""
    prefix = f"cannot record a decision on call {call_id!r} of session {session_id!r}"
    if not isinstance(digest, str) or not digest:
        raise InvalidInputError(f"{prefix}: input_digest must be a non-empty str, got {digest!r}")
    if not isinstance(approved, bool):
        raise InvalidInputError(f"{prefix}: approved must be a bool, got {approved!r}")
    if existing is not None:
        if existing.input_digest == digest and existing.approved == approved:
            return False
        raise _clash(
            session_id, call_id, "decided",
            f"{prefix}: it was already {'approved' if existing.approved else 'denied'} for "
            f"input {existing.input_digest}; a decision is final",
        )  # fmt: skip
    if claimed:
        raise _clash(
            session_id, call_id, "claimed",
            f"{prefix}: the call was already claimed (it may have run); a decision now would "
            "not be honoured",
        )  # fmt: skip
    return True


def _clash(session_id: str, call_id: str, reason: str, message: str) -> ClaimError:
    return ClaimError(message, session_id=session_id, call_id=call_id, reason=reason)


def decision_details(
    session_id: str, call_id: str, approved: bool, reason: Any, edited_input: Any
) -> tuple[str | None, str | None]:
    """A decision's ``reason`` and ``edited_input`` as stored: the reason, the input as JSON text.

    ``InvalidInputError`` for a reason that is not a str (or not encodable
    text), an edited input with a denial, or one that is not JSON.
    """
    where = f"cannot record a decision on call {call_id!r} of session {session_id!r}"
    if reason is not None and not isinstance(reason, str):
        raise InvalidInputError(f"{where}: reason must be a str or None, got {reason!r}")
    if reason is not None and not reason.isascii():
        try:
            reason.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(
                f"{where}: the reason is not valid Unicode text (a lone surrogate), got {reason!r}"
            ) from None
    if edited_input is None:
        return reason, None
    if not approved:
        raise InvalidInputError(
            f"{where}: a denial has no edited input; pass edited_input only with approved=True"
        )
    try:
        input_digest("edited", edited_input)  # InvalidInputError unless it is JSON
    except InvalidInputError as error:
        detail = str(error).removeprefix("cannot digest the input of tool 'edited': ")
        raise InvalidInputError(f"{where}: the edited input is not JSON: {detail}") from None
    return reason, json.dumps(edited_input, ensure_ascii=False, allow_nan=False)


def with_details(summary: SessionSummary, head: object) -> SessionSummary:
    """``summary`` with its undecided calls (tool, input, digest) and its unanswered
    questions, read from its stored head: the JSON text a store keeps (the saved round
    is in it); a head that is not JSON adds nothing."""
    document = _document(head)
    if document is None:
        return summary
    return attrs.evolve(
        summary,
        undecided_calls=pending_calls(document, summary.undecided),
        unanswered_questions=pending_questions(document, summary.unanswered),
    )


def _document(head: object) -> dict[str, Any] | None:
    """A stored head's document (``None``: not a JSON object)."""
    try:
        document = json.loads(head) if isinstance(head, str) else None
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def is_ready(meta: SessionMeta, undecided: tuple[str, ...], now: float) -> bool:
    """Whether a worker can advance a session at ``now``: not under a live lease, and ready
    or with every pending approval decided (every pending question answered)."""
    if meta.lease is not None and meta.lease.live(now):
        return False
    if meta.status is SessionStatus.READY:
        return True
    waits = meta.status in (SessionStatus.AWAITING_APPROVAL, SessionStatus.AWAITING_ANSWER)
    return waits and bool(meta.pending) and not undecided


def check_new_answer(
    session_id: str,
    question_id: str,
    meta: SessionMeta,
    head: object,
    existing: AnswerRow | None,
    action: object,
    content: object,
) -> None:
    """Raise unless the answer may be recorded: ``ClaimError`` when the session does not
    wait on the question (``"not_pending"``) or it was answered (``"answered"``),
    ``InvalidInputError`` when the answer does not fit."""
    where = f"record an answer to question {question_id!r} of session {session_id!r}"
    if action not in ANSWER_ACTIONS:
        raise InvalidInputError(
            f"cannot {where}: action must be one of accept, decline, cancel; got {action!r}"
        )
    if existing is not None:
        raise _clash(
            session_id, question_id, "answered",
            f"cannot {where}: it was already answered ({existing.action}, at "
            f"{timestamp(existing.answered_at).isoformat()}); an answer is final",
        )  # fmt: skip
    document = _document(head)
    found = () if document is None else pending_questions(document, (question_id,))
    status = meta.status
    waiting = list(meta.pending) if status is SessionStatus.AWAITING_ANSWER else []
    if question_id not in waiting or not found:
        raise _clash(
            session_id, question_id, "not_pending",
            f"cannot {where}: the session does not wait on that question (its status is "
            f"{status.value}, waiting on {waiting}); answer a question listed by "
            "sessions_awaiting_answer()",
        )  # fmt: skip
    _check_fits(found[0], str(action), content, where)


def _check_fits(pending: PendingQuestion, action: str, content: object, where: str) -> None:
    if action == "accept" and not pending.resumable:
        raise InvalidInputError(
            f"cannot {where}: call {pending.call_id} ({pending.tool_name}) cannot go on from "
            "an answer recorded now (its question has no resume data: the process that asked "
            "it is gone, so resuming the session answers the call in doubt); decline or "
            "cancel it instead"
        )
    try:
        # Encoded too: a lone surrogate (a JSON escape can carry one) is not text to store.
        json.dumps(content, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"cannot {where}: the content is not JSON ({error})") from None
    question = Question(
        pending.kind, pending.message, None if pending.schema is None else dict(pending.schema)
    )
    check_answer(question, QuestionAnswer(action, content), f"cannot {where}")
