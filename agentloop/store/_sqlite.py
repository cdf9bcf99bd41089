"""``SqliteSessionStore``: sessions in one SQLite file, through anyio's thread offload."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import anyio
import anyio.to_thread

from ..core._errors import CheckpointError, InvalidStateError
from ..core._items import Item
from . import _sql
from ._documents import (
    EncodedCheckpoint,
    ItemTexts,
    answered_call_ids,
    check_items,
    common_prefix_length,
    decode_checkpoint,
    decode_items,
    encode_checkpoint,
)
from ._protocol import SessionInfo, StoredSession

__all__ = ["SqliteSessionStore"]

T = TypeVar("T")

_CACHED_SESSIONS = 16


class SqliteSessionStore:
    """A :class:`SessionStore` in the SQLite file at ``path`` (created if missing).

    One connection, opened on first use (or by ``async with``/:meth:`open`),
    is shared by every call and guarded by a lock; each call runs in a worker
    thread (``anyio.to_thread``), so it works under asyncio and trio. The file
    is in WAL mode, so other processes can read while this one writes, and
    uses ``synchronous=FULL``: a save or a started-call record that returned
    survives a killed process and an OS crash alike.

    A transcript is stored one item per row: a save writes only the items
    that changed since the last save (usually an appended tail; after a
    compaction, everything from the first differing position), in the same
    transaction as the rest of the document.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        # session id -> (sequence, item texts) as last read or written by this store.
        self._cache: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._texts = ItemTexts()

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
            await anyio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            self._cache.clear()
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def save_checkpoint(self, session_id: str, checkpoint: Mapping[str, Any]) -> None:
        """Replace the session's document in one transaction (see ``SessionStore``)."""
        encoded = encode_checkpoint(session_id, checkpoint, self._texts.for_session(session_id))
        operation = f"save checkpoint for session {session_id!r}"
        await self._run(operation, partial(self._save, encoded))

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run; committed and synced before it returns."""
        started_at = datetime.now(UTC).isoformat()
        await self._run(
            f"record call {call_id!r} of session {session_id!r} as started",
            lambda connection: _sql.insert_started_call(
                connection, session_id, call_id, tool_name, started_at
            ),
        )

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document and its calls in doubt, or ``None``."""
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
        """Forget the session and its started calls; ``True`` if it had a document."""
        return await self._run(f"delete session {session_id!r}", partial(self._delete, session_id))

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""
        return await self._run(
            f"read the transcript of session {session_id!r}", partial(self._transcript, session_id)
        )

    # -- in the worker thread, holding the lock ------------------------------------------

    async def _run(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._run_locked, operation, work)

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

    def _save(self, encoded: EncodedCheckpoint, connection: sqlite3.Connection) -> None:
        session_id = encoded.session_id
        with _sql.transaction(connection, write=True):
            sequence = _sql.read_sequence(connection, session_id)
            stored = () if sequence is None else self._items(connection, session_id, sequence)
            start = common_prefix_length(stored, encoded.items)
            answered = check_items(session_id, encoded.items, start)
            sequence = _sql.write_checkpoint(
                connection,
                session_id,
                head=encoded.head,
                items=encoded.items,
                start=start,
                answered=sorted(answered),
                updated_at=datetime.now(UTC).isoformat(),
            )
        self._remember(session_id, sequence, encoded.items)
        self._texts.remember(encoded)

    def _read(self, session_id: str, connection: sqlite3.Connection) -> _Loaded | None:
        with _sql.transaction(connection, write=False):
            found = _sql.read_session(connection, session_id)
            if found is None:
                return None
            head, row = found
            items = self._items(connection, session_id, row.sequence)
            started = _sql.read_started_calls(connection, session_id)
        self._remember(session_id, row.sequence, items)
        return _Loaded(head, row, items, started)

    def _load(self, session_id: str, connection: sqlite3.Connection) -> StoredSession | None:
        loaded = self._read(session_id, connection)
        if loaded is None:
            return None
        document = decode_checkpoint(loaded.head, loaded.items)
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=loaded.started - answered_call_ids(document["transcript"]),
            updated_at=datetime.fromisoformat(loaded.row.updated_at),
        )

    def _transcript(self, session_id: str, connection: sqlite3.Connection) -> list[Item] | None:
        loaded = self._read(session_id, connection)
        return None if loaded is None else decode_items(loaded.items)

    def _delete(self, session_id: str, connection: sqlite3.Connection) -> bool:
        with _sql.transaction(connection, write=True):
            existed = _sql.delete_session(connection, session_id)
        self._cache.pop(session_id, None)
        self._texts.forget(session_id)
        return existed

    def _items(
        self, connection: sqlite3.Connection, session_id: str, sequence: int
    ) -> tuple[str, ...]:
        cached = self._cache.get(session_id)
        if cached is not None and cached[0] == sequence:
            return cached[1]
        return _sql.read_items(connection, session_id)

    def _remember(self, session_id: str, sequence: int, items: tuple[str, ...]) -> None:
        self._cache.pop(session_id, None)
        self._cache[session_id] = (sequence, items)
        while len(self._cache) > _CACHED_SESSIONS:
            del self._cache[next(iter(self._cache))]


class _Loaded(NamedTuple):
    """A session's head, row, items and started calls, read in one transaction."""

    head: str
    row: _sql.SessionRow
    items: tuple[str, ...]
    started: frozenset[str]
