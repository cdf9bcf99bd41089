"""``SqlBackend``: the storage protocol in SQL, one text for SQLite and PostgreSQL.

Three tables, ``{t}heads(session_id, revision, meta, document)``,
``{t}lists(session_id, list, position, body)`` and ``{t}keyed(session_id, tbl,
key, body)`` (``{t}``: the dialect's prefix). A commit is one transaction: the
compare-and-set of the head first, then the list and keyed rows, only if the
head moved. The :class:`Dialect` is what differs (see docs/store.md, "One SQL
backend", "Transactions" and "Locking").
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from typing import Any, Protocol, Self

from ._backed import BackendSessionStore
from ._backend import BackendHead, BackendWrite
from ._offload import ConnectionPool

__all__ = ["Dialect", "SqlBackend", "SqlSessionStore", "sql_for", "tables"]


class Dialect(Protocol):
    """What SQLite and PostgreSQL do differently under :class:`SqlBackend`."""

    sql: Callable[[str], str]  # a statement in the dialect: see :func:`sql_for`
    pool: ConnectionPool  # runs each call in a thread, with a connection of its own

    @property
    def one_statement_save(
        self,
    ) -> Callable[[Any, str, int, str, Callable[[int], BackendWrite]], Any] | None:
        """A whole :meth:`SqlBackend.commit_numbered` on a head in one statement, if the
        dialect has one: the number, ``None`` if refused, or ``NotImplemented`` for this
        write."""
        ...

    def write(self, connection: Any) -> AbstractContextManager[None]:
        """One write transaction: committed if the block returns, rolled back if it raises.
        Statements may be queued until a result is read or the block ends."""
        ...

    def next_number(self, connection: Any, counter: str) -> int:
        """The counter's next value, committed (outside any transaction of the caller)."""
        ...

    def take_number(self, connection: Any, counter: str) -> int:
        """The counter's next value, in the caller's transaction."""
        ...


_STATEMENTS = {
    "read": "SELECT revision, meta, document FROM {t}heads WHERE session_id = ?",
    "lock_head": "SELECT revision FROM {t}heads WHERE session_id = ?{lock}",
    "insert_head": "INSERT INTO {t}heads (session_id, revision, meta, document) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING RETURNING revision",
    "update_head": "UPDATE {t}heads SET revision = ?, meta = ?, document = ? "
    "WHERE session_id = ? AND revision = ? RETURNING revision",
    "cut_list": "DELETE FROM {t}lists WHERE session_id = ? AND list = ? AND position >= ?",
    "append": "INSERT INTO {t}lists (session_id, list, position, body) VALUES (?, ?, ?, ?)",
    "put": "INSERT INTO {t}keyed (session_id, tbl, key, body) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (session_id, tbl, key) DO UPDATE SET body = excluded.body",
    "drop": "DELETE FROM {t}keyed WHERE session_id = ? AND tbl = ? AND key = ?",
    "read_list": "SELECT position, body FROM {t}lists WHERE session_id = ? AND list = ? "
    "ORDER BY position",
    "read_table": "SELECT key, body FROM {t}keyed WHERE session_id = ? AND tbl = ?",
    "read_key": "SELECT key, body FROM {t}keyed WHERE session_id = ? AND tbl = ? AND key = ?",
    "heads": "SELECT session_id, revision, meta, document FROM {t}heads",
    "delete_head": "DELETE FROM {t}heads WHERE session_id = ? RETURNING revision",
    "delete_lists": "DELETE FROM {t}lists WHERE session_id = ?",
    "delete_keyed": "DELETE FROM {t}keyed WHERE session_id = ?",
}


def sql_for(prefix: str, placeholder: str, lock: str = "") -> Callable[[str], str]:
    """Puts a dialect's table prefix (``{t}``), the clause that locks a head's row until the
    transaction ends (``{lock}``) and parameter marks (``?``) into a statement."""
    return lambda text: text.format(t=prefix, lock=lock).replace("?", placeholder)


def tables(prefix: str, bigint: str, suffix: str) -> list[str]:
    """The backend's three tables, as ``CREATE TABLE`` statements for a dialect: its table
    prefix, its type for a revision and what follows a table keyed by its primary key."""
    return [
        f"""CREATE TABLE {prefix}heads (
    session_id TEXT PRIMARY KEY, revision {bigint} NOT NULL, meta TEXT NOT NULL, document TEXT
)""",
        f"""CREATE TABLE {prefix}lists (
    session_id TEXT NOT NULL, list TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (session_id, list, position)
){suffix}""",
        f"""CREATE TABLE {prefix}keyed (
    session_id TEXT NOT NULL, tbl TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (session_id, tbl, key)
){suffix}""",
    ]


class SqlBackend:
    """A :class:`~agentloop.store.StorageBackend` in a SQL database, through ``dialect``."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._run = dialect.pool.run
        self._sql = {name: dialect.sql(text) for name, text in _STATEMENTS.items()}

    async def read(self, session_id: str) -> BackendHead | None:
        """The session's head, or ``None``."""

        def work(connection: Any) -> BackendHead | None:
            row = connection.execute(self._sql["read"], (session_id,)).fetchone()
            return None if row is None else _head(row)

        return await self._run(f"read session {session_id!r}", work)

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        """Apply ``write`` iff the head's revision is ``expected_revision`` (one transaction)."""

        def work(connection: Any) -> bool:
            with self.dialect.write(connection):
                return self._apply(connection, session_id, expected_revision, write)

        return await self._run(f"write session {session_id!r}", work)

    async def commit_numbered(
        self,
        session_id: str,
        expected_revision: int,
        counter: str,
        write: Callable[[int], BackendWrite],
    ) -> int | None:
        """The counter's next number ``n`` and the commit of ``write(n)``, in one transaction.

        The dialect's one statement does it all on a head when it has one
        (PostgreSQL: one round trip). Otherwise the head's row is locked
        (SQLite: the write lock of ``BEGIN IMMEDIATE``) and its revision read,
        then the number taken and the head and rows written.
        """
        one_statement = self.dialect.one_statement_save if expected_revision else None

        def work(connection: Any) -> int | None:
            if one_statement is not None:
                found = one_statement(connection, session_id, expected_revision, counter, write)
                if found is not NotImplemented:
                    return None if found is None else int(found)
            with self.dialect.write(connection):
                if expected_revision:
                    locked = connection.execute(self._sql["lock_head"], (session_id,)).fetchone()
                    if locked is None or int(locked[0]) != expected_revision:
                        return None
                number = self.dialect.take_number(connection, counter)
                if not self._apply(connection, session_id, expected_revision, write(number)):
                    return None  # a head was inserted first: the number is spent
            return number

        return await self._run(f"write session {session_id!r}", work)

    def _apply(
        self, connection: Any, session_id: str, expected_revision: int, write: BackendWrite
    ) -> bool:
        """In the caller's transaction: the compare-and-set of the head, then (if it applied)
        ``write``'s list rows cut and appended, its keyed rows dropped and put."""
        head = write.head
        if expected_revision == 0:
            statement = self._sql["insert_head"]
            values: tuple[object, ...] = (session_id, head.revision, head.meta, head.document)
        else:
            statement = self._sql["update_head"]
            values = (head.revision, head.meta, head.document, session_id, expected_revision)
        # The compare-and-set's answer first (in a pipeline: BEGIN and it, one round
        # trip); the rows then travel with COMMIT.
        if connection.execute(statement, values).fetchone() is None:
            return False  # nothing written: the transaction commits no change
        for name, (start, _rows) in write.lists.items():
            connection.execute(self._sql["cut_list"], (session_id, name, start))
        for statement, rows in (
            ("append", [
                (session_id, name, start + offset, text)
                for name, (start, texts) in write.lists.items()
                for offset, text in enumerate(texts)
            ]),
            ("drop", [
                (session_id, table, key) for table, keys in write.drop.items() for key in keys
            ]),
            ("put", [
                (session_id, table, key, text)
                for table, rows_by_key in write.rows.items()
                for key, text in rows_by_key.items()
            ]),
        ):  # fmt: skip
            if rows:
                connection.cursor().executemany(self._sql[statement], rows)
        return True

    async def read_list(self, session_id: str, name: str) -> list[str]:
        """The list's rows, in order: those at positions 0, 1, ... up to the first missing one.

        A row past a missing position (written behind the store's back, or left
        by damage) is not read; the store's load then finds fewer rows than the
        head counts and names the missing one, and its next save rewrites the
        list from there.
        """

        def work(connection: Any) -> list[str]:
            rows = connection.execute(self._sql["read_list"], (session_id, name)).fetchall()
            texts: list[str] = []
            for position, text in rows:
                if position != len(texts):
                    break
                texts.append(text)
            return texts

        return await self._run(f"read session {session_id!r}", work)

    async def read_rows(
        self, session_id: str, table: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        """The table's rows by key (those of ``keys`` found, or all)."""
        wanted = None if keys is None else list(keys)
        if wanted == []:
            return {}

        def work(connection: Any) -> dict[str, str]:
            if wanted is None:
                return dict(connection.execute(self._sql["read_table"], (session_id, table)))
            read_key = self._sql["read_key"]
            found = (connection.execute(read_key, (session_id, table, key)) for key in wanted)
            return dict(row for rows in found for row in rows)

        return await self._run(f"read session {session_id!r}", work)

    async def heads(self) -> dict[str, BackendHead]:
        """Every session's head."""

        def work(connection: Any) -> dict[str, BackendHead]:
            rows = connection.execute(self._sql["heads"]).fetchall()
            return {row[0]: _head(row[1:]) for row in rows}

        return await self._run("list sessions", work)

    async def delete(self, session_id: str) -> bool:
        """Drop the session's head, lists and keyed rows; ``True`` if it had a head."""

        def work(connection: Any) -> bool:
            with self.dialect.write(connection):
                head = connection.execute(self._sql["delete_head"], (session_id,))
                connection.execute(self._sql["delete_lists"], (session_id,))
                connection.execute(self._sql["delete_keyed"], (session_id,))
                deleted = head.fetchone()  # in a pipeline: read once all is queued
            return deleted is not None

        return await self._run(f"delete session {session_id!r}", work)

    async def next_number(self, counter: str) -> int:
        """The counter's next value."""
        return await self._run(
            f"count {counter}", lambda connection: self.dialect.next_number(connection, counter)
        )

    async def aclose(self) -> None:
        """Close the connections; the data stays."""
        await self.dialect.pool.close()


class SqlSessionStore(BackendSessionStore):
    """A :class:`BackendSessionStore` over ``dialect``'s :class:`SqlBackend`: what the
    SQLite and PostgreSQL stores share."""

    def __init__(self, dialect: Dialect, history_limit: int) -> None:
        self._dialect = dialect
        self._sql_backend = SqlBackend(dialect)
        super().__init__(self._sql_backend, history_limit=history_limit)

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def open(self) -> None:
        """Connect (and create or migrate the schema) now; otherwise the first call does
        (``CheckpointError`` if the database cannot be opened)."""
        await self._dialect.pool.run("open the store", lambda _connection: None)


def _head(row: Any) -> BackendHead:
    return BackendHead(revision=int(row[0]), meta=row[1], document=row[2])
