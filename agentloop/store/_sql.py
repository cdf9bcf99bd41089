"""Every SQL statement of the SQLite session store: synchronous functions over a connection.

Schema (version :data:`SCHEMA_VERSION`, kept in ``meta``)::

    meta(key, value)                          schema_version, last_sequence
    sessions(session_id, head, item_count,    one row per saved session: the document
             sequence, updated_at)            without its transcript; sequence orders saves
    items(session_id, position, item)         the transcript, one JSON item per row
    started_calls(session_id, call_id,        calls recorded as started, not yet answered
                  tool_name, started_at)

``last_sequence`` grows with every save and is never reused (not even after a
delete), so a session's ``sequence`` both orders ``list_sessions`` and tells a
store whether its cached copy of the items is current. The callers hold the
connection's lock; these functions never run concurrently on one connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from ..core._errors import CheckpointError

__all__ = [
    "SCHEMA_VERSION",
    "SessionRow",
    "connect",
    "delete_session",
    "insert_started_call",
    "list_session_rows",
    "read_items",
    "read_sequence",
    "read_session",
    "read_started_calls",
    "transaction",
    "write_checkpoint",
]

SCHEMA_VERSION = 1
"""The schema this module writes; a file with a newer one is refused."""

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    head TEXT NOT NULL,
    item_count INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX sessions_by_sequence ON sessions (sequence);
CREATE TABLE items (
    session_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
) WITHOUT ROWID;
CREATE TABLE started_calls (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    started_at TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID;
"""


class SessionRow(NamedTuple):
    """A ``sessions`` row, without its head."""

    session_id: str
    item_count: int
    sequence: int
    updated_at: str


@contextmanager
def transaction(connection: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    """One transaction: committed if the block returns, rolled back if it raises.

    A write transaction takes the write lock up front (``BEGIN IMMEDIATE``),
    so its reads and writes see one state of the file.
    """
    connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
    except BaseException:
        if connection.in_transaction:  # some errors (SQLITE_FULL, ...) already rolled back
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` in WAL mode with ``synchronous=FULL``, creating the schema if needed.

    Raises ``CheckpointError`` when the file's schema is newer than this
    module's. ``synchronous=FULL`` fsyncs the WAL at every commit, so a save
    that returned survives an OS crash too, not only a killed process.
    """
    connection = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        with transaction(connection, write=True):
            _ensure_schema(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _ensure_schema(connection: sqlite3.Connection, path: str) -> None:
    tables = {
        str(row[0])
        for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    if not tables:
        # executescript() would COMMIT the open transaction: run the statements one by one.
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                connection.execute(statement)
        connection.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [("schema_version", str(SCHEMA_VERSION)), ("last_sequence", "0")],
        )
        return
    found: int | None = None
    if "meta" in tables:
        row = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        found = int(row[0]) if row is not None and str(row[0]).isdigit() else None
    if found != SCHEMA_VERSION:
        raise CheckpointError(
            f"cannot open session store {path!r}: expected schema version {SCHEMA_VERSION}, "
            f"found {found if found is not None else 'none'}; "
            + (
                "it was written by a newer agentloop, upgrade agentloop to read it"
                if found is not None and found > SCHEMA_VERSION
                else "the file is not an agentloop session store, open another path"
            )
        )


def read_sequence(connection: sqlite3.Connection, session_id: str) -> int | None:
    """The session's current ``sequence``, or ``None`` if it has no document."""
    row = connection.execute(
        "SELECT sequence FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def read_items(connection: sqlite3.Connection, session_id: str) -> tuple[str, ...]:
    """The session's item texts, in transcript order."""
    rows = connection.execute(
        "SELECT item FROM items WHERE session_id = ? ORDER BY position", (session_id,)
    ).fetchall()
    return tuple(str(row[0]) for row in rows)


def read_session(connection: sqlite3.Connection, session_id: str) -> tuple[str, SessionRow] | None:
    """The session's head text and row, or ``None`` if it has no document."""
    row = connection.execute(
        "SELECT head, item_count, sequence, updated_at FROM sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    return str(row[0]), SessionRow(session_id, int(row[1]), int(row[2]), str(row[3]))


def read_started_calls(connection: sqlite3.Connection, session_id: str) -> frozenset[str]:
    """Every call id recorded as started for the session."""
    rows = connection.execute(
        "SELECT call_id FROM started_calls WHERE session_id = ?", (session_id,)
    ).fetchall()
    return frozenset(str(row[0]) for row in rows)


def write_checkpoint(
    connection: sqlite3.Connection,
    session_id: str,
    *,
    head: str,
    items: tuple[str, ...],
    start: int,
    answered: Iterable[str],
    updated_at: str,
) -> int:
    """Replace the session's document, rewriting items from ``start``; return its sequence.

    Items before ``start`` are the ones already stored. Started-call records
    for ``answered`` call ids are cleared. Run inside a write transaction.
    """
    connection.execute(
        "DELETE FROM items WHERE session_id = ? AND position >= ?", (session_id, start)
    )
    connection.executemany(
        "INSERT INTO items (session_id, position, item) VALUES (?, ?, ?)",
        ((session_id, position, items[position]) for position in range(start, len(items))),
    )
    connection.execute(
        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'last_sequence'"
    )
    sequence = int(
        connection.execute("SELECT value FROM meta WHERE key = 'last_sequence'").fetchone()[0]
    )
    connection.execute(
        "INSERT INTO sessions (session_id, head, item_count, sequence, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET head = excluded.head, "
        "item_count = excluded.item_count, sequence = excluded.sequence, "
        "updated_at = excluded.updated_at",
        (session_id, head, len(items), sequence, updated_at),
    )
    connection.executemany(
        "DELETE FROM started_calls WHERE session_id = ? AND call_id = ?",
        ((session_id, call_id) for call_id in answered),
    )
    return sequence


def insert_started_call(
    connection: sqlite3.Connection, session_id: str, call_id: str, tool_name: str, started_at: str
) -> None:
    """Record ``call_id`` as started (again, if it already was)."""
    connection.execute(
        "INSERT INTO started_calls (session_id, call_id, tool_name, started_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, call_id) DO UPDATE SET "
        "tool_name = excluded.tool_name, started_at = excluded.started_at",
        (session_id, call_id, tool_name, started_at),
    )


def list_session_rows(connection: sqlite3.Connection) -> list[SessionRow]:
    """Every session row, most recently saved first."""
    rows = connection.execute(
        "SELECT session_id, item_count, sequence, updated_at FROM sessions ORDER BY sequence DESC"
    ).fetchall()
    return [SessionRow(str(row[0]), int(row[1]), int(row[2]), str(row[3])) for row in rows]


def delete_session(connection: sqlite3.Connection, session_id: str) -> bool:
    """Delete the session's document, items and started calls; ``True`` if it had a document."""
    connection.execute("DELETE FROM items WHERE session_id = ?", (session_id,))
    connection.execute("DELETE FROM started_calls WHERE session_id = ?", (session_id,))
    deleted = connection.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
    return deleted.rowcount > 0
