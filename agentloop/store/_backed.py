"""``BackendSessionStore``: the whole ``SessionStore`` contract over a ``StorageBackend``.

Every rule lives here once, on the backend's few primitives (docs/store.md,
"Writing a store"): saves (:mod:`._saves`), leases and fencing, single-use
claims, final decisions bound to a digest, inbox status and the queries. Each
write decides (:mod:`._rules`) on the head it read and commits on its revision
(:meth:`Heads.update`), so every decision is made on the state it changes; a
load checks the head's revision did not move while it read the rows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import anyio.lowlevel
import attrs

from ..core._items import Item
from ..loop._session_store import (
    Claim,
    Lease,
    RecordedAnswer,
    RecordedApproval,
    SessionInfo,
    SessionStatus,
    SessionSummary,
    StoredSession,
    check_ttl,
)
from ._backend import BackendHead, StorageBackend
from ._codec import TURN_LISTS, answered_call_ids, decode_stored
from ._heads import AGAIN, CLAIMS, DECISIONS, Again, Change, Heads, retried
from ._history import DEFAULT_HISTORY_LIMIT, check_limit
from ._records import (
    ANSWERS,
    ITEMS,
    TURN_LIST_PREFIX,
    AnswerRow,
    ClaimRow,
    DecisionRow,
    LeaseRecord,
    SessionMeta,
    encode_record,
    timestamp,
)
from ._rules import (
    check_acquire,
    check_claim,
    check_decision,
    check_fence,
    check_new_answer,
    check_owner,
    decision_details,
    is_ready,
    with_details,
)
from ._saves import Saves
from ._time_travel import StepHistory

__all__ = ["TOKENS", "BackendSessionStore"]

TOKENS = "tokens"
"""The counter of fencing tokens."""


class BackendSessionStore(StepHistory):
    """A :class:`~agentloop.store.SessionStore` built on a :class:`StorageBackend`.

    ``backend`` provides the atomic primitives; this class keeps every rule
    of the protocol. Leases expire by this process's clock. ``aclose`` (or
    leaving ``async with``) closes the backend. ``history_limit`` is how many
    of each session's latest saved steps are kept addressable at least
    (:meth:`history`, :meth:`load_step`, :meth:`fork`, :meth:`rewind`, from
    :class:`StepHistory`; ``0``: none); ``InvalidInputError`` unless an int >= 0.
    """

    def __init__(
        self, backend: StorageBackend, *, history_limit: int = DEFAULT_HISTORY_LIMIT
    ) -> None:
        self.backend = backend
        self.history_limit = check_limit(history_limit)
        self._heads = Heads(backend)
        self._saves = Saves(self._heads, lambda: self.history_limit)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the backend."""
        await self.backend.aclose()

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        """Replace the session's document (see :meth:`SessionStore.save_checkpoint`); the
        save is the session's next step in its history (see :meth:`history`)."""
        return await self._saves.save(session_id, checkpoint, expected_version, fencing_token)

    # -- claims and decisions ----------------------------------------------------------

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run (again, if it was)."""
        operation = f"record call {call_id!r} of session {session_id!r} as started"

        async def decide(_head: BackendHead | None, meta: SessionMeta) -> Change[None]:
            check_fence(session_id, None, meta.lease, time.time(), operation)
            row = ClaimRow(tool_name=tool_name, input_digest=None, claimed_at=time.time())
            return Change(None, claims={call_id: row})

        await self._heads.update(session_id, decide)

    async def claim(
        self,
        session_id: str,
        call_id: str,
        *,
        tool_name: str,
        input_digest: str,
        fencing_token: int | None = None,
    ) -> Claim:
        """Claim ``call_id`` once (see :meth:`SessionStore.claim`)."""
        operation = f"claim call {call_id!r} of session {session_id!r}"

        async def decide(_head: BackendHead | None, meta: SessionMeta) -> Change[Claim]:
            check_fence(session_id, fencing_token, meta.lease, time.time(), operation)
            claimed = await self.backend.read_rows(session_id, CLAIMS, (call_id,))
            decision = await self._heads.row(session_id, DECISIONS, DecisionRow, call_id)
            check_claim(session_id, call_id, input_digest, call_id in claimed, decision)
            row = ClaimRow(tool_name=tool_name, input_digest=input_digest, claimed_at=time.time())
            return Change(row.claim(session_id, call_id), claims={call_id: row})

        return await self._heads.update(session_id, decide)

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
        """Record a decision on ``call_id`` (see :meth:`SessionStore.record_approval`)."""

        async def decide(_head: BackendHead | None, _meta: SessionMeta) -> Change[RecordedApproval]:
            found = await self._heads.row(session_id, DECISIONS, DecisionRow, call_id)
            existing = None if found is None else found.approval(session_id, call_id)
            claimed = bool(await self.backend.read_rows(session_id, CLAIMS, (call_id,)))
            if not check_decision(session_id, call_id, input_digest, approved, existing, claimed):
                assert existing is not None
                return Change(existing)
            text, edited = decision_details(session_id, call_id, approved, reason, edited_input)
            row = DecisionRow(
                input_digest=input_digest,
                approved=approved,
                decided_at=time.time(),
                reason=text,
                edited_input=edited,
            )
            recorded = attrs.evolve(row.approval(session_id, call_id), newly_recorded=True)
            return Change(recorded, rows={DECISIONS: {call_id: encode_record(row)}})

        return await self._heads.update(session_id, decide)

    async def record_answer(
        self, session_id: str, question_id: str, *, action: str, content: Any = None
    ) -> RecordedAnswer:
        """Record the answer to ``question_id`` (see :meth:`SessionStore.record_answer`)."""

        async def decide(head: BackendHead | None, meta: SessionMeta) -> Change[RecordedAnswer]:
            found = await self._heads.row(session_id, ANSWERS, AnswerRow, question_id)
            document = None if head is None else head.document
            check_new_answer(session_id, question_id, meta, document, found, action, content)
            row = AnswerRow(action=action, content=content, answered_at=time.time())
            recorded = attrs.evolve(row.answer(session_id, question_id), newly_recorded=True)
            return Change(recorded, rows={ANSWERS: {question_id: encode_record(row)}})

        return await self._heads.update(session_id, decide)

    # -- leases -------------------------------------------------------------------------

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Lease:
        """Lease the session to ``owner`` (see :meth:`SessionStore.acquire`)."""
        check_owner(owner, f"acquire session {session_id!r}")
        seconds = check_ttl(ttl, f"acquire session {session_id!r}")

        async def decide(_head: BackendHead | None, meta: SessionMeta) -> Change[Lease]:
            now = time.time()
            check_acquire(session_id, owner, meta.lease, now)
            return await self._grant(session_id, meta, owner, now + seconds)

        return await self._heads.update(session_id, decide)

    async def _grant(
        self, session_id: str, meta: SessionMeta, owner: str, expires: float
    ) -> Change[Lease]:
        token = await self.backend.next_number(TOKENS)
        record = LeaseRecord(owner=owner, token=token, expires_at=expires)
        return Change(record.as_lease(session_id), meta=attrs.evolve(meta, lease=record))

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        """Lease the oldest ready, unleased session to ``owner``, or return ``None``."""
        check_owner(owner, "acquire a ready session")
        seconds = check_ttl(ttl, "acquire a ready session")
        for summary in await self.sessions_ready():

            async def decide(
                head: BackendHead | None, meta: SessionMeta, session_id: str = summary.session_id
            ) -> Change[Lease | None]:
                now = time.time()
                saved = head is not None and head.document is not None
                if not saved or not is_ready(meta, await self._undecided(session_id, meta), now):
                    return Change(None)  # taken or changed since it was listed: the next one
                return await self._grant(session_id, meta, owner, now + seconds)

            lease = await self._heads.update(summary.session_id, decide)
            if lease is not None:
                return lease
        return None

    async def _undecided(self, session_id: str, meta: SessionMeta) -> tuple[str, ...]:
        """The pending calls with no decision, or the pending questions with no answer."""
        if not meta.pending:
            return ()
        table = ANSWERS if meta.status is SessionStatus.AWAITING_ANSWER else DECISIONS
        decided = await self.backend.read_rows(session_id, table, meta.pending)
        return tuple(call_id for call_id in meta.pending if call_id not in decided)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` (see :meth:`SessionStore.renew`)."""
        operation = f"renew the lease of session {lease.session_id!r}"
        seconds = check_ttl(ttl, operation)

        async def decide(_head: BackendHead | None, meta: SessionMeta) -> Change[Lease]:
            now = time.time()
            check_fence(lease.session_id, lease.token, meta.lease, now, operation)
            assert meta.lease is not None
            renewed = attrs.evolve(meta.lease, expires_at=now + seconds)
            return Change(
                renewed.as_lease(lease.session_id), meta=attrs.evolve(meta, lease=renewed)
            )

        return await self._heads.update(lease.session_id, decide)

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` up; no-op if it is not current."""

        async def decide(_head: BackendHead | None, meta: SessionMeta) -> Change[None]:
            held = meta.lease
            if held is None or held.token != lease.token or held.released:
                return Change(None)
            return Change(None, meta=attrs.evolve(meta, lease=attrs.evolve(held, released=True)))

        await self._heads.update(lease.session_id, decide)

    # -- queries -----------------------------------------------------------------------

    async def _summaries(self) -> list[tuple[SessionSummary, BackendHead, SessionMeta]]:
        """Every saved session's summary, head and meta, oldest first."""
        await anyio.lowlevel.checkpoint()
        found = []
        for session_id, head in (await self.backend.heads()).items():
            if head.document is None:
                continue
            meta = self._heads.meta(session_id, head.meta)
            waiting = await self._undecided(session_id, meta)
            asks = meta.status is SessionStatus.AWAITING_ANSWER
            summary = SessionSummary(
                session_id=session_id,
                status=meta.status,
                version=meta.version,
                updated_at=timestamp(meta.updated_at),
                pending_approvals=() if asks else meta.pending,
                undecided=() if asks else waiting,
                pending_questions=meta.pending if asks else (),
                unanswered=waiting if asks else (),
            )
            found.append((summary, head, meta))
        found.sort(key=lambda entry: entry[0].version)
        return found

    async def sessions_awaiting_approval(self) -> list[SessionSummary]:
        """Sessions with a pending call and no decision for it, oldest first."""
        return [
            with_details(summary, head.document)
            for summary, head, _meta in await self._summaries()
            if summary.undecided
        ]

    async def sessions_awaiting_answer(self) -> list[SessionSummary]:
        """Sessions waiting on a question with no answer recorded, oldest first."""
        return [
            with_details(summary, head.document)
            for summary, head, _meta in await self._summaries()
            if summary.unanswered
        ]

    async def sessions_awaiting_resolution(self) -> list[SessionSummary]:
        """Sessions resting on a call in doubt (``CallInDoubt``), oldest first."""
        return [
            summary
            for summary, _head, _meta in await self._summaries()
            if summary.status is SessionStatus.AWAITING_RESOLUTION
        ]

    async def sessions_ready(self) -> list[SessionSummary]:
        """Sessions a worker can advance now, not under a live lease, oldest first."""
        now = time.time()
        return [
            summary
            for summary, _head, meta in await self._summaries()
            if is_ready(meta, summary.undecided + summary.unanswered, now)
        ]

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        return [
            SessionInfo(
                session_id=summary.session_id,
                updated_at=summary.updated_at,
                item_count=meta.item_count,
            )
            for summary, _head, meta in reversed(await self._summaries())
        ]

    # -- loads -------------------------------------------------------------------------

    async def _snapshot(self, session_id: str, *, everything: bool) -> _Snapshot | None:
        """The document, items and (``everything``) claim and decision rows of one revision,
        decoded and checked; ``None`` when the session has no document.

        The rows are read after the head, and read again while a commit moved the
        head's revision meanwhile, so a load never mixes two commits.
        """

        async def attempt() -> _Snapshot | Again | None:
            head, meta = await self._heads.read(session_id)
            if head is None or head.document is None:
                return None
            items = await self.backend.read_list(session_id, ITEMS)
            turn: dict[str, list[str]] = {}
            for name in TURN_LISTS:  # also without counts: a row then is extra, not lost
                turn[name] = await self.backend.read_list(session_id, TURN_LIST_PREFIX + name)
            claims, decisions, answers = {}, {}, {}
            if everything:
                claims = await self._heads.rows(session_id, CLAIMS, ClaimRow)
                decisions = await self._heads.rows(session_id, DECISIONS, DecisionRow)
                answers = await self._heads.rows(session_id, ANSWERS, AnswerRow)
            again = await self.backend.read(session_id)
            if again is None or again.revision != head.revision:
                return AGAIN
            document, decoded = decode_stored(
                session_id, head.document, items, meta.item_count, turn, meta.turn_counts
            )
            return _Snapshot(meta, document, decoded, claims, decisions, answers)

        return await retried(attempt)

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document, version and calls in doubt, or ``None``."""
        await anyio.lowlevel.checkpoint()
        found = await self._snapshot(session_id, everything=True)
        if found is None:
            return None
        meta, document = found.meta, found.document
        open_claims = {call_id for call_id, row in found.claims.items() if not row.answered}
        answered = map(answered_call_ids, document["transcript"])
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=frozenset(open_claims.difference(*answered)),
            updated_at=timestamp(meta.updated_at),
            version=meta.version,
            status=meta.status,
            approvals={
                call_id: row.approval(session_id, call_id)
                for call_id, row in found.decisions.items()
            },
            answers={
                key: row.answer(session_id, key)
                for key, row in found.answers.items()
                if key in meta.pending and meta.status is SessionStatus.AWAITING_ANSWER
            },
        )

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""
        await anyio.lowlevel.checkpoint()
        found = await self._snapshot(session_id, everything=False)
        return None if found is None else found.items

    async def delete(self, session_id: str) -> bool:
        """Forget the session, its lease, claims and approvals; ``True`` if it had a document."""
        await anyio.lowlevel.checkpoint()
        head = await self.backend.read(session_id)
        await self.backend.delete(session_id)
        self._saves.forget(session_id)
        self._heads.known.forget(session_id)
        return head is not None and head.document is not None


@attrs.frozen
class _Snapshot:
    """One revision of a session, decoded: its meta, document, items, and rows."""

    meta: SessionMeta
    document: dict[str, Any]
    items: list[Item]
    claims: dict[str, ClaimRow]
    decisions: dict[str, DecisionRow]
    answers: dict[str, AnswerRow]
