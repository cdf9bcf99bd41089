"""``MemorySessionStore``: the storage protocol in dicts under one lock (docs/store.md)."""

from __future__ import annotations

import threading
from collections.abc import Collection

import attrs

from ._backed import BackendSessionStore
from ._backend import BackendHead, BackendWrite
from ._history import DEFAULT_HISTORY_LIMIT

__all__ = ["MemoryBackend", "MemorySessionStore"]


@attrs.define
class _Session:
    head: BackendHead
    lists: dict[str, list[str]] = attrs.field(factory=dict)
    tables: dict[str, dict[str, str]] = attrs.field(factory=dict)


class MemoryBackend:
    """A :class:`~agentloop.store.StorageBackend` in this process's memory, thread-safe."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    async def read(self, session_id: str) -> BackendHead | None:
        """The session's head, or ``None``."""
        with self._lock:
            session = self._sessions.get(session_id)
            return None if session is None else session.head

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        """Apply ``write`` iff the head's revision is ``expected_revision``."""
        with self._lock:
            session = self._sessions.get(session_id)
            if (0 if session is None else session.head.revision) != expected_revision:
                return False
            if session is None:
                session = self._sessions[session_id] = _Session(write.head)
            session.head = write.head
            for name, (start, rows) in write.lists.items():
                stored = session.lists.setdefault(name, [])
                del stored[start:]
                stored.extend(rows)
            for table, keys in write.drop.items():
                stored_rows = session.tables.get(table, {})
                for key in keys:
                    stored_rows.pop(key, None)
            for table, rows_by_key in write.rows.items():
                session.tables.setdefault(table, {}).update(rows_by_key)
            return True

    async def read_list(self, session_id: str, name: str) -> list[str]:
        """The list's rows, in order."""
        with self._lock:
            session = self._sessions.get(session_id)
            return [] if session is None else list(session.lists.get(name, ()))

    async def read_rows(
        self, session_id: str, table: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        """The table's rows by key (those of ``keys`` found, or all)."""
        with self._lock:
            session = self._sessions.get(session_id)
            rows = {} if session is None else session.tables.get(table, {})
            if keys is None:
                return dict(rows)
            return {key: rows[key] for key in keys if key in rows}

    async def heads(self) -> dict[str, BackendHead]:
        """Every session's head."""
        with self._lock:
            return {session_id: session.head for session_id, session in self._sessions.items()}

    async def delete(self, session_id: str) -> bool:
        """Drop the session; ``True`` if it had a head."""
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    async def next_number(self, counter: str) -> int:
        """The counter's next value."""
        with self._lock:
            self._counters[counter] = number = self._counters.get(counter, 0) + 1
            return number

    async def aclose(self) -> None:
        """Nothing to release; the data stays readable."""


class MemorySessionStore(BackendSessionStore):
    """A :class:`SessionStore` in this process's memory, for tests and short-lived hosts.

    Documents are kept as JSON text, so what you save and what you load never
    share objects. ``aclose`` keeps the data, so one instance can stand for a
    store that is reopened; threads (or event loops) may share it.
    ``history_limit``: how many of each session's latest steps stay
    addressable at least (0: none).
    """

    def __init__(self, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        super().__init__(MemoryBackend(), history_limit=history_limit)
