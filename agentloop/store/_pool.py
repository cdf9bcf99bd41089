"""A SQL store's connections: a small pool of blocking connections, each call in a thread.

SQLite's driver blocks and psycopg's async connections run on asyncio only,
so a store runs each operation in a worker thread of the pool's own (at
most ``size`` at once, so each has a connection of its own; see
``_offload``) with the blocking API. The driver's errors become
``CheckpointError`` here, once; a connection that raised one is not reused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from ..core._errors import CheckpointError, InvalidStateError
from ._offload import Pending, WorkerThread

__all__ = ["ConnectionPool"]

T = TypeVar("T")


class ConnectionPool:
    """Up to ``size`` connections from ``connect``, opened on demand, reused, closed on ``close``.

    ``name`` names the store in errors and threads; ``failure`` turns a driver
    error into the ``CheckpointError`` to raise (``None``: not the driver's,
    let it through); ``idle`` tells whether a connection is out of any
    transaction (one that is not is never reused).
    """

    def __init__(
        self,
        connect: Callable[[str], Any],
        *,
        size: int,
        name: str,
        failure: Callable[[str, BaseException], CheckpointError | None],
        idle: Callable[[Any], bool],
    ) -> None:
        self.size = size
        self._connect = connect
        self._name = name
        self._failure = failure
        self._is_idle = idle
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(size)
        self._workers: list[WorkerThread] = []  # idle ones; at most ``size`` exist
        self.closed = False
        self.opened = False

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
                worker = WorkerThread(f"agentloop {self._name}")
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
        worker = WorkerThread(f"agentloop {self._name} close")
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
        connection = self._checkout(operation)
        broken = False
        try:
            return work(connection)
        except Exception as error:
            failure = self._failure(operation, error)
            if failure is None:
                raise
            # After a database error the connection is not reused: a fresh one has no
            # half-known session state (an aborted transaction, prepared statements).
            broken = True
            raise failure from error
        finally:
            self._checkin(connection, broken)

    def _checkout(self, operation: str) -> Any:
        with self._lock:
            if self.closed:
                raise InvalidStateError(
                    f"cannot {operation}: {self._name} is closed; open a new "
                    f"{self._name.split('(')[0].split()[-1]}"
                )
            if self._idle:
                return self._idle.pop()
        try:
            connection = self._connect(operation)
        except Exception as error:
            failure = self._failure(operation, error)
            if failure is None:
                raise
            raise failure from error
        self.opened = True
        return connection

    def _checkin(self, connection: Any, broken: bool) -> None:
        idle = not broken and self._is_idle(connection)
        with self._lock:
            if idle and not self.closed and len(self._idle) < self.size:
                self._idle.append(connection)
                return
        connection.close()
