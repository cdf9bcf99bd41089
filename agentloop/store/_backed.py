"""``BackendSessionStore``: the whole ``SessionStore`` contract over a ``StorageBackend``.

Every rule lives here once: document validation and encoding (O(new items)),
versions, leases and fencing, single-use claims, final decisions bound to a
digest, inbox status and the queries. Each write reads the session's head,
decides with the shared rules (:mod:`._rules`), and commits on the revision
it read; when another writer committed first the commit is refused and the
write starts over from a fresh read, so every decision is made on the state
it changes. A read of several rows (a load) checks the head's revision did
not move meanwhile, so it never mixes two commits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping
from types import TracebackType
from typing import Any, TypeVar

import anyio.lowlevel
import attrs

from ..core._errors import CheckpointError
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
    summarize,
)
from ._answers import ANSWERS, AnswerRow, check_new_answer, with_unanswered_questions
from ._backend import BackendHead, BackendWrite, NumberedCommit, StorageBackend
from ._documents import (
    TURN_LISTS,
    EncodedCheckpoint,
    answered_call_ids,
    answered_from,
    decode_stored,
    encode_checkpoint,
    first_change,
    turn_counts,
    turn_starts,
)
from ._history import (
    DEFAULT_HISTORY_LIMIT,
    HistoryPlan,
    SideRows,
    check_limit,
    plan_history,
    summary_of,
)
from ._records import (
    ITEMS,
    TURN_LIST_PREFIX,
    ClaimRow,
    DecisionRow,
    LeaseRecord,
    SessionMeta,
    decode_record,
    encode_record,
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
    timestamp,
    with_undecided_calls,
)
from ._time_travel import StepHistory

__all__ = ["CLAIMS", "DECISIONS", "INCARNATIONS", "TOKENS", "VERSIONS", "BackendSessionStore"]

CLAIMS = "claims"
"""The table of claimed (or started) calls, by call id."""
DECISIONS = "decisions"
"""The table of recorded decisions, by call id."""

VERSIONS = "versions"
"""The counter of document versions (never reused, not even after a delete)."""
TOKENS = "tokens"
"""The counter of fencing tokens."""

INCARNATIONS = "incarnations"
"""The counter of new heads: each starts a range of revisions of its own."""

_REVISION_BITS = 32
"""A new head's revisions start at its incarnation number times 2**32, plus one."""
_CACHED_SESSIONS = 64
_CACHED_METAS = 1024
_ATTEMPTS = 10_000
"""How many times a write or a load starts over because another writer committed first."""
_R = TypeVar("_R")


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
        self._written: dict[str, tuple[int, EncodedCheckpoint]] = {}
        """Each recent session's last save through this store: its version and encoding."""
        self._metas: dict[str, tuple[str, SessionMeta]] = {}
        """Each recent session's meta record as last written or read: its text and value."""
        self._heads: dict[str, tuple[BackendHead, SessionMeta, dict[str, ClaimRow]]] = {}
        """Each recent session's head as this store last committed it (see ``_known_head``)."""
        self._lock = threading.Lock()
        self._clock = time.time

    async def __aenter__(self) -> BackendSessionStore:
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

    # -- heads and commits -----------------------------------------------------------

    async def _head(self, session_id: str) -> tuple[BackendHead | None, SessionMeta]:
        head = await self.backend.read(session_id)
        if head is None:
            return None, SessionMeta()
        return head, self._meta(session_id, head.meta)

    def _meta(self, session_id: str, text: str) -> SessionMeta:
        """The meta record of ``text``: the one this store last wrote or read, or decoded."""
        with self._lock:
            known = self._metas.get(session_id)
        if known is not None and known[0] == text:
            return known[1]
        meta = decode_record(text, SessionMeta, session_id, "its head's meta")
        self._know_meta(session_id, text, meta)
        return meta

    def _know_meta(self, session_id: str, text: str, meta: SessionMeta) -> None:
        with self._lock:
            self._metas.pop(session_id, None)
            self._metas[session_id] = (text, meta)
            while len(self._metas) > _CACHED_METAS:
                del self._metas[next(iter(self._metas))]

    async def _commit(
        self,
        session_id: str,
        head: BackendHead | None,
        meta: SessionMeta,
        *,
        document: str | None = None,
        lists: Mapping[str, tuple[int, tuple[str, ...]]] | None = None,
        rows: Mapping[str, Mapping[str, str]] | None = None,
        claims: Mapping[str, ClaimRow] | None = None,
    ) -> bool:
        """Commit ``meta`` (a new ``document``, ``claims`` rows) on the revision of ``head``."""
        revision = 0 if head is None else head.revision
        if document is None and head is not None:
            document = head.document
        text = encode_record(meta)
        new_head = BackendHead(
            revision=await self._next_revision(head), meta=text, document=document
        )
        rows = dict(rows or {})
        if claims:
            claims = {
                key: row
                if row.revision is not None
                else attrs.evolve(row, revision=new_head.revision)
                for key, row in claims.items()
            }
            rows[CLAIMS] = {key: encode_record(row) for key, row in claims.items()}
        write = BackendWrite(head=new_head, lists=lists or {}, rows=rows)
        try:
            applied = await self.backend.commit(session_id, revision, write)
        except BaseException:
            self._forget_head(session_id)
            raise
        if not applied:
            self._forget_head(session_id)
            return False
        self._know_meta(session_id, text, meta)
        known = self._known_head(session_id)
        carried = known[2] if known is not None and known[0] == head else {}
        self._know_head(session_id, new_head, meta, {**carried, **(claims or {})})
        return True

    async def _next_revision(self, head: BackendHead | None) -> int:
        """The revision of a commit on ``head``: one more, or for a new head the start of a
        range no other incarnation of the session used (so a revision never repeats)."""
        if head is not None:
            return head.revision + 1
        return (await self.backend.next_number(INCARNATIONS) << _REVISION_BITS) + 1

    def _known_head(
        self, session_id: str
    ) -> tuple[BackendHead, SessionMeta, dict[str, ClaimRow]] | None:
        """The head this store last committed for the session, its meta and the claim rows
        known at it (``None`` if unknown, or refused since)."""
        with self._lock:
            return self._heads.get(session_id)

    def _know_head(
        self, session_id: str, head: BackendHead, meta: SessionMeta, claims: dict[str, ClaimRow]
    ) -> None:
        with self._lock:
            self._heads.pop(session_id, None)
            self._heads[session_id] = (head, meta, claims)
            while len(self._heads) > _CACHED_METAS:
                del self._heads[next(iter(self._heads))]

    def _forget_head(self, session_id: str) -> None:
        with self._lock:
            self._heads.pop(session_id, None)

    async def _rows(
        self, session_id: str, table: str, kind: type[_R], keys: Collection[str] | None = None
    ) -> dict[str, _R]:
        found = await self.backend.read_rows(session_id, table, keys)
        return {
            key: decode_record(text, kind, session_id, f"{table} row {key!r}")
            for key, text in found.items()
        }

    def _live_lease(self, meta: SessionMeta) -> LeaseRow | None:
        return None if meta.lease is None else meta.lease.row()

    # -- saves -----------------------------------------------------------------------

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        """Replace the session's document (see :meth:`SessionStore.save_checkpoint`).

        The first attempt decides on the head this store last committed, when
        it has one, without reading it: the commit's compare-and-set applies
        only if that head is still the stored one (revisions never repeat,
        not even after a delete), and a refusal, or a check that fails on it,
        starts over from a fresh read. The save is the session's next step
        in its history (see :meth:`history`).
        """
        return await self._save(session_id, checkpoint, expected_version, fencing_token)

    async def _save(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        expected_version: int | None,
        fencing_token: int | None,
        *,
        origin: str | None = None,
        claim_rows: Mapping[str, ClaimRow] | None = None,
        side: SideRows | None = None,
    ) -> int:
        """:meth:`save_checkpoint`, with the step's ``origin``, claim rows to write with
        it (a fork's calls in doubt, a rewind's calls in doubt again) and ``side`` rows
        to put and drop (a rewind's claims and decisions of the abandoned steps)."""
        with self._lock:
            last = self._written.get(session_id)
        encoded = encode_checkpoint(session_id, checkpoint, None if last is None else last[1])
        status, pending = summarize(checkpoint)
        operation = f"save checkpoint for session {session_id!r}"
        await anyio.lowlevel.checkpoint()
        known = self._known_head(session_id)
        for _attempt in range(_ATTEMPTS):
            if known is None:
                head, meta = await self._head(session_id)
                claims: dict[str, ClaimRow] = {}
            else:
                head, meta, claims = known
            try:
                check_fence(
                    session_id, fencing_token, self._live_lease(meta), self._clock(), operation
                )
                saved = head is not None and head.document is not None
                check_version(session_id, expected_version, meta.version if saved else None)
            except Exception:
                if known is None:
                    raise
                known = None  # decided on a cached head: decide again on the stored one
                continue
            lists = await self._list_writes(session_id, meta if saved else None, encoded)
            answered = answered_from(encoded, lists[ITEMS][0])
            if not answered <= claims.keys():
                wanted = answered - claims.keys()
                claims = {**claims, **await self._rows(session_id, CLAIMS, ClaimRow, wanted)}
            marked = {**_answered(claims, answered), **(claim_rows or {})}
            now = time.time()
            fields = {
                "updated_at": now,
                "status": status,
                "pending": pending,
                "item_count": len(encoded.items),
                "turn_counts": turn_counts(encoded.turn),
                "lease": meta.lease,
            }
            step_fields = {
                "saved_at": now,
                "state": str(checkpoint.get("state")),
                "status": status,
                "item_count": len(encoded.items),
                "turn_counts": fields["turn_counts"],
                "summary": summary_of(checkpoint),
                "origin": origin,
            }
            plan = plan_history(meta.history, self.history_limit, encoded, lists, step_fields)
            fields["history"] = plan.mark
            version = await self._commit_save(
                session_id, head, claims, marked, fields, encoded.head, lists, plan, side
            )
            if version is not None:
                self._remember(session_id, version, encoded)
                return version
            known = None
        else:
            raise _refused_too_often()

    async def _commit_save(
        self,
        session_id: str,
        head: BackendHead | None,
        claims: dict[str, ClaimRow],
        marked: dict[str, ClaimRow],
        fields: dict[str, Any],
        document: str,
        lists: Mapping[str, tuple[int, tuple[str, ...]]],
        plan: HistoryPlan,
        side: SideRows | None = None,
    ) -> int | None:
        """Commit a save on ``head``'s revision with the next version number (taken in
        the commit when the backend offers :class:`NumberedCommit`); the version, or
        ``None`` when refused."""
        revision = 0 if head is None else head.revision
        new_revision = await self._next_revision(head)
        rows = {CLAIMS: {key: encode_record(row) for key, row in marked.items()}} if marked else {}
        built: list[tuple[str, SessionMeta]] = []

        def write(version: int) -> BackendWrite:
            meta = SessionMeta(version=version, **fields)
            text = encode_record(meta)
            built.append((text, meta))
            new_head = BackendHead(revision=new_revision, meta=text, document=document)
            all_rows = {**rows, **plan.rows(version, new_revision)}
            drop = plan.drop
            if side is not None:
                for table, put in side.rows.items():
                    all_rows[table] = {**put, **all_rows.get(table, {})}
                drop = {**drop, **side.drop}
            return BackendWrite(head=new_head, lists=lists, rows=all_rows, drop=drop)

        try:
            if isinstance(self.backend, NumberedCommit):
                version = await self.backend.commit_numbered(session_id, revision, VERSIONS, write)
            else:
                number = await self.backend.next_number(VERSIONS)
                applied = await self.backend.commit(session_id, revision, write(number))
                version = number if applied else None
        except BaseException:
            self._forget_head(session_id)
            raise
        if version is None:
            self._forget_head(session_id)
            return None
        text, meta = built[-1]
        self._know_meta(session_id, text, meta)
        known_claims = {**claims, **marked}
        new_head = BackendHead(revision=new_revision, meta=text, document=document)
        self._know_head(session_id, new_head, meta, known_claims)
        return version

    async def _list_writes(
        self, session_id: str, meta: SessionMeta | None, encoded: EncodedCheckpoint
    ) -> dict[str, tuple[int, tuple[str, ...]]]:
        """The list rows a save of ``encoded`` writes over what is stored: only what changed."""
        with self._lock:
            last = self._written.get(session_id)
        items: Any
        if meta is None:
            items, turn = (), {}
        elif last is not None and last[0] == meta.version:
            items, turn = last[1].items, last[1].turn
        else:
            items = await self.backend.read_list(session_id, ITEMS)
            turn = {}
            for name in TURN_LISTS if meta.turn_counts is not None else ():
                rows = tuple(await self.backend.read_list(session_id, TURN_LIST_PREFIX + name))
                if rows:
                    turn[name] = rows
        start = first_change(items, encoded)
        lists = {ITEMS: (start, encoded.items[start:])}
        if not turn and not encoded.turn:
            return lists  # no turn rows before or after: the usual save between turns
        for name, first in turn_starts(turn, encoded).items():
            old, new = turn.get(name, ()), encoded.turn.get(name, ())
            if first < len(old) or first < len(new):
                lists[TURN_LIST_PREFIX + name] = (first, tuple(new[first:]))
        return lists

    def _remember(self, session_id: str, version: int, encoded: EncodedCheckpoint) -> None:
        with self._lock:
            self._written.pop(session_id, None)
            self._written[session_id] = (version, encoded)
            while len(self._written) > _CACHED_SESSIONS:
                del self._written[next(iter(self._written))]

    # -- claims and decisions ----------------------------------------------------------

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run (again, if it was)."""
        operation = f"record call {call_id!r} of session {session_id!r} as started"
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(session_id)
            check_fence(session_id, None, self._live_lease(meta), self._clock(), operation)
            row = ClaimRow(tool_name=tool_name, input_digest=None, claimed_at=time.time())
            if await self._commit(session_id, head, meta, claims={call_id: row}):
                return
        else:
            raise _refused_too_often()

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
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(session_id)
            check_fence(session_id, fencing_token, self._live_lease(meta), self._clock(), operation)
            claimed = await self.backend.read_rows(session_id, CLAIMS, (call_id,))
            decisions = await self._rows(session_id, DECISIONS, DecisionRow, (call_id,))
            decision = decisions.get(call_id)
            check_claim(
                session_id,
                call_id,
                input_digest,
                call_id in claimed,
                None if decision is None else (decision.input_digest, decision.approved),
            )
            row = ClaimRow(tool_name=tool_name, input_digest=input_digest, claimed_at=time.time())
            if await self._commit(session_id, head, meta, claims={call_id: row}):
                return row.claim(session_id, call_id)
        else:
            raise _refused_too_often()

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
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(session_id)
            decisions = await self._rows(session_id, DECISIONS, DecisionRow, (call_id,))
            found = decisions.get(call_id)
            existing = None if found is None else found.approval(session_id, call_id)
            claimed = bool(await self.backend.read_rows(session_id, CLAIMS, (call_id,)))
            if not check_decision(session_id, call_id, input_digest, approved, existing, claimed):
                assert existing is not None
                return existing
            text, edited = decision_details(session_id, call_id, approved, reason, edited_input)
            row = DecisionRow(
                input_digest=input_digest,
                approved=approved,
                decided_at=time.time(),
                reason=text,
                edited_input=edited,
            )
            if await self._commit(
                session_id, head, meta, rows={DECISIONS: {call_id: encode_record(row)}}
            ):
                return row.approval(session_id, call_id, newly_recorded=True)
        else:
            raise _refused_too_often()

    async def record_answer(
        self, session_id: str, question_id: str, *, action: str, content: Any = None
    ) -> RecordedAnswer:
        """Record the answer to ``question_id`` (see :meth:`SessionStore.record_answer`)."""
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(session_id)
            answers = await self._rows(session_id, ANSWERS, AnswerRow, (question_id,))
            found = answers.get(question_id)
            existing = None if found is None else found.answer(session_id, question_id)
            document = None if head is None else head.document
            check_new_answer(
                session_id, question_id, meta.status, meta.pending, document, existing,
                action, content,
            )  # fmt: skip
            row = AnswerRow(action=action, content=content, answered_at=time.time())
            if await self._commit(
                session_id, head, meta, rows={ANSWERS: {question_id: encode_record(row)}}
            ):
                return row.answer(session_id, question_id, newly_recorded=True)
        else:
            raise _refused_too_often()

    # -- leases -------------------------------------------------------------------------

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Lease:
        """Lease the session to ``owner`` (see :meth:`SessionStore.acquire`)."""
        check_owner(owner, f"acquire session {session_id!r}")
        seconds = check_ttl(ttl, f"acquire session {session_id!r}")
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(session_id)
            now = self._clock()
            check_acquire(session_id, owner, self._live_lease(meta), now)
            lease = await self._grant(session_id, head, meta, owner, now + seconds)
            if lease is not None:
                return lease
        else:
            raise _refused_too_often()

    async def _grant(
        self,
        session_id: str,
        head: BackendHead | None,
        meta: SessionMeta,
        owner: str,
        expires: float,
    ) -> Lease | None:
        token = await self.backend.next_number(TOKENS)
        record = LeaseRecord(owner=owner, token=token, expires_at=expires)
        if await self._commit(session_id, head, attrs.evolve(meta, lease=record)):
            return record.row().as_lease(session_id)
        return None

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        """Lease the oldest ready, unleased session to ``owner``, or return ``None``."""
        check_owner(owner, "acquire a ready session")
        seconds = check_ttl(ttl, "acquire a ready session")
        await anyio.lowlevel.checkpoint()
        for summary in await self.sessions_ready():
            for _attempt in range(_ATTEMPTS):
                head, meta = await self._head(summary.session_id)
                now = self._clock()
                if not await self._is_ready(summary.session_id, head, meta, now):
                    break
                lease = await self._grant(summary.session_id, head, meta, owner, now + seconds)
                if lease is not None:
                    return lease
            else:
                raise _refused_too_often()
        return None

    async def _is_ready(
        self, session_id: str, head: BackendHead | None, meta: SessionMeta, now: float
    ) -> bool:
        if head is None or head.document is None:
            return False
        lease = self._live_lease(meta)
        if lease is not None and lease.live(now):
            return False
        undecided = await self._undecided(session_id, meta)
        return is_ready(meta.status, meta.pending, undecided)

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
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(lease.session_id)
            now = self._clock()
            check_fence(lease.session_id, lease.token, self._live_lease(meta), now, operation)
            assert meta.lease is not None
            renewed = attrs.evolve(meta.lease, expires_at=now + seconds)
            if await self._commit(lease.session_id, head, attrs.evolve(meta, lease=renewed)):
                return renewed.row().as_lease(lease.session_id)
        else:
            raise _refused_too_often()

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` up; no-op if it is not current."""
        await anyio.lowlevel.checkpoint()
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(lease.session_id)
            held = meta.lease
            if held is None or held.token != lease.token or held.released:
                return
            released = attrs.evolve(meta, lease=attrs.evolve(held, released=True))
            if await self._commit(lease.session_id, head, released):
                return
        else:
            raise _refused_too_often()

    # -- queries -----------------------------------------------------------------------

    async def _summaries(self) -> list[tuple[SessionSummary, BackendHead, SessionMeta]]:
        """Every saved session's summary, head and meta, oldest first."""
        found = []
        for session_id, head in (await self.backend.heads()).items():
            if head.document is None:
                continue
            meta = self._meta(session_id, head.meta)
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
        await anyio.lowlevel.checkpoint()
        return [
            with_undecided_calls(summary, head.document)
            for summary, head, _meta in await self._summaries()
            if summary.undecided
        ]

    async def sessions_awaiting_answer(self) -> list[SessionSummary]:
        """Sessions waiting on a question with no answer recorded, oldest first."""
        await anyio.lowlevel.checkpoint()
        return [
            with_unanswered_questions(summary, head.document)
            for summary, head, _meta in await self._summaries()
            if summary.unanswered
        ]

    async def sessions_ready(self) -> list[SessionSummary]:
        """Sessions a worker can advance now, not under a live lease, oldest first."""
        await anyio.lowlevel.checkpoint()
        now = self._clock()
        ready = []
        for summary, _head, meta in await self._summaries():
            lease = self._live_lease(meta)
            if lease is not None and lease.live(now):
                continue
            if is_ready(meta.status, meta.pending, summary.undecided + summary.unanswered):
                ready.append(summary)
        return ready

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        await anyio.lowlevel.checkpoint()
        return [
            SessionInfo(
                session_id=summary.session_id,
                updated_at=summary.updated_at,
                item_count=meta.item_count,
            )
            for summary, _head, meta in reversed(await self._summaries())
        ]

    # -- loads -------------------------------------------------------------------------

    async def _snapshot(
        self, session_id: str, *, everything: bool
    ) -> tuple[SessionMeta, dict[str, Any], list[Item], dict[str, Any]] | None:
        """The document, items and (``everything``) claim and decision rows of one revision,
        decoded and checked; ``None`` when the session has no document.

        The rows are read after the head, and read again while a commit moved the
        head's revision meanwhile, so a load never mixes two commits.
        """
        for _attempt in range(_ATTEMPTS):
            head, meta = await self._head(session_id)
            if head is None or head.document is None:
                return None
            items = await self.backend.read_list(session_id, ITEMS)
            turn: list[tuple[object, object, object]] = []
            rows: dict[str, Any] = {}
            for name in TURN_LISTS:  # also without counts: a row then is extra, not lost
                texts = await self.backend.read_list(session_id, TURN_LIST_PREFIX + name)
                turn.extend((name, position, text) for position, text in enumerate(texts))
            if everything:
                rows[CLAIMS] = await self._rows(session_id, CLAIMS, ClaimRow)
                rows[DECISIONS] = await self._rows(session_id, DECISIONS, DecisionRow)
                rows[ANSWERS] = await self._rows(session_id, ANSWERS, AnswerRow)
            again = await self.backend.read(session_id)
            if again is not None and again.revision == head.revision:
                break
        else:
            raise _refused_too_often()
        rows_by_position = list(enumerate(items))
        document, decoded = decode_stored(
            session_id, head.document, rows_by_position, meta.item_count, turn, meta.turn_counts
        )
        return meta, document, decoded, rows

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document, version and calls in doubt, or ``None``."""
        await anyio.lowlevel.checkpoint()
        found = await self._snapshot(session_id, everything=True)
        if found is None:
            return None
        meta, document, _items, rows = found
        claims: dict[str, ClaimRow] = rows[CLAIMS]
        decisions: dict[str, DecisionRow] = rows[DECISIONS]
        open_claims = {call_id for call_id, row in claims.items() if not row.answered}
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=frozenset(open_claims - answered_call_ids(document["transcript"])),
            updated_at=timestamp(meta.updated_at),
            version=meta.version,
            status=meta.status,
            approvals={
                call_id: row.approval(session_id, call_id) for call_id, row in decisions.items()
            },
            answers={
                key: row.answer(session_id, key)
                for key, row in rows[ANSWERS].items()
                if key in meta.pending and meta.status is SessionStatus.AWAITING_ANSWER
            },
        )

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""
        await anyio.lowlevel.checkpoint()
        found = await self._snapshot(session_id, everything=False)
        return None if found is None else found[2]

    async def delete(self, session_id: str) -> bool:
        """Forget the session, its lease, claims and approvals; ``True`` if it had a document."""
        await anyio.lowlevel.checkpoint()
        head = await self.backend.read(session_id)
        await self.backend.delete(session_id)
        with self._lock:
            self._written.pop(session_id, None)
            self._heads.pop(session_id, None)
        return head is not None and head.document is not None


def _answered(claims: dict[str, ClaimRow], answered: frozenset[str]) -> dict[str, ClaimRow]:
    """The claim rows a save marks answered: its new results answer them."""
    return {
        call_id: attrs.evolve(row, answered=True)
        for call_id, row in claims.items()
        if call_id in answered and not row.answered
    }


def _refused_too_often() -> CheckpointError:
    return CheckpointError(
        f"the storage backend refused {_ATTEMPTS} commits in a row (or moved the head under "
        f"{_ATTEMPTS} loads), each on the revision just read: its commit() must apply a write "
        "whose expected_revision is the stored head's revision, and read() must return the "
        "head the last commit stored (run agentloop.testing.store_conformance.check_backend)"
    )
