"""The audit log as a table (``agentloop_serve_audit``) in a SQLite or PostgreSQL database.

Decisions and answers share the table. An answer's row names its question
in three columns added after the first release (``question_id``,
``question_kind``, ``content_size``); a table made before them gets them on
first use (``ALTER TABLE ... ADD COLUMN``) and its rows, which have none,
read back as the decisions they are. ``input`` holds an answer's kept
content as JSON (SQL ``NULL`` when it was too large to keep). A resolution of
a call in doubt is a row whose ``question_kind`` is ``call_in_doubt``
(``question_id`` ``in_doubt:CALL_ID``, ``action`` the resolution).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ..tools._questions import QuestionAction
from ._audit import AnswerEntry, AuditEntry, AuditRecord, DecisionAction, ResolutionEntry

__all__ = ["PostgresAuditLog", "SqliteAuditLog"]

_COLUMNS = (
    "session_id, call_id, tool_name, action, input_digest, decided_by, decided_at, reason, "
    "input, question_id, question_kind, content_size"
)
_ADDED = (("question_id", "TEXT"), ("question_kind", "TEXT"), ("content_size", "BIGINT"))
_CREATE = (
    "CREATE TABLE IF NOT EXISTS agentloop_serve_audit ("
    "id {id} PRIMARY KEY{autoincrement}, session_id TEXT NOT NULL, "
    "call_id TEXT NOT NULL, tool_name TEXT NOT NULL, action TEXT NOT NULL, "
    "input_digest TEXT NOT NULL, decided_by TEXT NOT NULL, "
    "decided_at {real} NOT NULL, reason TEXT, input TEXT, "
    "question_id TEXT, question_kind TEXT, content_size BIGINT)"
)
_ALTER = "ALTER TABLE agentloop_serve_audit ADD COLUMN"
_ACTIONS = {True: ("approve", "approve_with"), False: ("deny", "deny")}
_FIND = (
    "SELECT {columns} FROM agentloop_serve_audit WHERE session_id = ? AND call_id = ? "
    "AND input_digest = ? AND action IN (?, ?) AND question_id IS NULL ORDER BY id DESC LIMIT 1"
)
_REMOVE = (
    "DELETE FROM agentloop_serve_audit WHERE session_id = ? AND call_id = ? AND action = ? "
    "AND input_digest = ? AND decided_by = ? AND decided_at = ? "
    "AND COALESCE(question_id, '') = ?"
)


_IN_DOUBT = "call_in_doubt"


def _row(entry: AuditRecord) -> tuple[Any, ...]:
    when = entry.decided_at.timestamp()
    if isinstance(entry, ResolutionEntry):
        kept = json.dumps(entry.value) if entry.value_kept else None
        return (
            *(entry.session_id, entry.call_id, entry.tool_name, entry.resolution),
            *(entry.value_digest, entry.decided_by, when, None, kept),
            *(f"in_doubt:{entry.call_id}", _IN_DOUBT, entry.value_size),
        )
    common = (entry.session_id, entry.call_id, entry.tool_name, entry.action.value)
    if isinstance(entry, AnswerEntry):
        kept = json.dumps(entry.content) if entry.content_kept else None
        return (
            *common,
            entry.content_digest,
            entry.decided_by,
            when,
            None,
            kept,
            entry.question_id,
            entry.kind,
            entry.content_size,
        )
    edited = json.dumps(entry.input) if entry.action is DecisionAction.APPROVE_WITH else None
    return (
        *common,
        entry.input_digest,
        entry.decided_by,
        when,
        entry.reason,
        edited,
        None,
        None,
        None,
    )


def _remove_parameters(entry: AuditRecord) -> tuple[Any, ...]:
    row = _row(entry)
    return (row[0], row[1], row[3], row[4], row[5], row[6], row[9] or "")


def _entry(row: tuple[Any, ...]) -> AuditRecord:
    session_id, call_id, tool_name, action, digest, who, when, reason, data, *question = row
    question_id, kind, size = question
    decided_at = datetime.fromtimestamp(float(when), UTC)
    if kind == _IN_DOUBT:
        return ResolutionEntry(
            session_id=session_id,
            call_id=call_id,
            tool_name=tool_name,
            resolution=action,
            value_digest=digest,
            value_size=int(size or 0),
            decided_by=who,
            decided_at=decided_at,
            value=None if data is None else json.loads(data),
            value_kept=data is not None,
        )
    if question_id is not None:
        return AnswerEntry(
            session_id=session_id,
            question_id=question_id,
            call_id=call_id,
            tool_name=tool_name,
            kind=kind or "",
            action=QuestionAction(action),
            content_digest=digest,
            content_size=int(size or 0),
            decided_by=who,
            decided_at=decided_at,
            content=None if data is None else json.loads(data),
            content_kept=data is not None,
        )
    return AuditEntry(
        session_id=session_id,
        call_id=call_id,
        tool_name=tool_name,
        action=DecisionAction(action),
        input_digest=digest,
        decided_by=who,
        decided_at=decided_at,
        reason=reason,
        input=None if data is None else json.loads(data),
    )


class _SqlAuditLog:
    """The audit log's queries over one SQL table; subclasses run them (``?`` parameters)."""

    async def _run(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def add(self, entry: AuditRecord) -> None:
        """Append ``entry``; committed before it returns."""
        marks = ", ".join("?" * 12)
        await self._run(
            f"INSERT INTO agentloop_serve_audit ({_COLUMNS}) VALUES ({marks})", _row(entry)
        )

    async def remove(self, entry: AuditRecord) -> None:
        """Drop ``entry``."""
        await self._run(_REMOVE, _remove_parameters(entry))

    async def find(
        self, session_id: str, call_id: str, *, approved: bool, input_digest: str
    ) -> AuditEntry | None:
        """The latest decision on the call that matches the decision the store recorded."""
        rows = await self._run(
            _FIND.format(columns=_COLUMNS),
            (session_id, call_id, input_digest, *_ACTIONS[approved]),
        )
        found = _entry(rows[0]) if rows else None
        return found if isinstance(found, AuditEntry) else None

    async def entries(self, limit: int = 200) -> list[AuditRecord]:
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
                    _CREATE.format(id="INTEGER", autoincrement=" AUTOINCREMENT", real="REAL")
                )
                present = {
                    r[1] for r in connection.execute("PRAGMA table_info(agentloop_serve_audit)")
                }
                for name, kind in _ADDED:
                    if name not in present:
                        connection.execute(f"{_ALTER} {name} {kind}")
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
                        _CREATE.format(id="BIGSERIAL", autoincrement="", real="DOUBLE PRECISION")
                    )
                    for name, kind in _ADDED:
                        connection.execute(f"{_ALTER} IF NOT EXISTS {name} {kind}")
                cursor = connection.execute(sql.replace("?", "%s"), parameters)
                rows = cursor.fetchall() if cursor.description else []
                connection.commit()
                self._ready = True
                return [tuple(row) for row in rows]

        return await anyio.to_thread.run_sync(work)
