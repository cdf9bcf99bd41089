"""``MemorySessionStore``: the simplest conforming store, in-process only."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import anyio.lowlevel
import attrs

from ..core._items import Item
from ..loop._session_store import (
    Approval,
    Claim,
    Lease,
    SessionInfo,
    SessionStatus,
    SessionSummary,
    StoredSession,
    check_ttl,
    summarize,
)
from ._documents import (
    ItemTexts,
    TurnTexts,
    answered_call_ids,
    answered_from,
    decode_stored,
    encode_checkpoint,
    first_change,
    turn_counts,
)
from ._rules import (
    LeaseRow,
    check_acquire,
    check_claim,
    check_decision,
    check_fence,
    check_owner,
    check_version,
    decision_details,
    is_ready,
    stored_approval,
    with_undecided_calls,
)

__all__ = ["MemorySessionStore"]


def _public(stored: Approval, *, newly_recorded: bool = False) -> Approval:
    """A stored decision as callers see it: the edited input decoded, shared with nobody."""
    return stored_approval(
        stored.session_id,
        stored.call_id,
        stored.input_digest,
        stored.approved,
        stored.decided_at,
        stored.reason,
        stored.edited_input,
        newly_recorded=newly_recorded,
    )


@attrs.frozen
class _Record:
    head: str
    items: tuple[str, ...]
    updated_at: datetime
    sequence: int
    status: SessionStatus
    pending: tuple[str, ...]
    turn: TurnTexts

    def decode(self, session_id: str) -> tuple[dict[str, Any], list[Item]]:
        """The stored document and its items (see ``decode_stored``)."""
        rows = [
            (name, position, text)
            for name, texts in sorted(self.turn.items())
            for position, text in enumerate(texts)
        ]
        return decode_stored(
            session_id,
            self.head,
            list(enumerate(self.items)),
            None,
            rows,
            turn_counts(self.turn),
        )


@attrs.define
class _ClaimRecord:
    claim: Claim
    answered: bool = False


class MemorySessionStore:
    """A :class:`SessionStore` that keeps documents in this process's memory.

    Documents are stored as JSON text, so what you save and what you load
    never share objects. Nothing survives the process; closing it keeps the
    data (``aclose`` has nothing to release), so one instance can stand for a
    store that is reopened. Every operation holds one lock, so it is atomic
    even when several threads (or event loops) share the store. Good for
    tests and short-lived hosts.
    """

    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}
        self._claims: dict[str, dict[str, _ClaimRecord]] = {}
        self._approvals: dict[str, dict[str, Approval]] = {}
        """Decisions as stored: ``edited_input`` holds the JSON text (see ``_public``)."""
        self._leases: dict[str, LeaseRow] = {}
        self._sequence = 0
        self._token = 0
        self._texts = ItemTexts()
        self._lock = threading.Lock()
        self._clock: Callable[[], float] = time.time

    async def __aenter__(self) -> MemorySessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing to release; the data stays readable."""

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        """Replace the session's document (see :meth:`SessionStore.save_checkpoint`)."""
        encoded = encode_checkpoint(session_id, checkpoint, self._texts.for_session(session_id))
        status, pending = summarize(checkpoint)
        await anyio.lowlevel.checkpoint()
        with self._lock:
            operation = f"save checkpoint for session {session_id!r}"
            check_fence(
                session_id, fencing_token, self._leases.get(session_id), self._clock(), operation
            )
            previous = self._records.get(session_id)
            check_version(session_id, expected_version, previous.sequence if previous else None)
            start = first_change(previous.items, encoded) if previous else 0
            answered = answered_from(encoded, start)
            self._sequence += 1
            self._records[session_id] = _Record(
                encoded.head,
                encoded.items,
                datetime.now(UTC),
                self._sequence,
                status,
                pending,
                encoded.turn,
            )
            self._texts.remember(encoded)
            claims = self._claims.get(session_id, {})
            for call_id in answered:
                if call_id in claims:
                    claims[call_id].answered = True
            return self._sequence

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run (again, if it was)."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            check_fence(
                session_id,
                None,
                self._leases.get(session_id),
                self._clock(),
                f"record call {call_id!r} of session {session_id!r} as started",
            )
            claim = Claim(
                session_id=session_id,
                call_id=call_id,
                tool_name=tool_name,
                input_digest=None,
                claimed_at=datetime.now(UTC),
            )
            self._claims.setdefault(session_id, {})[call_id] = _ClaimRecord(claim)

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
        await anyio.lowlevel.checkpoint()
        with self._lock:
            check_fence(
                session_id,
                fencing_token,
                self._leases.get(session_id),
                self._clock(),
                f"claim call {call_id!r} of session {session_id!r}",
            )
            claims = self._claims.setdefault(session_id, {})
            approval = self._approvals.get(session_id, {}).get(call_id)
            check_claim(
                session_id,
                call_id,
                input_digest,
                call_id in claims,
                None if approval is None else (approval.input_digest, approval.approved),
            )
            claim = Claim(
                session_id=session_id,
                call_id=call_id,
                tool_name=tool_name,
                input_digest=input_digest,
                claimed_at=datetime.now(UTC),
            )
            claims[call_id] = _ClaimRecord(claim)
            return claim

    async def record_approval(
        self,
        session_id: str,
        call_id: str,
        *,
        input_digest: str,
        approved: bool,
        reason: str | None = None,
        edited_input: Any = None,
    ) -> Approval:
        """Record a decision on ``call_id`` (see :meth:`SessionStore.record_approval`)."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            approvals = self._approvals.setdefault(session_id, {})
            existing = approvals.get(call_id)
            claimed = call_id in self._claims.get(session_id, {})
            if not check_decision(session_id, call_id, input_digest, approved, existing, claimed):
                assert existing is not None
                return _public(existing)
            reason, edited = decision_details(session_id, call_id, approved, reason, edited_input)
            approval = Approval(
                session_id=session_id,
                call_id=call_id,
                input_digest=input_digest,
                approved=approved,
                decided_at=datetime.now(UTC),
                reason=reason,
                edited_input=edited,
            )
            approvals[call_id] = approval
            return _public(approval, newly_recorded=True)

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Lease:
        """Lease the session to ``owner`` (see :meth:`SessionStore.acquire`)."""
        check_owner(owner, f"acquire session {session_id!r}")
        seconds = check_ttl(ttl, f"acquire session {session_id!r}")
        await anyio.lowlevel.checkpoint()
        with self._lock:
            now = self._clock()
            check_acquire(session_id, owner, self._leases.get(session_id), now)
            return self._grant(session_id, owner, now + seconds)

    def _grant(self, session_id: str, owner: str, expires_at: float) -> Lease:
        self._token += 1
        row = LeaseRow(owner, self._token, expires_at, False)
        self._leases[session_id] = row
        return row.as_lease(session_id)

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        """Lease the oldest ready, unleased session to ``owner``, or return ``None``."""
        check_owner(owner, "acquire a ready session")
        seconds = check_ttl(ttl, "acquire a ready session")
        await anyio.lowlevel.checkpoint()
        with self._lock:
            ready = self._ready()
            if not ready:
                return None
            return self._grant(ready[0].session_id, owner, self._clock() + seconds)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` (see :meth:`SessionStore.renew`)."""
        operation = f"renew the lease of session {lease.session_id!r}"
        seconds = check_ttl(ttl, operation)
        await anyio.lowlevel.checkpoint()
        with self._lock:
            now = self._clock()
            row = self._leases.get(lease.session_id)
            check_fence(lease.session_id, lease.token, row, now, operation)
            assert row is not None
            renewed = row._replace(expires_at=now + seconds)
            self._leases[lease.session_id] = renewed
            return renewed.as_lease(lease.session_id)

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` up; no-op if it is not current."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            row = self._leases.get(lease.session_id)
            if row is not None and row.token == lease.token:
                self._leases[lease.session_id] = row._replace(released=True)

    async def sessions_awaiting_approval(self) -> list[SessionSummary]:
        """Sessions with a pending call and no decision for it, oldest first."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            return [
                with_undecided_calls(summary, self._records[summary.session_id].head)
                for summary in self._summaries()
                if summary.undecided
            ]

    async def sessions_ready(self) -> list[SessionSummary]:
        """Sessions a worker can advance now, not under a live lease, oldest first."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            return self._ready()

    def _summaries(self) -> list[SessionSummary]:
        oldest_first = sorted(self._records.items(), key=lambda entry: entry[1].sequence)
        summaries = []
        for session_id, record in oldest_first:
            decided = self._approvals.get(session_id, {})
            summaries.append(
                SessionSummary(
                    session_id=session_id,
                    status=record.status,
                    version=record.sequence,
                    updated_at=record.updated_at,
                    pending_approvals=record.pending,
                    undecided=tuple(c for c in record.pending if c not in decided),
                )
            )
        return summaries

    def _ready(self) -> list[SessionSummary]:
        now = self._clock()
        return [
            summary
            for summary in self._summaries()
            if is_ready(summary.status, summary.pending_approvals, summary.undecided)
            and not self._leased(summary.session_id, now)
        ]

    def _leased(self, session_id: str, now: float) -> bool:
        row = self._leases.get(session_id)
        return row is not None and row.live(now)

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document, version and calls in doubt, or ``None``."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            record = self._records.get(session_id)
            if record is None:
                return None
            claims = self._claims.get(session_id, {})
            open_claims = frozenset(c for c, entry in claims.items() if not entry.answered)
            stored = self._approvals.get(session_id, {})
            approvals = {call_id: _public(a) for call_id, a in stored.items()}
        document, _items = record.decode(session_id)
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=open_claims - answered_call_ids(document["transcript"]),
            updated_at=record.updated_at,
            version=record.sequence,
            status=record.status,
            approvals=approvals,
        )

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            newest_first = sorted(self._records.items(), key=lambda entry: -entry[1].sequence)
        return [
            SessionInfo(
                session_id=session_id, updated_at=record.updated_at, item_count=len(record.items)
            )
            for session_id, record in newest_first
        ]

    async def delete(self, session_id: str) -> bool:
        """Forget the session, its lease, claims and approvals; ``True`` if it had a document."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            self._claims.pop(session_id, None)
            self._approvals.pop(session_id, None)
            self._leases.pop(session_id, None)
            self._texts.forget(session_id)
            return self._records.pop(session_id, None) is not None

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            record = self._records.get(session_id)
        if record is None:
            return None
        return record.decode(session_id)[1]
