"""The audit log: who decided which approval, when, how, and for which exact input.

The store's ``record_approval`` keeps the single-use decision (approved or
not, bound to an input digest); the audit log keeps what the store has no
column for: who made it, the action (approve / approve with edits / deny),
the edited input and the deny reason. The in-process worker reads the
edited input and the reason back from here when it applies a decision.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
import attrs

__all__ = [
    "AuditEntry",
    "AuditLog",
    "DecisionAction",
    "MemoryAuditLog",
    "PostgresAuditLog",
    "SqliteAuditLog",
]


class DecisionAction(StrEnum):
    """What the person deciding chose."""

    APPROVE = "approve"
    APPROVE_WITH = "approve_with"
    DENY = "deny"


@attrs.frozen(kw_only=True)
class AuditEntry:
    """One decision made in the inbox.

    ``input`` is the edited input for ``APPROVE_WITH`` (else ``None``);
    ``input_digest`` is the digest of the exact input approved (or denied).
    """

    session_id: str
    call_id: str
    tool_name: str
    action: DecisionAction
    input_digest: str
    decided_by: str
    decided_at: datetime
    reason: str | None = None
    input: Any = None


class AuditLog(Protocol):
    """Where decisions are written; newest first when listed."""

    async def add(self, entry: AuditEntry) -> None:
        """Append ``entry``; durable before it returns (it is written before the store's record)."""
        ...

    async def remove(self, entry: AuditEntry) -> None:
        """Drop ``entry``: the store refused the decision it describes."""
        ...

    async def find(
        self, session_id: str, call_id: str, *, approved: bool, input_digest: str
    ) -> AuditEntry | None:
        """The latest entry for the call that matches the decision the store recorded."""
        ...

    async def entries(self, limit: int = 200) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first."""
        ...


class MemoryAuditLog:
    """An audit log kept in memory (for a ``MemorySessionStore`` and tests)."""

    def __init__(self) -> None:
        self._entries: list[AuditEntry] = []

    async def add(self, entry: AuditEntry) -> None:
        """Append ``entry``."""
        self._entries.append(entry)

    async def remove(self, entry: AuditEntry) -> None:
        """Drop ``entry``."""
        if entry in self._entries:
            self._entries.remove(entry)

    async def find(
        self, session_id: str, call_id: str, *, approved: bool, input_digest: str
    ) -> AuditEntry | None:
        """The latest entry for the call that matches the recorded decision."""
        for entry in reversed(self._entries):
            if (entry.session_id, entry.call_id) == (session_id, call_id) and _matches(
                entry, approved, input_digest
            ):
                return entry
        return None

    async def entries(self, limit: int = 200) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first."""
        return list(reversed(self._entries))[:limit]


_COLUMNS = (
    "session_id, call_id, tool_name, action, input_digest, decided_by, decided_at, reason, input"
)


def _matches(entry: AuditEntry, approved: bool, input_digest: str) -> bool:
    return (entry.action is not DecisionAction.DENY) == approved and (
        entry.input_digest == input_digest
    )


_ACTIONS = {True: ("approve", "approve_with"), False: ("deny", "deny")}
_FIND = (
    "SELECT {columns} FROM agentloop_serve_audit WHERE session_id = ? AND call_id = ? "
    "AND input_digest = ? AND action IN (?, ?) ORDER BY id DESC LIMIT 1"
)
_REMOVE = (
    "DELETE FROM agentloop_serve_audit WHERE session_id = ? AND call_id = ? AND action = ? "
    "AND input_digest = ? AND decided_by = ? AND decided_at = ?"
)


def _remove_parameters(entry: AuditEntry) -> tuple[Any, ...]:
    row = _row(entry)
    return (row[0], row[1], row[3], row[4], row[5], row[6])


def _row(entry: AuditEntry) -> tuple[Any, ...]:
    return (
        entry.session_id,
        entry.call_id,
        entry.tool_name,
        entry.action.value,
        entry.input_digest,
        entry.decided_by,
        entry.decided_at.timestamp(),
        entry.reason,
        None if entry.action is not DecisionAction.APPROVE_WITH else json.dumps(entry.input),
    )


def _entry(row: tuple[Any, ...]) -> AuditEntry:
    session_id, call_id, tool_name, action, digest, who, when, reason, data = row
    return AuditEntry(
        session_id=session_id,
        call_id=call_id,
        tool_name=tool_name,
        action=DecisionAction(action),
        input_digest=digest,
        decided_by=who,
        decided_at=datetime.fromtimestamp(float(when), UTC),
        reason=reason,
        input=None if data is None else json.loads(data),
    )


class _SqlAuditLog:
    """The audit log's queries over one SQL table; subclasses run them (``?`` parameters)."""

    async def _run(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def add(self, entry: AuditEntry) -> None:
        """Append ``entry``; committed before it returns."""
        await self._run(
            f"INSERT INTO agentloop_serve_audit ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _row(entry),
        )

    async def remove(self, entry: AuditEntry) -> None:
        """Drop ``entry``."""
        await self._run(_REMOVE, _remove_parameters(entry))

    async def find(
        self, session_id: str, call_id: str, *, approved: bool, input_digest: str
    ) -> AuditEntry | None:
        """The latest entry for the call that matches the recorded decision."""
        rows = await self._run(
            _FIND.format(columns=_COLUMNS),
            (session_id, call_id, input_digest, *_ACTIONS[approved]),
        )
        return _entry(rows[0]) if rows else None

    async def entries(self, limit: int = 200) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first."""
        rows = await self._run(
            f"SELECT {_COLUMNS} FROM agentloop_serve_audit ORDER BY id DESC LIMIT ?", (limit,)
        )
        return [_entry(row) for row in rows]


class SqliteAuditLog(_SqlAuditLog):
    """The audit log as a table (``agentloop_serve_audit``) in the store's SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = anyio.Lock()
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=10)
        if not self._ready:
            with connection:
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS agentloop_serve_audit ("
                    "id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, "
                    "call_id TEXT NOT NULL, tool_name TEXT NOT NULL, action TEXT NOT NULL, "
                    "input_digest TEXT NOT NULL, decided_by TEXT NOT NULL, "
                    "decided_at REAL NOT NULL, reason TEXT, input TEXT)"
                )
            self._ready = True
        return connection

    async def _run(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        def work() -> list[tuple[Any, ...]]:
            connection = self._connect()
            try:
                with connection:
                    return list(connection.execute(sql, parameters).fetchall())
            finally:
                connection.close()

        async with self._lock:
            return await anyio.to_thread.run_sync(work)


class PostgresAuditLog(_SqlAuditLog):
    """The audit log as a table (``agentloop_serve_audit``) in the store's PostgreSQL database."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._ready = False

    async def _run(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        # Blocking psycopg in a worker thread: its async connections run on asyncio only.
        import psycopg

        def work() -> list[tuple[Any, ...]]:
            with psycopg.connect(self._conninfo) as connection:
                if not self._ready:
                    # Two servers creating the table at once would collide in pg_type.
                    connection.execute("SELECT pg_advisory_xact_lock(hashtext('agentloop_serve'))")
                    connection.execute(
                        "CREATE TABLE IF NOT EXISTS agentloop_serve_audit ("
                        "id BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, "
                        "call_id TEXT NOT NULL, tool_name TEXT NOT NULL, action TEXT NOT NULL, "
                        "input_digest TEXT NOT NULL, decided_by TEXT NOT NULL, "
                        "decided_at DOUBLE PRECISION NOT NULL, reason TEXT, input TEXT)"
                    )
                cursor = connection.execute(sql.replace("?", "%s"), parameters)
                rows = cursor.fetchall() if cursor.description else []
                connection.commit()
                self._ready = True
                return [tuple(row) for row in rows]

        return await anyio.to_thread.run_sync(work)
