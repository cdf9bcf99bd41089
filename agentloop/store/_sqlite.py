"""``SqliteSessionStore``: sessions in one SQLite file, through :class:`SqlBackend`.

Schema :data:`SCHEMA_VERSION` (kept in ``meta``): the backend's tables and
``counters(name, value)``; older files are moved onto it when opened (see
``_sql_legacy`` and docs/store.md), a file of a newer schema is refused.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ..core._errors import CheckpointError
from ._history import DEFAULT_HISTORY_LIMIT
from ._location import sqlite_file
from ._offload import ConnectionPool
from ._sql_backend import SqlSessionStore, sql_for, tables
from ._sql_legacy import move_legacy_rows, restatus_questions

__all__ = ["SCHEMA_VERSION", "SqliteSessionStore"]

SCHEMA_VERSION = 8
"""The schema this module writes; a file with a newer one is refused, older ones moved."""

_SCHEMA = [
    *tables("", "INTEGER", " WITHOUT ROWID"),
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
]

_SQL = sql_for("", "?")
_LEGACY_NAMES = {"claims": "started_calls", "version": "sequence", "claimed_at": "started_at"}


class SqliteDialect:
    """SQLite under :class:`SqlBackend`: one connection (calls run one at a time, in
    order), WAL, ``synchronous=FULL``, writes under ``BEGIN IMMEDIATE``."""

    sql = staticmethod(_SQL)  # no row lock: BEGIN IMMEDIATE holds the file's write lock
    one_statement_save = None

    def __init__(self, path: str) -> None:
        self.path = path
        self.pool = ConnectionPool(
            self._connect,
            size=1,
            name=f"SqliteSessionStore({path!r})",
            failure=self._failure,
            idle=lambda connection: not connection.in_transaction,
        )

    @contextmanager
    def write(self, connection: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` if the block raises."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if connection.in_transaction:  # some errors (SQLITE_FULL, ...) already rolled back
                connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def next_number(self, connection: sqlite3.Connection, counter: str) -> int:
        """Increment ``counter`` in a transaction of its own, not synced: the WAL is written
        in order, so the next synced commit (the one that uses the number) makes it durable."""
        connection.execute("PRAGMA synchronous=NORMAL")
        try:
            with self.write(connection):
                return self.take_number(connection, counter)
        finally:
            connection.execute("PRAGMA synchronous=FULL")

    def take_number(self, connection: sqlite3.Connection, counter: str) -> int:
        """Increment ``counter`` in the caller's transaction; its new value."""
        row = connection.execute(
            "INSERT INTO counters (name, value) VALUES (?, 1) ON CONFLICT (name) "
            "DO UPDATE SET value = value + 1 RETURNING value",
            (counter,),
        ).fetchone()
        return int(row[0])

    def _failure(self, operation: str, error: BaseException) -> CheckpointError | None:
        if not isinstance(error, sqlite3.Error):
            return None
        return CheckpointError(
            f"cannot {operation} in session store {self.path!r}: SQLite reported "
            f"{type(error).__name__}: {error}; check that the path is a writable "
            "agentloop session store"
        )

    def _connect(self, _operation: str) -> sqlite3.Connection:
        """Open the file in WAL mode with ``synchronous=FULL``; create or move the schema."""
        connection = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            with self.write(connection):
                self._ensure_schema(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _ensure_schema(self, connection: sqlite3.Connection) -> None:
        """Create the schema in a new file or bring an older one's to it; refuse any other."""
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        tables = {str(name) for (name,) in connection.execute(query)}
        found: int | None = None if tables else 0
        if "meta" in tables:
            query = "SELECT value FROM meta WHERE key = 'schema_version'"
            row = connection.execute(query).fetchone()
            found = int(row[0]) if row is not None and str(row[0]).isdigit() else None
        if found == SCHEMA_VERSION:
            return
        if found is None or found > SCHEMA_VERSION:
            raise CheckpointError(
                f"cannot open session store {self.path!r}: expected schema version "
                f"{SCHEMA_VERSION}, found {'none' if found is None else found}; "
                + (
                    "the file is not an agentloop session store, open another path"
                    if found is None
                    else "it was written by a newer agentloop, upgrade agentloop to read it"
                )
            )
        if found in (6, 7):
            restatus_questions(connection, _SQL)
            connection.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )
            return
        if not found:
            connection.execute(
                "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
            )
        for statement in _SCHEMA:
            connection.execute(statement)
        self._move(connection, found)

    def _move(self, connection: sqlite3.Connection, found: int) -> None:
        """Set the counters and the version; move an older schema's rows onto the tables."""
        counters = {"versions": 0, "tokens": 0}
        if found:
            old = dict(connection.execute("SELECT key, value FROM meta").fetchall())
            counters["tokens"] = int(old.get("last_token", 0))
            greatest = connection.execute("SELECT max(sequence) FROM sessions").fetchone()[0]
            counters["versions"] = max(int(old.get("last_sequence", 0)), int(greatest or 0))
            move_legacy_rows(connection, _LEGACY_NAMES, _columns, _SQL, repr(self.path))
            connection.execute("DELETE FROM meta")
            restatus_questions(connection, _SQL)
        connection.executemany("INSERT INTO counters (name, value) VALUES (?, ?)", counters.items())
        connection.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    """The table's columns (none if it does not exist)."""
    return {str(row[1]) for row in connection.execute(f"PRAGMA table_info({table})")}


class SqliteSessionStore(SqlSessionStore):
    """A :class:`SessionStore` in the SQLite file at ``path`` (created if missing).

    ``path`` is a file path or a ``sqlite:///PATH`` URL (``sqlite:////ABS`` for
    an absolute one), the same value ``agentloop chat --store`` and ``agentloop
    serve --store`` take. One that cannot be opened (a directory, a missing
    parent directory, another URL) is refused at once with ``InvalidInputError``.

    One connection, opened on first use (or by ``async with``/:meth:`open`),
    serves every call in the store's worker thread (the calling task waits
    for it, shielded from cancellation), so it works under asyncio and trio.
    The file is in WAL mode, so other processes can read while this one
    writes, and uses ``synchronous=FULL``: a save or a started-call record
    that returned survives a killed process and an OS crash alike. Several
    processes may share the file: each write is a compare-and-set of the
    session's head (see :class:`BackendSessionStore`).

    A transcript is stored one item per row: a save writes only the items
    that changed since the last save (usually an appended tail; after a
    compaction, everything from the first differing position), in the same
    transaction as the rest of the document. The turn in progress's items,
    tool calls and model calls are rows the same way.

    ``history_limit``: how many of each session's latest steps stay
    addressable at least (see :meth:`BackendSessionStore.history`; 0: none).
    """

    _dialect: SqliteDialect

    def __init__(
        self, path: str | os.PathLike[str], *, history_limit: int = DEFAULT_HISTORY_LIMIT
    ) -> None:
        super().__init__(SqliteDialect(sqlite_file(path)), history_limit)

    def __repr__(self) -> str:
        pool = self._dialect.pool
        state = "closed" if pool.closed else "open" if pool.opened else "not opened"
        return f"SqliteSessionStore({self.path!r}, {state})"

    @property
    def path(self) -> str:
        """The database file's path."""
        return self._dialect.path
