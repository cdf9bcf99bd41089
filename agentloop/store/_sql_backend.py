"""``SqlBackend``: the storage protocol in SQL, one text for SQLite and PostgreSQL.

Three tables (``{t}`` is the dialect's prefix: none for SQLite's file of its
own, ``agentloop_`` for PostgreSQL)::

    {t}heads(session_id, revision, meta, document)   one row per session
    {t}lists(session_id, list, position, body)         each list's rows, in order
    {t}keyed(session_id, tbl, key, body)               each table's rows, by key

A commit is one transaction: the compare-and-set of the head first (an
``UPDATE ... WHERE revision = ?``, or an insert that does nothing when a
head exists), then the list and keyed rows, only if the head moved. Under
PostgreSQL's row locks a second writer of the same head waits for the first
and then finds the revision changed; SQLite's ``BEGIN IMMEDIATE`` runs one
writer at a time. The dialect (:class:`Dialect`) is what differs: the
placeholders, the connections and the thread each call runs in, the write
transaction, counters and the schema.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from typing import Any, Protocol, Self, TypeVar

from ._backed import BackendSessionStore
from ._backend import BackendHead, BackendWrite

__all__ = ["Dialect", "SqlBackend", "SqlSessionStore", "sql_for", "tables"]

T = TypeVar("T")


class Dialect(Protocol):
    """What SQLite and PostgreSQL do differently under :class:`SqlBackend`."""

    prefix: str
    """Prepended to each table's name."""
    placeholder: str
    """The driver's parameter mark (``?`` or ``%s``)."""
    pipelined: bool
    """Whether :meth:`write` queues statements, sent at the first read of a result and
    at the end of the block (then a result is read only once all is queued)."""
    row_lock: str
    """Appended to a ``SELECT`` of a head to lock its row until the transaction ends."""

    @property
    def one_statement_save(
        self,
    ) -> Callable[[Any, str, int, str, Callable[[int], BackendWrite]], Any] | None:
        """A whole :meth:`SqlBackend.commit_numbered` on a head in one statement, if the
        dialect has one: the number, ``None`` if refused, or ``NotImplemented`` for this
        write."""
        ...

    async def run(self, operation: str, work: Callable[[Any], T]) -> T:
        """``work(connection)`` in a thread with a connection of its own; ``operation``
        names it in errors (the driver's errors become ``CheckpointError``)."""
        ...

    def write(self, connection: Any) -> AbstractContextManager[None]:
        """One write transaction: committed if the block returns, rolled back if it raises."""
        ...

    def next_number(self, connection: Any, counter: str) -> int:
        """The counter's next value, committed (outside any transaction of the caller)."""
        ...

    def take_number(self, connection: Any, counter: str) -> Any:
        """Queue the counter's next value in the caller's transaction: a cursor whose
        one row holds it."""
        ...

    async def close(self) -> None:
        """Close the connections; later calls raise ``InvalidStateError``."""
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
    """Puts a dialect's table prefix (``{t}``), row lock (``{lock}``) and parameter marks
    (``?``) into a statement."""
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
        sql = sql_for(dialect.prefix, dialect.placeholder, dialect.row_lock)
        self._sql = {name: sql(text) for name, text in _STATEMENTS.items()}

    async def open(self) -> None:
        """Connect (and create or migrate the schema) now; otherwise the first call does."""
        await self.dialect.run("open the store", lambda _connection: None)

    async def read(self, session_id: str) -> BackendHead | None:
        """The session's head, or ``None``."""

        def work(connection: Any) -> BackendHead | None:
            row = connection.execute(self._sql["read"], (session_id,)).fetchone()
            return None if row is None else _head(row)

        return await self.dialect.run(f"read session {session_id!r}", work)

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        """Apply ``write`` iff the head's revision is ``expected_revision`` (one transaction)."""
        head = write.head
        if expected_revision == 0:
            statement = self._sql["insert_head"]
            values: tuple[object, ...] = (session_id, head.revision, head.meta, head.document)
        else:
            statement = self._sql["update_head"]
            values = (head.revision, head.meta, head.document, session_id, expected_revision)

        def work(connection: Any) -> bool:
            with self.dialect.write(connection):
                # The compare-and-set's answer first (in a pipeline: BEGIN and it, one
                # round trip); the rows then travel with COMMIT.
                if connection.execute(statement, values).fetchone() is None:
                    return False  # nothing written: the transaction commits no change
                self._write_rows(connection, session_id, write)
            return True

        return await self.dialect.run(f"write session {session_id!r}", work)

    async def commit_numbered(
        self,
        session_id: str,
        expected_revision: int,
        counter: str,
        write: Callable[[int], BackendWrite],
    ) -> int | None:
        """The counter's next number ``n`` and the commit of ``write(n)``, in one transaction.

        The dialect's one statement does it all when it has one (PostgreSQL:
        one round trip). Otherwise the head's row is locked (SQLite: the write
        lock of ``BEGIN IMMEDIATE``) and its revision read with the number, in
        one round trip; the head and rows then travel with ``COMMIT``. A first
        commit (no head to lock) takes the number, then commits.
        """
        if expected_revision == 0:
            number = await self.next_number(counter)
            return number if await self.commit(session_id, 0, write(number)) else None
        pipelined = self.dialect.pipelined
        one_statement = self.dialect.one_statement_save

        def work(connection: Any) -> int | None:
            if one_statement is not None:
                found = one_statement(connection, session_id, expected_revision, counter, write)
                if found is not NotImplemented:
                    return None if found is None else int(found)
            with self.dialect.write(connection):
                locked = connection.execute(self._sql["lock_head"], (session_id,))
                # In a pipeline, the number travels with the lock (and a refused
                # commit spends it); otherwise it is taken once the revision matched.
                taken = self.dialect.take_number(connection, counter) if pipelined else None
                found = locked.fetchall()
                if taken is None and found and int(found[0][0]) == expected_revision:
                    taken = self.dialect.take_number(connection, counter)
                number = None if taken is None else int(taken.fetchall()[0][0])
                if number is None or not found or int(found[0][0]) != expected_revision:
                    return None
                done = write(number)
                head = done.head
                connection.execute(
                    self._sql["update_head"],
                    (head.revision, head.meta, head.document, session_id, expected_revision),
                )
                self._write_rows(connection, session_id, done)
            return number

        return await self.dialect.run(f"write session {session_id!r}", work)

    def _write_rows(self, connection: Any, session_id: str, write: BackendWrite) -> None:
        """Cut and append ``write``'s list rows, drop and put its keyed rows."""
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

        return await self.dialect.run(f"read session {session_id!r}", work)

    async def read_rows(
        self, session_id: str, table: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        """The table's rows by key (those of ``keys`` found, or all)."""
        wanted = None if keys is None else list(keys)
        if wanted == []:
            return {}

        def work(connection: Any) -> dict[str, str]:
            if wanted is None:
                rows = connection.execute(self._sql["read_table"], (session_id, table)).fetchall()
                return {row[0]: row[1] for row in rows}
            found = {}
            for key in wanted:
                row = connection.execute(self._sql["read_key"], (session_id, table, key))
                for _key, text in row.fetchall():
                    found[key] = text
            return found

        return await self.dialect.run(f"read session {session_id!r}", work)

    async def heads(self) -> dict[str, BackendHead]:
        """Every session's head."""

        def work(connection: Any) -> dict[str, BackendHead]:
            rows = connection.execute(self._sql["heads"]).fetchall()
            return {row[0]: _head(row[1:]) for row in rows}

        return await self.dialect.run("list sessions", work)

    async def delete(self, session_id: str) -> bool:
        """Drop the session's head, lists and keyed rows; ``True`` if it had a head."""

        pipelined = self.dialect.pipelined

        def work(connection: Any) -> bool:
            with self.dialect.write(connection):
                head = connection.execute(self._sql["delete_head"], (session_id,))
                deleted = None if pipelined else head.fetchone()
                connection.execute(self._sql["delete_lists"], (session_id,))
                connection.execute(self._sql["delete_keyed"], (session_id,))
                if pipelined:
                    deleted = head.fetchone()
            return deleted is not None

        return await self.dialect.run(f"delete session {session_id!r}", work)

    async def next_number(self, counter: str) -> int:
        """The counter's next value."""
        return await self.dialect.run(
            f"count {counter}", lambda connection: self.dialect.next_number(connection, counter)
        )

    async def aclose(self) -> None:
        """Close the connections; the data stays."""
        await self.dialect.close()


class SqlSessionStore(BackendSessionStore):
    """A :class:`BackendSessionStore` over ``dialect``'s :class:`SqlBackend`: what the
    SQLite and PostgreSQL stores share."""

    def __init__(self, dialect: Any, history_limit: int) -> None:
        self._dialect = dialect
        self._sql_backend = SqlBackend(dialect)
        super().__init__(self._sql_backend, history_limit=history_limit)

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def open(self) -> None:
        """Connect (and create or migrate the schema) now; otherwise the first call does
        (``CheckpointError`` if the database cannot be opened)."""
        await self._sql_backend.open()


def _head(row: Any) -> BackendHead:
    return BackendHead(revision=int(row[0]), meta=row[1], document=row[2])
