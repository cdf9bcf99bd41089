"""``PostgresSessionStore``: sessions in PostgreSQL (psycopg 3), through :class:`SqlBackend`.

Schema: the backend's ``agentloop_*`` tables (texts, not ``jsonb``: jsonb
reorders keys and drops duplicates) and a sequence per counter; each applied
migration (:data:`MIGRATIONS`) is a row of ``agentloop_schema`` (see
``_sql_legacy`` and docs/store.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from ..core._errors import CheckpointError, InvalidInputError
from ._backend import BackendWrite
from ._history import DEFAULT_HISTORY_LIMIT
from ._offload import ConnectionPool
from ._sql_backend import SqlSessionStore, sql_for, tables
from ._sql_legacy import move_legacy_rows, restatus_questions

__all__ = ["MIGRATIONS", "PostgresSessionStore"]

_TABLES = [
    "CREATE SEQUENCE IF NOT EXISTS agentloop_versions",
    "CREATE SEQUENCE IF NOT EXISTS agentloop_tokens",
    *tables("agentloop_", "BIGINT", ""),
]
MIGRATIONS: tuple[list[str], ...] = ([], [], [], _TABLES, [], [])
"""Migration ``n`` (1-based) brings the schema from version ``n - 1`` to ``n``. Migrations 1
to 3 built the table-per-kind layout (agentloop 0.x); a new database skips them, and 4 moves
an older one's rows onto the backend's tables, whichever of its columns it has. 5 (rows only)
and 6 (rows only) re-derive the status of the heads resting on a question or a call in doubt."""

_SQL = sql_for("agentloop_", "%s", " FOR UPDATE")
_MIGRATION_LOCK = 0x6167_6C6F_6F70  # "agloop": serializes concurrent migrators
_SAVE = """
WITH head AS (
    UPDATE agentloop_heads SET revision = %(revision)s, document = %(document)s,
        meta = %(before)s || nextval(%(sequence)s::regclass)::text || %(after)s
    WHERE session_id = %(session)s AND revision = %(expected)s
    RETURNING meta, substr(meta, %(start)s::int, length(meta) - %(around)s::int) AS number
), cut AS (
    DELETE FROM agentloop_lists AS l USING unnest(%(names)s::text[], %(ends)s::int[]) AS c(n, e)
    WHERE l.session_id = %(session)s AND l.list = c.n AND l.position >= c.e
        AND EXISTS (SELECT FROM head)
), listed AS (
    INSERT INTO agentloop_lists (session_id, list, position, body)
    SELECT %(session)s, r.n, r.p, r.b
    FROM unnest(%(lists)s::text[], %(positions)s::int[], %(bodies)s::text[]) AS r(n, p, b)
    WHERE EXISTS (SELECT FROM head)
    ON CONFLICT (session_id, list, position) DO UPDATE SET body = excluded.body
), dropped AS (
    DELETE FROM agentloop_keyed AS d USING unnest(%(drop_tables)s::text[], %(drop_keys)s::text[])
        AS x(t, k)
    WHERE d.session_id = %(session)s AND d.tbl = x.t AND d.key = x.k
        AND EXISTS (SELECT FROM head)
), put AS (
    INSERT INTO agentloop_keyed (session_id, tbl, key, body)
    SELECT %(session)s, k.t, k.k, coalesce(k.b || (SELECT number FROM head) || k.a, k.b)
    FROM unnest(%(tables)s::text[], %(keys)s::text[], %(texts)s::text[], %(afters)s::text[])
        AS k(t, k, b, a)
    WHERE EXISTS (SELECT FROM head)
    ON CONFLICT (session_id, tbl, key) DO UPDATE SET body = excluded.body
)
SELECT number FROM head
"""
"""A save on a head in one statement (one round trip, atomic without a transaction):
the compare-and-set takes the row's lock, then the version number (spliced into the
meta text and into the keyed rows that hold it, such as the step history's row), and
only if it applied are list rows put and cut past their new end and keyed rows
dropped and put (a key both dropped and put is only put: the same as dropping first)."""
_MARKS = (7_304_129_853_016_457_931, 8_146_031_772_590_334_617)
"""Two versions a save's write is built with to find where the number goes in its texts."""
_COUNTER = re.compile(r"^[a-z_]{1,40}$")


class PostgresDialect:
    """PostgreSQL under :class:`SqlBackend`: a pool of autocommit psycopg connections."""

    sql = staticmethod(_SQL)

    def __init__(self, conninfo: str, pool_size: int) -> None:
        self._conninfo = conninfo
        self._schema_ready = False
        self._sequences = {"agentloop_versions", "agentloop_tokens"}
        self.pool = ConnectionPool(
            self._connect,
            size=pool_size,
            name="the PostgresSessionStore",
            failure=_failure,
            idle=_idle,
        )

    @contextmanager
    def write(self, connection: Any) -> Iterator[None]:
        """One transaction in pipeline mode: ``BEGIN`` travels with the block's first
        statements when it first fetches a result, ``COMMIT`` with the rest, in one sync.
        If the block or the commit raises, it is rolled back (a connection left in a
        transaction is never reused: see ``ConnectionPool``)."""
        with connection.pipeline() as pipe:
            connection.execute("BEGIN")
            try:
                yield
                connection.execute("COMMIT")
                pipe.sync()
            except BaseException:
                _roll_back(connection, pipe)
                raise

    def next_number(self, connection: Any, counter: str) -> int:
        """``nextval`` of the counter's sequence, committed at once (autocommit)."""
        return self.take_number(connection, counter)

    def take_number(self, connection: Any, counter: str) -> int:
        """``nextval`` of the counter's sequence (created on first use): ``agentloop_NAME``,
        or for a name that is not lowercase letters, one named by its digest."""
        import psycopg

        sequence = _sequence(counter)
        if sequence not in self._sequences:
            # Two processes creating it at once: one of them gets a unique violation or
            # "relation already exists" (IF NOT EXISTS is not atomic); it exists either way.
            with suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                connection.execute(f"CREATE SEQUENCE IF NOT EXISTS {sequence}")
            self._sequences.add(sequence)
        return int(connection.execute("SELECT nextval(%s::regclass)", (sequence,)).fetchone()[0])

    def one_statement_save(
        self,
        connection: Any,
        session_id: str,
        expected_revision: int,
        counter: str,
        write: Callable[[int], BackendWrite],
    ) -> int | Any | None:
        """A save on a head in one statement (:data:`_SAVE`): the number it took, ``None``
        if refused, ``NotImplemented`` when the number's place in its texts is not plain."""
        sequence = _sequence(counter)
        if sequence not in self._sequences:
            return NotImplemented  # created on the general path
        try:
            parameters = _save_parameters(session_id, expected_revision, sequence, write)
        except _NotPlain:
            return NotImplemented  # a text depends on the number otherwise: the general path
        found = connection.execute(_SAVE, parameters).fetchone()
        if found is None:
            return None
        number = int(found[0])
        write(number)  # the last call gets the number taken, as on the general path
        return number

    def _connect(self, _operation: str) -> Any:
        import psycopg

        connection = psycopg.connect(self._conninfo, autocommit=True)
        if not self._schema_ready:
            try:
                with connection.transaction():
                    _ensure_schema(connection)
            except BaseException:
                connection.close()
                raise
            self._schema_ready = True
        return connection


def _save_parameters(
    session_id: str, expected_revision: int, sequence: str, write: Callable[[int], BackendWrite]
) -> dict[str, Any]:
    """The parameters of :data:`_SAVE` for the write ``write(number)`` builds, found by
    building it with each of :data:`_MARKS` (``write`` is pure); :class:`_NotPlain` when a
    text holds the number other than plainly once (the meta must)."""
    built, other = (write(mark) for mark in _MARKS)  # pure: where does the number go?
    rows, other_rows = _keyed(built), _keyed(other)
    before, after = _spliced(built.head.meta, other.head.meta)
    if (
        after is None
        or rows.keys() != other_rows.keys()
        or (built.head.revision, built.head.document, built.lists, built.drop)
        != (other.head.revision, other.head.document, other.lists, other.drop)
    ):
        raise _NotPlain
    lists = built.lists.items()
    return {
        "revision": built.head.revision,
        "document": built.head.document,
        "before": before,
        "after": after,
        "start": len(before) + 1,
        "around": len(before) + len(after),
        "sequence": sequence,
        "session": session_id,
        "expected": expected_revision,
        **_arrays(("names", "ends"), [(name, start + len(rows)) for name, (start, rows) in lists]),
        **_arrays(
            ("lists", "positions", "bodies"),
            [
                (name, start + i, body)
                for name, (start, rows) in lists
                for i, body in enumerate(rows)
            ],
        ),
        **_arrays(
            ("drop_tables", "drop_keys"),
            [(t, k) for t, keys in built.drop.items() for k in keys if (t, k) not in rows],
        ),
        **_arrays(
            ("tables", "keys", "texts", "afters"),
            [(t, k, *_spliced(text, other_rows[t, k])) for (t, k), text in rows.items()],
        ),
    }


class _NotPlain(Exception):
    """A text of a save holds the number other than plainly once: the general path."""


def _keyed(write: BackendWrite) -> dict[tuple[str, str], str]:
    """The keyed rows ``write`` puts, by ``(table, key)``."""
    return {(table, key): text for table, rows in write.rows.items() for key, text in rows.items()}


def _arrays(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """``rows`` as one array parameter per column, by ``names``."""
    return {name: [row[index] for row in rows] for index, name in enumerate(names)}


def _spliced(first: str, second: str) -> tuple[str, str | None]:
    """A text built with each of :data:`_MARKS`: ``(text, None)`` if it does not depend on
    the number, ``(before, after)`` if it is ``before + number + after``; else
    :class:`_NotPlain`."""
    if first == second:
        return first, None
    mark, other = (str(mark) for mark in _MARKS)
    if first.count(mark) != 1 or first.replace(mark, other) != second:
        raise _NotPlain
    before, _mark, after = first.partition(mark)
    return before, after


def _ensure_schema(connection: Any) -> None:
    """Create or migrate the schema to ``len(MIGRATIONS)``, inside the caller's transaction
    (concurrent callers wait on an advisory lock); ``CheckpointError`` if it is newer."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    connection.execute(
        "CREATE TABLE IF NOT EXISTS agentloop_schema "
        "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    row = connection.execute("SELECT coalesce(max(version), 0) FROM agentloop_schema").fetchone()
    found = int(row[0])
    if found > len(MIGRATIONS):
        raise CheckpointError(
            f"cannot open session store PostgreSQL: expected schema version {len(MIGRATIONS)}, "
            f"found {found}; it was written by a newer agentloop, upgrade agentloop to read it"
        )
    for version in range(found + 1, len(MIGRATIONS) + 1):
        for statement in MIGRATIONS[version - 1]:
            connection.execute(statement)
        if found > 0 and version == 4:
            move_legacy_rows(connection, {}, _columns, _SQL, "PostgreSQL")
        if found > 0 and version == max(5, found + 1):
            # Once, at the first of migrations 5 and 6 applied: it re-derives both statuses.
            restatus_questions(connection, _SQL)
        connection.execute("INSERT INTO agentloop_schema (version) VALUES (%s)", (version,))


def _sequence(counter: str) -> str:
    """The counter's sequence: ``agentloop_NAME``, or for a name that is not lowercase
    letters, one named by its digest."""
    if _COUNTER.match(counter):
        return f"agentloop_{counter}"
    return "agentloop_n_" + hashlib.sha256(counter.encode()).hexdigest()[:24]


def _columns(connection: Any, table: str) -> set[str]:
    rows = connection.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    )
    return {str(row[0]) for row in rows}


def _failure(operation: str, error: BaseException) -> CheckpointError | None:
    import psycopg

    if not isinstance(error, psycopg.Error):
        return None
    if isinstance(error, psycopg.OperationalError) and "connect" in str(error).lower():
        return CheckpointError(
            f"cannot {operation}: connecting to PostgreSQL failed: "
            f"{type(error).__name__}: {error}; check the connection string"
        )
    return CheckpointError(
        f"cannot {operation} in PostgreSQL: {type(error).__name__}: {error}; check "
        "that the database is reachable and holds an agentloop session store"
    )


def _roll_back(connection: Any, pipe: Any) -> None:
    import psycopg

    try:
        with suppress(psycopg.Error):  # the error the block raised, or its consequence
            pipe.sync()  # run or, after an error, skip what is queued
        connection.execute("ROLLBACK")
        pipe.sync()
    except psycopg.Error:
        pass  # the connection is broken or still in a transaction: the pool drops it


def _idle(connection: Any) -> bool:
    import psycopg

    return bool(connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)


class PostgresSessionStore(SqlSessionStore):
    """A :class:`SessionStore` in a PostgreSQL database (``pip install agentloop[postgres]``).

    ``conninfo`` is a libpq connection string or URI. The store opens up to
    ``pool_size`` connections, on first use (or ``async with``/:meth:`open`),
    and creates or migrates its tables (``agentloop_*``, schema versions in
    ``agentloop_schema``). Many processes may share one database: each write
    is a compare-and-set of the session's head under the row's lock, and
    fencing tokens come from a database sequence (see
    :class:`BackendSessionStore`; leases expire by each process's clock).

    psycopg's async connections run on asyncio only, so the store drives the
    blocking psycopg API in worker threads (at most ``pool_size`` at once):
    it works under asyncio and trio alike. A call that is cancelled while
    its transaction runs waits for the transaction to finish. ``history_limit``:
    how many of each session's latest steps stay addressable at least (0: none).
    """

    _dialect: PostgresDialect

    def __init__(
        self, conninfo: str, *, pool_size: int = 4, history_limit: int = DEFAULT_HISTORY_LIMIT
    ) -> None:
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
        super().__init__(PostgresDialect(conninfo, pool_size), history_limit)

    def __repr__(self) -> str:
        pool = self._dialect.pool
        return f"PostgresSessionStore(pool_size={pool.size}, {'closed' if pool.closed else 'open'})"

    async def schema_version(self) -> int:
        """The schema version the database holds (after creating or migrating it)."""
        return int(
            await self._dialect.pool.run(
                "read the schema version",
                lambda c: c.execute("SELECT max(version) FROM agentloop_schema").fetchone()[0],
            )
        )
