"""What a session store is: the ``SessionStore`` protocol, its values and its errors.

A store keeps, per session: the last checkpoint document a driver saved (with
a version that changes at every save), the session's lease (who may write it
now, and its fencing token), the tool calls claimed before they ran, and the
approval decisions recorded for its calls. ``agentloop.store`` re-exports
these names; this module imports nothing outside ``core`` so the loop can
depend on it without a cycle. See ``docs/store.md``, "Running many workers".
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import attrs

from ..core._errors import AgentLoopError, InvalidInputError
from ..core._items import Item
from ._stored_answers import PendingQuestion, RecordedAnswer, question_ids

__all__ = [
    "AnswerStore",
    "InDoubtStore",
    "RecordedApproval",
    "Claim",
    "ClaimError",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "PendingCall",
    "PendingQuestion",
    "RecordedAnswer",
    "SessionInfo",
    "SessionStatus",
    "SessionStore",
    "SessionSummary",
    "StaleSessionError",
    "StoredSession",
    "check_ttl",
    "input_digest",
    "pending_calls",
    "summarize",
]


# -- errors ---------------------------------------------------------------------------


class StaleSessionError(AgentLoopError):
    """Raised when a save was based on a version the session has moved on from.

    Nothing was written. ``expected`` is the version the save was based on
    (``0``: "the session must not exist yet"), ``found`` the stored one
    (``0`` when there is none). Reload the session and redo the step.
    """

    def __init__(self, message: str, *, session_id: str, expected: int, found: int) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.expected = expected
        self.found = found


class LeaseError(AgentLoopError):
    """Raised when a lease cannot be taken or no longer covers an operation."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class LeaseHeldError(LeaseError):
    """Raised when ``acquire`` finds a live lease of another owner; ``holder`` names it."""

    def __init__(self, message: str, *, session_id: str, holder: str, expires_at: datetime) -> None:
        super().__init__(message, session_id=session_id)
        self.holder = holder
        self.expires_at = expires_at


class LeaseLostError(LeaseError):
    """Raised when a fenced operation's token is not the session's current lease.

    A newer lease was granted (the old one expired and another worker took
    the session over), the lease was released, or an unfenced write met a
    live lease. Nothing was written; stop driving the session.
    """


class ClaimError(AgentLoopError):
    """Raised when a tool call cannot be claimed: it was claimed before, or denied.

    ``reason`` is ``"claimed"`` (the call was claimed already: it may have
    run), ``"denied"`` (a denial was recorded for it) or ``"digest"`` (the
    recorded approval was for other input). Nothing was written.
    """

    def __init__(self, message: str, *, session_id: str, call_id: str, reason: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.call_id = call_id
        self.reason = reason


# -- values ---------------------------------------------------------------------------


class SessionStatus(StrEnum):
    """What a saved session waits for, derived from its document at every save."""

    AWAITING_INPUT = "awaiting_input"
    """At rest: nothing to do until the host submits input."""
    AWAITING_APPROVAL = "awaiting_approval"
    """A tool round waits for approval decisions (``pending_approvals``)."""
    AWAITING_ANSWER = "awaiting_answer"
    """A running call waits for the answer to its question (``pending_questions``)."""
    AWAITING_RESOLUTION = "awaiting_resolution"
    """A call left in doubt by a restore waits for the host to settle, fail or run it again
    (``CallInDoubt``; the agent opted in with ``ask_in_doubt()``)."""
    READY = "ready"
    """A worker can call ``next()`` now: a paused round, or queued input."""


@attrs.frozen(kw_only=True)
class Lease:
    """The right to write one session until ``expires_at`` (UTC, the store's clock).

    ``token`` is the fencing token: it grows with every lease the store
    grants, so a save or claim carrying an older token is refused.
    """

    session_id: str
    owner: str
    token: int
    expires_at: datetime


@attrs.frozen(kw_only=True)
class Claim:
    """A tool call claimed before it ran: it never runs again, whoever asks."""

    session_id: str
    call_id: str
    tool_name: str
    input_digest: str | None
    claimed_at: datetime


@attrs.frozen(kw_only=True)
class RecordedApproval:
    """An approval decision recorded for a call, bound to the input it approved.

    ``reason`` is the text given with the decision (a denial's reason is what
    the model sees). ``edited_input`` is the input an approval with edited
    arguments runs with, and ``input_digest`` is its digest; ``None`` when the
    call runs with its own input. A driver resuming the session applies the
    decision exactly (``Agent.resume(session_id=...)``). Decisions recorded
    before the store kept these two fields load with both ``None``.

    ``newly_recorded`` is ``True`` on the value ``record_approval`` returns
    when that call wrote the decision, ``False`` when it found the same
    decision recorded already (and on every loaded decision). It takes no
    part in equality: a recorded decision equals the same one loaded back.
    """

    session_id: str
    call_id: str
    input_digest: str
    approved: bool
    decided_at: datetime
    reason: str | None = None
    edited_input: Any = None
    newly_recorded: bool = attrs.field(default=False, eq=False)


@attrs.frozen(kw_only=True)
class StoredSession:
    """A session as loaded from a store.

    ``checkpoint`` is deep-equal to the last document saved; ``started_calls``
    are the calls claimed (or recorded as started) that have no tool result
    in that checkpoint's transcript (calls in doubt); ``updated_at`` is in
    UTC. ``version`` is what a save based on this document passes as
    ``expected_version``; ``approvals`` are the decisions recorded per call.
    """

    session_id: str
    checkpoint: dict[str, Any]
    started_calls: frozenset[str]
    updated_at: datetime
    version: int = 0
    status: SessionStatus = SessionStatus.AWAITING_INPUT
    approvals: Mapping[str, RecordedApproval] = attrs.field(factory=dict)
    answers: Mapping[str, RecordedAnswer] = attrs.field(factory=dict)
    """The answers recorded for the questions the session waits on, by question id."""


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One row of :meth:`SessionStore.list_sessions`: a session and its size."""

    session_id: str
    updated_at: datetime
    item_count: int


@attrs.frozen(kw_only=True)
class PendingCall:
    """A call of a saved round that waits for a decision: what an approver is shown.

    ``input_digest`` is ``input_digest(tool_name, input)``: pass it to
    ``record_approval`` to approve or deny exactly this input.
    """

    call_id: str
    tool_name: str
    input: Any
    input_digest: str


@attrs.frozen(kw_only=True)
class SessionSummary:
    """One row of the inbox queries: a session, its status and what it waits for.

    ``pending_approvals`` are the calls of the saved round that wait for a
    decision; ``undecided`` those of them with no decision recorded yet.
    ``undecided_calls`` gives each undecided call's tool, input and digest,
    in the same order; ``sessions_awaiting_approval`` fills it (the rows of
    ``sessions_ready`` have no undecided call).
    """

    session_id: str
    status: SessionStatus
    version: int
    updated_at: datetime
    pending_approvals: tuple[str, ...]
    undecided: tuple[str, ...]
    undecided_calls: tuple[PendingCall, ...] = ()
    pending_questions: tuple[str, ...] = ()
    """The ids of the questions the session waits on (status ``awaiting_answer``)."""
    unanswered: tuple[str, ...] = ()
    """Those of them with no answer recorded yet."""
    unanswered_questions: tuple[PendingQuestion, ...] = ()
    """The unanswered questions, in the same order; ``sessions_awaiting_answer`` fills it."""


# -- pure helpers ----------------------------------------------------------------------


def input_digest(tool_name: str, tool_input: Any) -> str:
    """The SHA-256 of a call's tool name and input, as canonical JSON (sorted keys).

    An approval and a claim carry this digest, so an approval is bound to
    the exact arguments it was shown. ``InvalidInputError`` if the input is
    not JSON.
    """
    try:
        _check_json_keys(tool_input)
        text = json.dumps(
            [tool_name, tool_input],
            sort_keys=True,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        ).encode("utf-8")  # a lone surrogate raises here (UnicodeEncodeError, a ValueError)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(
            f"cannot digest the input of tool {tool_name!r}: {error}; pass JSON values"
        ) from None
    return "sha256:" + hashlib.sha256(text).hexdigest()


def _check_json_keys(value: Any) -> None:
    """``TypeError`` for a non-string key anywhere (``json.dumps`` would turn 1 into "1")."""
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                raise TypeError(f"the key {key!r} is not a str")
            _check_json_keys(element)
    elif isinstance(value, list | tuple):
        for element in value:
            _check_json_keys(element)


def summarize(document: Mapping[str, Any]) -> tuple[SessionStatus, tuple[str, ...]]:
    """A document's status and the ids of its calls awaiting approval.

    ``state`` ``AWAITING_APPROVAL`` -> awaiting approval (the round's calls
    with status ``awaiting_approval``); ``AFTER_TOOL_RESULT``, or ``IDLE``
    with queued ``pending_input``/``steering``/``follow_ups`` or a turn still
    open (saved by an older agentloop before its next model call) -> ready;
    ``AWAITING_ANSWER`` -> awaiting answer (the ids of the questions the round's
    calls wait on, in place of calls); ``AWAITING_RESOLUTION`` -> awaiting
    resolution (no ids: the calls in doubt are in the document); anything else
    -> awaiting input. Never raises on odd documents.
    """
    state = document.get("state")
    if state == "AWAITING_APPROVAL":
        return SessionStatus.AWAITING_APPROVAL, _pending_approvals(document)
    if state == "AWAITING_ANSWER":
        return SessionStatus.AWAITING_ANSWER, question_ids(document)
    if state == "AWAITING_RESOLUTION":
        return SessionStatus.AWAITING_RESOLUTION, ()
    if state == "AFTER_TOOL_RESULT":
        return SessionStatus.READY, ()

    if state == "IDLE" and (
        isinstance(document.get("turn"), Mapping) or any(document.get(key) for key in _QUEUES)
    ):
        return SessionStatus.READY, ()
    return SessionStatus.AWAITING_INPUT, ()


_QUEUES = ("pending_input", "steering", "follow_ups")


def _pending_approvals(document: Mapping[str, Any]) -> tuple[str, ...]:
    turn = document.get("turn")
    tool_round = turn.get("round") if isinstance(turn, Mapping) else None
    calls = tool_round.get("calls") if isinstance(tool_round, Mapping) else None
    pending: list[str] = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping) or call.get("status") != "awaiting_approval":
            continue
        inner = call.get("call")
        call_id = inner.get("id") if isinstance(inner, Mapping) else None
        if isinstance(call_id, str):
            pending.append(call_id)
    return tuple(pending)


def pending_calls(
    document: Mapping[str, Any], call_ids: tuple[str, ...]
) -> tuple[PendingCall, ...]:
    """The calls ``call_ids`` of the document's saved round, with tool, input and digest.

    In the order of ``call_ids``; a call the round does not hold, or whose
    input is not JSON, is left out. Never raises on odd documents.
    """
    turn = document.get("turn")
    tool_round = turn.get("round") if isinstance(turn, Mapping) else None
    calls = tool_round.get("calls") if isinstance(tool_round, Mapping) else None
    found: dict[str, PendingCall] = {}
    for entry in calls if isinstance(calls, list) else ():
        inner = entry.get("call") if isinstance(entry, Mapping) else None
        if not isinstance(inner, Mapping):
            continue
        call_id, name, arguments = inner.get("id"), inner.get("name"), inner.get("input")
        if not isinstance(call_id, str) or call_id not in call_ids or not isinstance(name, str):
            continue
        try:
            digest = input_digest(name, arguments)
        except InvalidInputError:
            continue
        found[call_id] = PendingCall(
            call_id=call_id, tool_name=name, input=arguments, input_digest=digest
        )
    return tuple(found[call_id] for call_id in call_ids if call_id in found)


def check_ttl(ttl: float, operation: str) -> float:
    """``ttl`` as seconds, ``InvalidInputError`` unless it is a finite number > 0."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvalidInputError(f"cannot {operation}: ttl must be seconds > 0, got {ttl!r}")
    if ttl <= 0:
        raise InvalidInputError(f"cannot {operation}: ttl must be seconds > 0, got {ttl!r}")
    return float(ttl)


# -- the protocol ------------------------------------------------------------------------


@runtime_checkable
class SessionStore(Protocol):
    """Durable storage for checkpoint documents, leases, claims and approvals.

    Every method is safe to call from several tasks (and, for a shared
    database, several processes) at once. Run
    :mod:`agentloop.testing.store_conformance` against an implementation to
    check it keeps this contract.

    Defaults keep single-process callers working unchanged: a save without
    ``expected_version`` overwrites whatever is stored, and an unfenced
    operation (no ``fencing_token``) is accepted unless a live lease is held.
    """

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        """Replace the session's document, atomically; return its new version.

        ``expected_version`` is the version the document was based on
        (``StoredSession.version``, or the value the last save returned; ``0``
        for a session that must not exist yet): a store whose session moved on
        raises ``StaleSessionError``. ``fencing_token`` is the caller's
        lease token: ``LeaseLostError`` when it is not the current lease's, or
        when it is ``None`` and another owner's lease is live. Raises
        ``CheckpointError`` when the document has no ``format``/``version``,
        names another session, has no transcript list or holds a value JSON
        cannot represent exactly. Whatever it raises, nothing was written.
        """
        ...

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run; durable before it returns.

        The unfenced, repeatable form of :meth:`claim` kept for
        single-process drivers: recording a call twice is allowed.
        """
        ...

    async def claim(
        self,
        session_id: str,
        call_id: str,
        *,
        tool_name: str,
        input_digest: str,
        fencing_token: int | None = None,
    ) -> Claim:
        """Claim ``call_id`` before running it, atomically and once.

        Raises ``ClaimError`` when the call was claimed or recorded as started
        before (reason ``"claimed"``), when a denial was recorded for it
        (``"denied"``) or an approval for another digest (``"digest"``), and
        ``LeaseLostError`` as :meth:`save_checkpoint` does. A claim stays
        after the call's result is saved: it can never be claimed again.
        """
        ...

    async def record_approval(
        self,
        session_id: str,
        call_id: str,
        *,
        input_digest: str,
        approved: bool,
        reason: str | None = None,
        edited_input: Any = None,
    ) -> RecordedApproval:
        """Record the decision on ``call_id`` for the input with ``input_digest``.

        ``reason`` (a str) and ``edited_input`` (a JSON value: the edited
        arguments of an approval, whose digest is ``input_digest``) are kept
        with the decision, so whichever process resumes the session applies
        it exactly. Needs no lease (an approval UI answers from another
        process). Returns the decision with ``newly_recorded=True``. The same
        decision (``approved`` and ``input_digest``) again returns the stored
        one, with ``newly_recorded=False``; a different one raises ``ClaimError`` (reason
        ``"decided"``), and so does a decision on a call already claimed
        (``"claimed"``). ``InvalidInputError`` for a reason that is not a str,
        or an ``edited_input`` with a denial or that is not JSON.
        """
        ...

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Lease:
        """Lease the session to ``owner`` for ``ttl`` seconds, with a new fencing token.

        Raises ``LeaseHeldError`` when another owner's lease is live. A
        session need not have a document yet. An expired lease is taken over.
        """
        ...

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        """Lease one session that is ready to advance and not leased, or ``None``."""
        ...

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` to ``ttl`` seconds from now; ``LeaseLostError`` if it is not current."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` up; its token is refused from now on. No-op if not current."""
        ...

    async def sessions_awaiting_approval(self) -> list[SessionSummary]:
        """Sessions whose saved round has a call with no recorded decision, oldest first.

        Each row's ``undecided_calls`` gives those calls' tool, input and digest.
        """
        ...

    async def sessions_ready(self) -> list[SessionSummary]:
        """Sessions a worker can advance now, not under a live lease, oldest first.

        Ready: status ``READY``, ``AWAITING_APPROVAL`` with a decision recorded
        for every pending call, or ``AWAITING_ANSWER`` with an answer recorded
        for every question it waits on.
        """
        ...

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document, version and calls in doubt, or ``None``.

        Raises ``CheckpointError`` naming the session and the row when a
        stored row is damaged; nothing is returned then.
        """
        ...

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Forget the session, its lease, claims and approvals; ``True`` if it had a document."""
        ...

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None`` if never saved."""
        ...


@runtime_checkable
class AnswerStore(Protocol):
    """A store that also keeps answers to the questions its sessions wait on.

    Every store of ``agentloop.store`` is one (``BackendSessionStore``); a
    ``SessionStore`` written before it (a wrapper, say) need not be: the
    inbox then cannot answer questions, and a worker finds no answers
    (``StoredSession.answers`` stays empty).
    """

    async def record_answer(
        self, session_id: str, question_id: str, *, action: str, content: Any = None
    ) -> RecordedAnswer:
        """Record the answer to ``question_id``, a question the saved session waits on.

        ``action`` is ``"accept"`` (``content`` must match the question's
        schema), ``"decline"`` or ``"cancel"`` (no content); a question whose
        call cannot resume from an answer takes only a decline or cancel.
        Needs no lease; the worker resuming the session hands the answer to the
        question asked again. An answer is final: a second one raises
        ``ClaimError`` (reason ``"answered"``), an answer to a question the
        session does not wait on ``ClaimError`` (``"not_pending"``), and one
        that does not fit ``InvalidInputError``; nothing is written then.
        """
        ...

    async def sessions_awaiting_answer(self) -> list[SessionSummary]:
        """Sessions waiting on a question with no answer recorded, oldest first.

        Each row's ``unanswered_questions`` gives those questions.
        """
        ...


@runtime_checkable
class InDoubtStore(Protocol):
    """A store that lists the sessions resting on a call in doubt (status
    ``awaiting_resolution``), for an inbox. Every store of ``agentloop.store`` is one."""

    async def sessions_awaiting_resolution(self) -> list[SessionSummary]:
        """Sessions resting on a call in doubt the host has not resolved, oldest first."""
        ...
