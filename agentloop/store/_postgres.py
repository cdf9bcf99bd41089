"""``PostgresSessionStore``: sessions in PostgreSQL (psycopg 3), for many workers at once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from ..core._errors import InvalidInputError
from ..core._items import Item
from ..loop._session_store import (
    Claim,
    Lease,
    LeaseLostError,
    RecordedApproval,
    SessionInfo,
    SessionStatus,
    SessionSummary,
    StaleSessionError,
    StoredSession,
    check_ttl,
    summarize,
)
from . import _pg_sql as sql
from ._documents import (
    EncodedCheckpoint,
    ItemTexts,
    TurnTexts,
    answered_call_ids,
    answered_from,
    decode_stored,
    encode_checkpoint,
    first_change,
    turn_counts,
    turn_starts,
)
from ._pg_pool import ConnectionPool, pipelined_transaction, transaction
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
from ._stored import intact_turn_texts

__all__ = ["PostgresSessionStore"]

T = TypeVar("T")

_CACHED_SESSIONS = 64

_REFUSALS = (StaleSessionError, LeaseLostError, InvalidInputError)
"""What a save raises after deciding, on what it read, to write nothing."""


def _plain(expected_version: object, fencing_token: object) -> bool:
    """Whether both options are what the server-side checks take (else the long way
    refuses them with ``InvalidInputError``)."""
    return all(
        value is None or (type(value) is int and value >= 0)
        for value in (expected_version, fencing_token)
    )


_CANDIDATES = 8


class PostgresSessionStore:
    """A :class:`SessionStore` in a PostgreSQL database (``pip install agentloop[postgres]``).

    ``conninfo`` is a libpq connection string or URI. The store opens up to
    ``pool_size`` connections, on first use (or ``async with``/:meth:`open`),
    and creates or migrates its tables (``agentloop_*``, schema versions in
    ``agentloop_schema``). Many processes may share one database: writes of
    one session are serialized by a transaction-level advisory lock, leases
    are fenced by a database sequence, and the lease clock is the server's.

    psycopg's async connections run on asyncio only, so the store drives the
    blocking psycopg API in anyio worker threads (at most ``pool_size`` at
    once): it works under asyncio and trio alike. A call that is cancelled
    while its transaction runs waits for the transaction to finish.
    """

    def __init__(self, conninfo: str, *, pool_size: int = 4) -> None:
        if not isinstance(conninfo, str) or not conninfo:
            raise InvalidInputError(
                f"PostgresSessionStore expects a connection string, got {conninfo!r}"
            )
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError(
                f"PostgresSessionStore expects pool_size >= 1, got {pool_size!r}"
            )
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise ModuleNotFoundError(
                "PostgresSessionStore needs psycopg 3: pip install 'agentloop-runtime[postgres]'",
                name="psycopg",
            ) from None
        self._pool = ConnectionPool(conninfo, pool_size)
        self._lock = threading.Lock()
        # session id -> (version, item texts, turn texts) as last written by this store.
        self._cache: dict[str, tuple[int, tuple[str, ...], TurnTexts]] = {}
        self._texts = ItemTexts()

    def __repr__(self) -> str:
        state = "closed" if self._pool.closed else "open"
        return f"PostgresSessionStore(pool_size={self._pool.size}, {state})"

    async def __aenter__(self) -> PostgresSessionStore:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Connect and create or migrate the schema now (otherwise the first call does)."""
        await self._run("open the store", lambda _connection: None)

    async def aclose(self) -> None:
        """Close every connection; later calls raise ``InvalidStateError``. Idempotent."""
        await self._pool.close()
        with self._lock:
            self._cache.clear()

    async def schema_version(self) -> int:
        """The schema version the database holds (after creating or migrating it)."""
        return await self._run(
            "read the schema version",
            lambda c: int(c.execute("SELECT max(version) FROM agentloop_schema").fetchone()[0]),
        )

    # -- the protocol ---------------------------------------------------------------------

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        """Replace the session's document in one transaction (see ``SessionStore``).

        A save that appends to the rows this store last wrote (the usual one)
        is one round trip: BEGIN, the lock, one statement that writes only if
        the session is still at the version the store knows and the version
        and fence checks pass on the server, COMMIT. Otherwise (or when that
        statement wrote nothing) two: BEGIN, the lock and the reads; then the
        checks here, the writes and COMMIT (the document is encoded in the
        worker thread while the server runs the first ones).
        """
        operation = f"save checkpoint for session {session_id!r}"

        def work(connection: Any) -> int:
            try:
                return write(connection)
            except _REFUSALS:
                raise  # nothing was written: what the store knows of the rows still holds
            except BaseException:
                with self._lock:  # the next save reads the rows again
                    self._cache.pop(session_id, None)
                raise

        def write(connection: Any) -> int:
            with self._lock:
                reuse = self._texts.for_session(session_id)
                cached = self._cache.get(session_id)
            encoded = None
            if cached is not None and _plain(expected_version, fencing_token):
                # The usual save: this store's own last one, plus new items. One round trip.
                encoded = encode_checkpoint(session_id, checkpoint, reuse)
                appended = self._append(
                    connection, encoded, checkpoint, cached, expected_version, fencing_token
                )
                if appended is not None:
                    return appended
            with pipelined_transaction(connection):
                read = sql.read_for_save(connection, session_id)
                if encoded is None:
                    encoded = encode_checkpoint(session_id, checkpoint, reuse)
                status, pending = summarize(checkpoint)
                lease, now, version = read()
                check_fence(session_id, fencing_token, lease, now, operation)
                check_version(session_id, expected_version, version)
                stored, stored_rows, stored_turn, turn_rows = self._stored(
                    connection, session_id, version
                )
                start = first_change(stored, encoded)
                answered = answered_from(encoded, start)
                turn = sql.TurnWrite(
                    encoded.turn, turn_starts(stored_turn, encoded), turn_counts(encoded.turn)
                )
                written = sql.write_checkpoint(
                    connection,
                    session_id,
                    head=encoded.head,
                    items=encoded.items,
                    start=start,
                    answered=sorted(answered),
                    status=status.value,
                    pending_approvals=json.dumps(list(pending)) if pending else "[]",
                    stored_rows=stored_rows,
                    turn=turn,
                    stored_turn=turn_rows,
                )
            saved = int(written.fetchone()[0])
            self._remember(encoded, saved)
            return saved

        return await self._run(operation, work)

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run; committed before it returns."""
        operation = f"record call {call_id!r} of session {session_id!r} as started"

        def work(connection: Any) -> None:
            with transaction(connection):
                sql.lock_session(connection, session_id)
                lease = sql.read_lease(connection, session_id)
                check_fence(session_id, None, lease, sql.now(connection), operation)
                sql.insert_started_call(connection, session_id, call_id, tool_name)

        await self._run(operation, work)

    async def claim(
        self,
        session_id: str,
        call_id: str,
        *,
        tool_name: str,
        input_digest: str,
        fencing_token: int | None = None,
    ) -> Claim:
        """Claim ``call_id`` once (see ``SessionStore.claim``): one row, unique per call."""
        operation = f"claim call {call_id!r} of session {session_id!r}"

        def work(connection: Any) -> Claim:
            with transaction(connection):
                sql.lock_session(connection, session_id)
                lease = sql.read_lease(connection, session_id)
                check_fence(session_id, fencing_token, lease, sql.now(connection), operation)
                approval = next(
                    (
                        (row.input_digest, row.approved)
                        for row in sql.read_approvals(connection, session_id)
                        if row.call_id == call_id
                    ),
                    None,
                )
                claimed = sql.read_claimed(connection, session_id, call_id)
                check_claim(session_id, call_id, input_digest, claimed, approval)
                claimed_at = sql.insert_claim(
                    connection, session_id, call_id, tool_name, input_digest
                )
                # The advisory lock makes a conflict impossible; the unique key is the backstop.
                check_claim(session_id, call_id, input_digest, claimed_at is None, None)
            assert claimed_at is not None
            return Claim(
                session_id=session_id,
                call_id=call_id,
                tool_name=tool_name,
                input_digest=input_digest,
                claimed_at=claimed_at,
            )

        return await self._run(operation, work)

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
        """Record a decision on ``call_id`` (see ``SessionStore.record_approval``)."""
        operation = f"record a decision on call {call_id!r} of session {session_id!r}"

        def work(connection: Any) -> RecordedApproval:
            with transaction(connection):
                sql.lock_session(connection, session_id)
                existing = _approvals(session_id, sql.read_approvals(connection, session_id))
                found = existing.get(call_id)
                claimed = sql.read_claimed(connection, session_id, call_id)
                if not check_decision(session_id, call_id, input_digest, approved, found, claimed):
                    assert found is not None
                    return found
                text, edited = decision_details(session_id, call_id, approved, reason, edited_input)
                decided_at = sql.insert_approval(
                    connection, session_id, call_id, input_digest, approved, text, edited
                )
            return stored_approval(
                session_id,
                call_id,
                input_digest,
                approved,
                decided_at,
                text,
                edited,
                newly_recorded=True,
            )

        return await self._run(operation, work)

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Lease:
        """Lease the session to ``owner`` (see ``SessionStore.acquire``)."""
        operation = f"acquire session {session_id!r}"
        check_owner(owner, operation)
        seconds = check_ttl(ttl, operation)

        def work(connection: Any) -> Lease:
            with transaction(connection):
                sql.lock_session(connection, session_id)
                now = sql.now(connection)
                check_acquire(session_id, owner, sql.read_lease(connection, session_id), now)
                return _grant(connection, session_id, owner, now + seconds)

        return await self._run(operation, work)

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        """Lease the oldest ready, unleased session to ``owner``, or return ``None``.

        Candidates are read ``FOR UPDATE SKIP LOCKED``: sessions another
        worker is acquiring at this moment are skipped, not waited for.
        """
        operation = "acquire a ready session"
        check_owner(owner, operation)
        seconds = check_ttl(ttl, operation)

        def work(connection: Any) -> Lease | None:
            with transaction(connection):
                for row in sql.lock_ready_candidates(connection, _CANDIDATES):
                    summary = _summary(row)
                    if row.leased or not is_ready(
                        summary.status, summary.pending_approvals, summary.undecided
                    ):
                        continue
                    if not sql.try_lock_session(connection, summary.session_id):
                        continue
                    now = sql.now(connection)
                    lease = sql.read_lease(connection, summary.session_id)
                    if lease is not None and lease.live(now):
                        continue
                    return _grant(connection, summary.session_id, owner, now + seconds)
            return None

        return await self._run(operation, work)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` (see ``SessionStore.renew``)."""
        operation = f"renew the lease of session {lease.session_id!r}"
        seconds = check_ttl(ttl, operation)

        def work(connection: Any) -> Lease:
            with transaction(connection):
                sql.lock_session(connection, lease.session_id)
                now = sql.now(connection)
                row = sql.read_lease(connection, lease.session_id)
                check_fence(lease.session_id, lease.token, row, now, operation)
                assert row is not None
                renewed = row._replace(expires_at=now + seconds)
                sql.write_lease(connection, lease.session_id, renewed)
            return renewed.as_lease(lease.session_id)

        return await self._run(operation, work)

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` up; no-op if it is not current."""

        def work(connection: Any) -> None:
            with transaction(connection):
                sql.lock_session(connection, lease.session_id)
                row = sql.read_lease(connection, lease.session_id)
                if row is not None and row.token == lease.token:
                    sql.write_lease(connection, lease.session_id, row._replace(released=True))

        await self._run(f"release the lease of session {lease.session_id!r}", work)

    async def sessions_awaiting_approval(self) -> list[SessionSummary]:
        """Sessions with a pending call and no decision for it, oldest first."""

        def work(connection: Any) -> list[SessionSummary]:
            with transaction(connection):
                rows = sql.read_summaries(connection)
                return [
                    with_undecided_calls(summary, _head(connection, summary.session_id))
                    for summary in map(_summary, rows)
                    if summary.undecided
                ]

        return await self._run("list sessions awaiting approval", work)

    async def sessions_ready(self) -> list[SessionSummary]:
        """Sessions a worker can advance now, not under a live lease, oldest first."""

        def work(connection: Any) -> list[SessionSummary]:
            with transaction(connection):
                rows = sql.read_summaries(connection)
            return [
                summary
                for row, summary in zip(rows, map(_summary, rows), strict=True)
                if not row.leased
                and is_ready(summary.status, summary.pending_approvals, summary.undecided)
            ]

        return await self._run("list sessions ready to advance", work)

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document, version and calls in doubt, or ``None``."""

        def work(connection: Any) -> StoredSession | None:
            loaded = self._read(connection, session_id)
            if loaded is None:
                return None
            document, _items, row, started, approvals = loaded
            return StoredSession(
                session_id=session_id,
                checkpoint=document,
                started_calls=started - answered_call_ids(document["transcript"]),
                updated_at=row.updated_at,
                version=int(row.version),
                status=_status(row.status),
                approvals=approvals,
            )

        return await self._run(f"load session {session_id!r}", work)

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""

        def work(connection: Any) -> list[sql.SessionRow]:
            with transaction(connection):
                return sql.list_session_rows(connection)

        rows = await self._run("list sessions", work)
        return [
            SessionInfo(
                session_id=row.session_id, updated_at=row.updated_at, item_count=row.item_count
            )
            for row in rows
        ]

    async def delete(self, session_id: str) -> bool:
        """Forget the session, its lease, claims and approvals; ``True`` if it had a document."""

        def work(connection: Any) -> bool:
            with transaction(connection):
                sql.lock_session(connection, session_id)
                existed = sql.delete_session(connection, session_id)
            with self._lock:
                self._cache.pop(session_id, None)
                self._texts.forget(session_id)
            return existed

        return await self._run(f"delete session {session_id!r}", work)

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""

        def work(connection: Any) -> list[Item] | None:
            loaded = self._read(connection, session_id)
            return None if loaded is None else loaded[1]

        return await self._run(f"read the transcript of session {session_id!r}", work)

    # -- in a worker thread ------------------------------------------------------------------

    def _read(
        self, connection: Any, session_id: str
    ) -> (
        tuple[
            dict[str, Any], list[Item], sql.SessionRow, frozenset[str], dict[str, RecordedApproval]
        ]
        | None
    ):
        with transaction(connection, read_only=True):
            found = sql.read_session(connection, session_id)
            if found is None:
                return None
            head, counts, row = found
            rows = sql.read_items(connection, session_id)
            turn_rows = sql.read_turn_rows(connection, session_id)
            started = sql.read_started_calls(connection, session_id)
            approvals = _approvals(session_id, sql.read_approvals(connection, session_id))
        document, items = decode_stored(session_id, head, rows, row.item_count, turn_rows, counts)
        return document, items, row, started, approvals

    def _append(
        self,
        connection: Any,
        encoded: EncodedCheckpoint,
        checkpoint: Mapping[str, Any],
        cached: tuple[int, tuple[str, ...], TurnTexts],
        expected_version: int | None,
        fencing_token: int | None,
    ) -> int | None:
        """Save ``encoded`` in one round trip if it appends to the rows this store last
        wrote (version ``cached[0]``: its items and each turn list) and the checks pass on
        the server; the new version, or ``None`` when nothing was written (the long way
        says why)."""
        based_on, stored, stored_turn = cached
        start = first_change(stored, encoded)
        if start != len(stored):
            return None  # a rewrite: the long way deletes the rows past the shared prefix
        starts = turn_starts(stored_turn, encoded)
        if any(start_at != len(stored_turn.get(name, ())) for name, start_at in starts.items()):
            return None  # a turn list rewritten (a new turn, or none): the long way too
        status, pending = summarize(checkpoint)
        with pipelined_transaction(connection):
            sql.lock_session(connection, encoded.session_id)
            written = sql.append_checkpoint(
                connection,
                encoded.session_id,
                based_on=based_on,
                expected_version=expected_version,
                fencing_token=fencing_token,
                head=encoded.head,
                items=encoded.items,
                start=start,
                answered=sorted(answered_from(encoded, start)),
                status=status.value,
                pending_approvals=json.dumps(list(pending)) if pending else "[]",
                turn=sql.TurnWrite(encoded.turn, starts, turn_counts(encoded.turn)),
            )
        row = written.fetchone()
        if row is None:
            return None
        saved = int(row[0])
        self._remember(encoded, saved)
        return saved

    def _stored(
        self, connection: Any, session_id: str, version: int | None
    ) -> tuple[tuple[str, ...], int | None, TurnTexts, dict[str, int] | None]:
        """The stored item texts up to the first damaged or missing row (a save rewrites
        those) and how many rows exist if that is known (the cached copy is current); the
        same for each turn list."""
        if version is None:
            return (), None, {}, None
        with self._lock:
            cached = self._cache.get(session_id)
        if cached is not None and cached[0] == version:
            turn = cached[2]  # every row, none past them
            return cached[1], len(cached[1]), turn, {n: len(t) for n, t in turn.items()}
        texts: list[str] = []
        for position, text in sql.read_items(connection, session_id):
            if position != len(texts) or not isinstance(text, str):
                break
            texts.append(text)
        stored_turn = intact_turn_texts(sql.read_turn_rows(connection, session_id))
        return tuple(texts), None, stored_turn, None

    def _remember(self, encoded: EncodedCheckpoint, version: int) -> None:
        with self._lock:
            self._cache.pop(encoded.session_id, None)
            self._cache[encoded.session_id] = (version, encoded.items, encoded.turn)
            while len(self._cache) > _CACHED_SESSIONS:
                del self._cache[next(iter(self._cache))]
            self._texts.remember(encoded)

    async def _run(self, operation: str, work: Callable[[Any], T]) -> T:
        return await self._pool.run(operation, work)


def _status(value: str) -> SessionStatus:
    try:
        return SessionStatus(value)
    except ValueError:
        return SessionStatus.AWAITING_INPUT


def _approvals(session_id: str, rows: list[sql.ApprovalRow]) -> dict[str, RecordedApproval]:
    return {
        row.call_id: stored_approval(
            session_id,
            row.call_id,
            row.input_digest,
            row.approved,
            row.decided_at,
            row.reason,
            row.edited_input,
        )
        for row in rows
    }


def _head(connection: Any, session_id: str) -> object:
    """The session's stored head text (``None`` if it has none)."""
    found = sql.read_session(connection, session_id)
    return None if found is None else found[0]


def _summary(row: sql.SummaryRow) -> SessionSummary:
    session = row.session
    raw = session.pending_approvals
    pending = tuple(str(call_id) for call_id in raw) if isinstance(raw, list) else ()
    return SessionSummary(
        session_id=session.session_id,
        status=_status(session.status),
        version=int(session.version),
        updated_at=session.updated_at,
        pending_approvals=pending,
        undecided=tuple(call_id for call_id in pending if call_id not in row.decided),
    )


def _grant(connection: Any, session_id: str, owner: str, expires_at: float) -> Lease:
    row = LeaseRow(owner, sql.next_token(connection), expires_at, False)
    sql.write_lease(connection, session_id, row)
    return row.as_lease(session_id)
