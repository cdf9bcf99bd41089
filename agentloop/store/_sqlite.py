"""``SqliteSessionStore``: sessions in one SQLite file, written from a thread of its own."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import anyio

from ..core._errors import CheckpointError, InvalidStateError
from ..core._items import Item
from ..loop._session_store import (
    Claim,
    Lease,
    RecordedApproval,
    SessionInfo,
    SessionStatus,
    SessionSummary,
    StoredSession,
    check_ttl,
    summarize,
)
from . import _sql
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
from ._location import sqlite_file
from ._offload import WorkerThread
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

__all__ = ["SqliteSessionStore"]

T = TypeVar("T")

_CACHED_SESSIONS = 16


class SqliteSessionStore:
    """A :class:`SessionStore` in the SQLite file at ``path`` (created if missing).

    ``path`` is a file path or a ``sqlite:///PATH`` URL (``sqlite:////ABS`` for
    an absolute one), the same value ``agentloop chat --store`` and ``agentloop
    serve --store`` take. One that cannot be opened (a directory, a missing
    parent directory, another URL) is refused at once with ``InvalidInputError``.

    One connection, opened on first use (or by ``async with``/:meth:`open`),
    is shared by every call and guarded by a lock; each call runs in the
    store's worker thread (the calling task waits for it, shielded from
    cancellation), so it works under asyncio and trio. The file
    is in WAL mode, so other processes can read while this one writes, and
    uses ``synchronous=FULL``: a save or a started-call record that returned
    survives a killed process and an OS crash alike.

    A transcript is stored one item per row: a save writes only the items
    that changed since the last save (usually an appended tail; after a
    compaction, everything from the first differing position), in the same
    transaction as the rest of the document. The turn in progress's items,
    tool calls and model calls are rows the same way, so a save within a long
    turn writes what the turn added, not the whole turn.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = sqlite_file(path)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        # session id -> (sequence, item texts, turn texts) as last read or written by this store.
        self._cache: dict[str, tuple[int, tuple[str, ...], TurnTexts]] = {}
        self._texts = ItemTexts()
        self._worker = WorkerThread(f"agentloop SqliteSessionStore {self._path}")

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._connection else "not opened"
        return f"SqliteSessionStore({self._path!r}, {state})"

    @property
    def path(self) -> str:
        """The database file's path."""
        return self._path

    async def __aenter__(self) -> SqliteSessionStore:
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
        """Open the file now (otherwise the first call does); ``CheckpointError`` if unreadable."""
        await self._run("open the store", lambda _connection: None)

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``InvalidStateError``. Idempotent."""
        with anyio.CancelScope(shield=True):
            await self._worker.run(self._close)
        self._worker.stop()

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            self._cache.clear()
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        """Replace the session's document in one transaction (see ``SessionStore``)."""
        encoded = encode_checkpoint(session_id, checkpoint, self._texts.for_session(session_id))
        summary = summarize(checkpoint)
        operation = f"save checkpoint for session {session_id!r}"
        return await self._run(
            operation,
            partial(self._save, encoded, summary, expected_version, fencing_token, operation),
        )

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run; committed and synced before it returns."""
        operation = f"record call {call_id!r} of session {session_id!r} as started"

        def work(connection: sqlite3.Connection) -> None:
            with _sql.transaction(connection, write=True):
                lease = _sql.read_lease(connection, session_id)
                check_fence(session_id, None, lease, time.time(), operation)
                _sql.insert_started_call(connection, session_id, call_id, tool_name, _now())

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
        """Claim ``call_id`` once, in one write transaction (see ``SessionStore.claim``)."""
        operation = f"claim call {call_id!r} of session {session_id!r}"

        def work(connection: sqlite3.Connection) -> Claim:
            with _sql.transaction(connection, write=True):
                lease = _sql.read_lease(connection, session_id)
                check_fence(session_id, fencing_token, lease, time.time(), operation)
                approval = next(
                    (
                        (row.input_digest, row.approved)
                        for row in _sql.read_approvals(connection, session_id)
                        if row.call_id == call_id
                    ),
                    None,
                )
                claimed = _sql.read_claim(connection, session_id, call_id)
                check_claim(session_id, call_id, input_digest, claimed, approval)
                claimed_at = _now()
                _sql.insert_claim(
                    connection, session_id, call_id, tool_name, input_digest, claimed_at
                )
            return Claim(
                session_id=session_id,
                call_id=call_id,
                tool_name=tool_name,
                input_digest=input_digest,
                claimed_at=datetime.fromisoformat(claimed_at),
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

        def work(connection: sqlite3.Connection) -> RecordedApproval:
            with _sql.transaction(connection, write=True):
                existing = _approvals(session_id, _sql.read_approvals(connection, session_id))
                found = existing.get(call_id)
                claimed = _sql.read_claim(connection, session_id, call_id)
                if not check_decision(session_id, call_id, input_digest, approved, found, claimed):
                    assert found is not None
                    return found
                text, edited = decision_details(session_id, call_id, approved, reason, edited_input)
                decided_at = _now()
                _sql.insert_approval(
                    connection,
                    session_id,
                    call_id,
                    input_digest,
                    approved,
                    decided_at,
                    reason=text,
                    edited_input=edited,
                )
            return stored_approval(
                session_id,
                call_id,
                input_digest,
                approved,
                datetime.fromisoformat(decided_at),
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

        def work(connection: sqlite3.Connection) -> Lease:
            with _sql.transaction(connection, write=True):
                now = time.time()
                check_acquire(session_id, owner, _sql.read_lease(connection, session_id), now)
                return _grant(connection, session_id, owner, now + seconds)

        return await self._run(operation, work)

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        """Lease the oldest ready, unleased session to ``owner``, or return ``None``."""
        operation = "acquire a ready session"
        check_owner(owner, operation)
        seconds = check_ttl(ttl, operation)

        def work(connection: sqlite3.Connection) -> Lease | None:
            with _sql.transaction(connection, write=True):
                now = time.time()
                ready = _ready(_sql.read_summaries(connection), now)
                if not ready:
                    return None
                return _grant(connection, ready[0].session_id, owner, now + seconds)

        return await self._run(operation, work)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` (see ``SessionStore.renew``)."""
        operation = f"renew the lease of session {lease.session_id!r}"
        seconds = check_ttl(ttl, operation)

        def work(connection: sqlite3.Connection) -> Lease:
            with _sql.transaction(connection, write=True):
                now = time.time()
                row = _sql.read_lease(connection, lease.session_id)
                check_fence(lease.session_id, lease.token, row, now, operation)
                assert row is not None
                renewed = row._replace(expires_at=now + seconds)
                _sql.write_lease(connection, lease.session_id, renewed)
            return renewed.as_lease(lease.session_id)

        return await self._run(operation, work)

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` up; no-op if it is not current."""

        def work(connection: sqlite3.Connection) -> None:
            with _sql.transaction(connection, write=True):
                row = _sql.read_lease(connection, lease.session_id)
                if row is not None and row.token == lease.token:
                    _sql.write_lease(connection, lease.session_id, row._replace(released=True))

        await self._run(f"release the lease of session {lease.session_id!r}", work)

    async def sessions_awaiting_approval(self) -> list[SessionSummary]:
        """Sessions with a pending call and no decision for it, oldest first."""

        def work(connection: sqlite3.Connection) -> list[SessionSummary]:
            with _sql.transaction(connection, write=False):
                rows = _sql.read_summaries(connection)
                summaries = [_summary(row, decided) for row, decided, _lease in rows]
                return [
                    with_undecided_calls(summary, _head(connection, summary.session_id))
                    for summary in summaries
                    if summary.undecided
                ]

        return await self._run("list sessions awaiting approval", work)

    async def sessions_ready(self) -> list[SessionSummary]:
        """Sessions a worker can advance now, not under a live lease, oldest first."""

        def work(connection: sqlite3.Connection) -> list[SessionSummary]:
            with _sql.transaction(connection, write=False):
                return _ready(_sql.read_summaries(connection), time.time())

        return await self._run("list sessions ready to advance", work)

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document, version and calls in doubt, or ``None``."""
        return await self._run(f"load session {session_id!r}", partial(self._load, session_id))

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        rows = await self._run("list sessions", _sql.list_session_rows)
        return [
            SessionInfo(
                session_id=row.session_id,
                updated_at=datetime.fromisoformat(row.updated_at),
                item_count=row.item_count,
            )
            for row in rows
        ]

    async def delete(self, session_id: str) -> bool:
        """Forget the session, its lease, claims and approvals; ``True`` if it had a document."""
        return await self._run(f"delete session {session_id!r}", partial(self._delete, session_id))

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""
        return await self._run(
            f"read the transcript of session {session_id!r}", partial(self._transcript, session_id)
        )

    # -- in the worker thread, holding the lock ------------------------------------------

    async def _run(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._worker.run(self._run_locked, operation, work)

    def _run_locked(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._closed:
                raise InvalidStateError(
                    f"cannot {operation}: SqliteSessionStore({self._path!r}) is closed; "
                    "open a new SqliteSessionStore"
                )
            try:
                if self._connection is None:
                    self._connection = _sql.connect(self._path)
                return work(self._connection)
            except sqlite3.Error as error:
                raise CheckpointError(
                    f"cannot {operation} in session store {self._path!r}: SQLite reported "
                    f"{type(error).__name__}: {error}; check that the path is a writable "
                    "agentloop session store"
                ) from error

    def _save(
        self,
        encoded: EncodedCheckpoint,
        summary: tuple[SessionStatus, tuple[str, ...]],
        expected_version: int | None,
        fencing_token: int | None,
        operation: str,
        connection: sqlite3.Connection,
    ) -> int:
        session_id = encoded.session_id
        try:
            sequence = self._write(
                encoded, summary, expected_version, fencing_token, operation, connection
            )
        except BaseException:
            # The next save reads the rows again (and rewrites from the first damaged one).
            self._cache.pop(session_id, None)
            raise
        self._remember(session_id, sequence, encoded.items, encoded.turn)
        self._texts.remember(encoded)
        return sequence

    def _write(
        self,
        encoded: EncodedCheckpoint,
        summary: tuple[SessionStatus, tuple[str, ...]],
        expected_version: int | None,
        fencing_token: int | None,
        operation: str,
        connection: sqlite3.Connection,
    ) -> int:
        session_id = encoded.session_id
        with _sql.transaction(connection, write=True):
            lease, sequence, next_sequence = _sql.read_save_state(connection, session_id)
            check_fence(session_id, fencing_token, lease, time.time(), operation)
            check_version(session_id, expected_version, sequence)
            cached = self._cache.get(session_id)
            stored_turn: TurnTexts
            if cached is not None and cached[0] == sequence:
                stored, stored_rows = cached[1], len(cached[1])  # every row, none past them
                stored_turn = cached[2]
                turn_rows: dict[str, int] | None = {n: len(t) for n, t in stored_turn.items()}
            else:
                stored = () if sequence is None else self._texts_of(connection, session_id)
                stored_rows = None
                stored_turn = (
                    {}
                    if sequence is None
                    else intact_turn_texts(_sql.read_turn_rows(connection, session_id))
                )
                turn_rows = None
            start = first_change(stored, encoded)
            answered = answered_from(encoded, start)
            status, pending = summary
            sequence = _sql.write_checkpoint(
                connection,
                session_id,
                head=encoded.head,
                items=encoded.items,
                start=start,
                answered=sorted(answered),
                updated_at=_now(),
                status=status.value,
                pending_approvals=json.dumps(list(pending)) if pending else "[]",
                sequence=next_sequence,
                stored_rows=stored_rows,
                turn=encoded.turn,
                turn_starts=turn_starts(stored_turn, encoded),
                stored_turn=turn_rows,
                turn_counts=turn_counts(encoded.turn),
            )
        return sequence

    def _read(self, session_id: str, connection: sqlite3.Connection) -> _Loaded | None:
        with _sql.transaction(connection, write=False):
            found = _sql.read_session(connection, session_id)
            if found is None:
                return None
            head, counts, row = found
            cached = self._cache.get(session_id)
            if cached is not None and cached[0] == row.sequence:
                rows: tuple[tuple[object, object], ...] = tuple(enumerate(cached[1]))
                turn_rows = _turn_rows(cached[2])
            else:
                rows = _sql.read_items(connection, session_id)
                turn_rows = _sql.read_turn_rows(connection, session_id)
            started = _sql.read_started_calls(connection, session_id)
            approvals = _sql.read_approvals(connection, session_id)
        document, items = decode_stored(session_id, head, rows, row.item_count, turn_rows, counts)
        self._remember(
            session_id,
            row.sequence,
            tuple(str(text) for _p, text in rows),
            _turn_texts(turn_rows),
        )
        return _Loaded(document, items, row, started, _approvals(session_id, approvals))

    def _load(self, session_id: str, connection: sqlite3.Connection) -> StoredSession | None:
        loaded = self._read(session_id, connection)
        if loaded is None:
            return None
        document = loaded.document
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=loaded.started - answered_call_ids(document["transcript"]),
            updated_at=datetime.fromisoformat(loaded.row.updated_at),
            version=loaded.row.sequence,
            status=_status(loaded.row.status),
            approvals=loaded.approvals,
        )

    def _transcript(self, session_id: str, connection: sqlite3.Connection) -> list[Item] | None:
        loaded = self._read(session_id, connection)
        return None if loaded is None else loaded.items

    def _delete(self, session_id: str, connection: sqlite3.Connection) -> bool:
        with _sql.transaction(connection, write=True):
            existed = _sql.delete_session(connection, session_id)
        self._cache.pop(session_id, None)
        self._texts.forget(session_id)
        return existed

    def _texts_of(self, connection: sqlite3.Connection, session_id: str) -> tuple[str, ...]:
        """The stored item texts up to the first damaged or missing row (a save rewrites those)."""
        texts: list[str] = []
        for position, text in _sql.read_items(connection, session_id):
            if position != len(texts) or not isinstance(text, str):
                break
            texts.append(text)
        return tuple(texts)

    def _remember(
        self, session_id: str, sequence: int, items: tuple[str, ...], turn: TurnTexts
    ) -> None:
        self._cache.pop(session_id, None)
        self._cache[session_id] = (sequence, items, turn)
        while len(self._cache) > _CACHED_SESSIONS:
            del self._cache[next(iter(self._cache))]


def _turn_rows(turn: TurnTexts) -> tuple[tuple[object, object, object], ...]:
    """``turn`` as the rows :func:`_sql.read_turn_rows` reads (by list and position)."""
    return tuple(
        (name, position, text)
        for name, texts in sorted(turn.items())
        for position, text in enumerate(texts)
    )


def _turn_texts(rows: tuple[tuple[object, object, object], ...]) -> TurnTexts:
    """The texts of validated turn rows, by list."""
    texts: dict[str, list[str]] = {}
    for name, _position, text in rows:
        texts.setdefault(str(name), []).append(str(text))
    return {name: tuple(found) for name, found in texts.items()}


class _Loaded(NamedTuple):
    """A session's validated document and items, row, open claims and decisions."""

    document: dict[str, Any]
    items: list[Item]
    row: _sql.SessionRow
    started: frozenset[str]
    approvals: dict[str, RecordedApproval]


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _status(value: str) -> SessionStatus:
    try:
        return SessionStatus(value)
    except ValueError:
        return SessionStatus.AWAITING_INPUT


def _approvals(session_id: str, rows: list[_sql.ApprovalRow]) -> dict[str, RecordedApproval]:
    return {
        row.call_id: stored_approval(
            session_id,
            row.call_id,
            row.input_digest,
            row.approved,
            datetime.fromisoformat(row.decided_at),
            row.reason,
            row.edited_input,
        )
        for row in rows
    }


def _head(connection: sqlite3.Connection, session_id: str) -> object:
    """The session's stored head text (``None`` if it has none)."""
    found = _sql.read_session(connection, session_id)
    return None if found is None else found[0]


def _pending(text: str) -> tuple[str, ...]:
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    return tuple(str(call_id) for call_id in value) if isinstance(value, list) else ()


def _summary(row: _sql.SessionRow, decided: frozenset[str]) -> SessionSummary:
    pending = _pending(row.pending_approvals)
    return SessionSummary(
        session_id=row.session_id,
        status=_status(row.status),
        version=row.sequence,
        updated_at=datetime.fromisoformat(row.updated_at),
        pending_approvals=pending,
        undecided=tuple(call_id for call_id in pending if call_id not in decided),
    )


def _ready(
    rows: list[tuple[_sql.SessionRow, frozenset[str], LeaseRow | None]], now: float
) -> list[SessionSummary]:
    ready = []
    for row, decided, lease in rows:
        summary = _summary(row, decided)
        leased = lease is not None and lease.live(now)
        if not leased and is_ready(summary.status, summary.pending_approvals, summary.undecided):
            ready.append(summary)
    return ready


def _grant(connection: sqlite3.Connection, session_id: str, owner: str, expires_at: float) -> Lease:
    row = LeaseRow(owner, _sql.next_token(connection), expires_at, False)
    _sql.write_lease(connection, session_id, row)
    return row.as_lease(session_id)
