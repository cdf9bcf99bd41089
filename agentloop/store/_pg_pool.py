"""The PostgreSQL store's connections: a small pool of blocking psycopg connections.

psycopg's async connections run on asyncio only, so the store runs each
operation in a worker thread of the pool's own (at most ``size`` at once, so
each has a connection of its own; see ``_offload``) with the blocking API.
The first connection creates or migrates the schema. psycopg errors become
``CheckpointError`` here, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from ..core._errors import CheckpointError, InvalidStateError
from . import _pg_sql as sql
from ._offload import Pending, WorkerThread

__all__ = ["ConnectionPool", "pipelined_transaction", "transaction"]

T = TypeVar("T")


@contextmanager
def pipelined_transaction(connection: Any) -> Iterator[None]:
    """One transaction in pipeline mode: two round trips where the block reads once.

    ``BEGIN`` is queued with the block's first statements and travels with
    them when the block first fetches a result; ``COMMIT`` travels with the
    statements queued after that, in one sync. (psycopg's ``transaction()``
    syncs on entry and on exit of its nested pipelines: four round trips.)
    If the block or the commit raises, the transaction is rolled back and
    the error re-raised; a connection left in a transaction is never reused
    (see ``ConnectionPool``). Without pipeline support in libpq (before 14),
    a plain :func:`transaction`.
    """
    import psycopg

    if not psycopg.Pipeline.is_supported():
        with transaction(connection):
            yield
        return
    with connection.pipeline() as pipe:
        connection.execute("BEGIN")
        try:
            yield
            connection.execute("COMMIT")
            pipe.sync()
        except BaseException:
            _roll_back(connection, pipe)
            raise


def _roll_back(connection: Any, pipe: Any) -> None:
    import psycopg

    try:
        with suppress(psycopg.Error):  # the error the block raised, or its consequence
            pipe.sync()  # run or, after an error, skip what is queued
        connection.execute("ROLLBACK")
        pipe.sync()
    except psycopg.Error:
        pass  # the connection is broken or still in a transaction: the pool drops it


@contextmanager
def transaction(connection: Any, *, read_only: bool = False) -> Iterator[None]:
    """One transaction on an autocommit connection: committed, or rolled back if it raises."""
    with connection.transaction():
        if read_only:
            connection.execute("SET TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ")
        yield


class ConnectionPool:
    """Up to ``size`` connections to ``conninfo``, opened on demand, reused, closed on ``close``."""

    def __init__(self, conninfo: str, size: int) -> None:
        self.size = size
        self._conninfo = conninfo
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(size)
        self._workers: list[WorkerThread] = []  # idle ones; at most ``size`` exist
        self._schema_ready = False
        self.closed = False

    async def run(self, operation: str, work: Callable[[Any], T]) -> T:
        """Run ``work(connection)`` in a worker thread; ``operation`` names it in errors."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            self._limiter.acquire_nowait()
        except anyio.WouldBlock:
            await self._limiter.acquire()
        try:
            with self._lock:
                worker = self._workers.pop() if self._workers else None
            if worker is None:
                worker = WorkerThread("agentloop PostgresSessionStore")
            try:
                pending: Pending[T] = worker.start(self._run, operation, work)
                return await pending.result()
            finally:
                with self._lock:
                    if self.closed:
                        worker.stop()
                    else:
                        self._workers.append(worker)
        finally:
            self._limiter.release()

    async def close(self) -> None:
        """Close every idle connection; later calls raise ``InvalidStateError``. Idempotent.

        The worker threads end once their calls ran.
        """
        worker = WorkerThread("agentloop PostgresSessionStore close")
        with anyio.CancelScope(shield=True):
            await worker.start(self._close).result()
        worker.stop()
        with self._lock:
            workers, self._workers = self._workers, []
        for idle in workers:
            idle.stop()

    def _close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _run(self, operation: str, work: Callable[[Any], T]) -> T:
        import psycopg

        connection = self._checkout(operation)
        broken = False
        try:
            return work(connection)
        except psycopg.Error as error:
            # After a database error the connection is not reused: a fresh one has no
            # half-known session state (an aborted transaction, prepared statements).
            broken = True
            raise CheckpointError(
                f"cannot {operation} in PostgreSQL: {type(error).__name__}: {error}; check "
                "that the database is reachable and holds an agentloop session store"
            ) from error
        finally:
            self._checkin(connection, broken)

    def _checkout(self, operation: str) -> Any:
        import psycopg

        with self._lock:
            if self.closed:
                raise InvalidStateError(
                    f"cannot {operation}: the PostgresSessionStore is closed; "
                    "open a new PostgresSessionStore"
                )
            if self._idle:
                return self._idle.pop()
        try:
            connection = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as error:
            raise CheckpointError(
                f"cannot {operation}: connecting to PostgreSQL failed: "
                f"{type(error).__name__}: {error}; check the connection string"
            ) from error
        if not self._schema_ready:
            try:
                with transaction(connection):
                    sql.ensure_schema(connection, "PostgreSQL")
            except BaseException:
                connection.close()
                raise
            self._schema_ready = True
        return connection

    def _checkin(self, connection: Any, broken: bool) -> None:
        import psycopg

        # A connection still in a transaction (a rollback that failed) is never reused.
        idle = connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with self._lock:
            if idle and not broken and not self.closed and len(self._idle) < self.size:
                self._idle.append(connection)
                return
        connection.close()
