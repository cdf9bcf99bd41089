"""A SQL store's connections, each used in a worker thread of its own.

SQLite's driver blocks and psycopg's async connections run on asyncio only,
so a store runs each operation with the blocking API in a :class:`WorkerThread`
of its :class:`ConnectionPool`: the minimum with the guarantees of
``anyio.to_thread.run_sync`` (which costs a short call, a save is ~200 µs, a
yield to the event loop, a limiter, a cancel scope and a pool's thread). The
calling task waits, shielded from cancellation, until the call finished in
the thread, so a save that returned or raised is known to have committed or
not; a task already cancelled does not start it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel
import sniffio

from ..core._errors import CheckpointError, InvalidStateError

__all__ = ["ConnectionPool", "Pending", "WorkerThread"]

T = TypeVar("T")


class Pending(Generic[T]):
    """A call handed to a :class:`WorkerThread`; await :meth:`result` before leaving.

    The thread wakes the waiting task through the event loop's own
    thread-safe call (asyncio's ``call_soon_threadsafe``, trio's token), with
    the loop's own future or event: one wake, nothing else scheduled.
    """

    def __init__(self, function: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._function = function
        self._args = args
        self._outcome: tuple[bool, Any] | None = None
        if sniffio.current_async_library() == "trio":
            import trio

            event = trio.Event()
            self._wait: Callable[[], Awaitable[object]] = event.wait
            self._wake: Callable[[], object] = partial(
                trio.lowlevel.current_trio_token().run_sync_soon, event.set
            )
        else:
            import asyncio

            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            self._wait = lambda: future
            self._wake = partial(loop.call_soon_threadsafe, _resolve, future)

    def __call__(self) -> None:
        """Run the call (in the worker thread) and wake the waiting task."""
        try:
            self._outcome = (True, self._function(*self._args))
        except BaseException as error:  # handed to the caller, raised there
            self._outcome = (False, error)
        with suppress(RuntimeError):  # the event loop closed: nobody waits any more
            self._wake()

    async def result(self) -> T:
        """Wait, shielded from cancellation, until the call finished; its result or error."""
        with anyio.CancelScope(shield=True):
            await self._wait()
        assert self._outcome is not None
        succeeded, value = self._outcome
        if succeeded:
            return value  # type: ignore[no-any-return]
        raise value


def _resolve(future: Any) -> None:
    if not future.done():  # a native ``task.cancel()`` cancelled it: nobody waits
        future.set_result(None)


class WorkerThread:
    """One daemon thread that runs the calls handed to it, in order.

    Started on first use; it ends after ``idle`` seconds without a call (the
    next call starts another), or once :meth:`stop` was called and the calls
    handed over before it ran.
    """

    def __init__(self, name: str, idle: float = 10.0) -> None:
        self._name = name
        self._idle = idle
        self._queue: queue.SimpleQueue[Pending[Any] | None] | None = None  # the running thread's
        self._lock = threading.Lock()
        """Held to hand a call over and to end the thread: no call lands in a dead queue."""

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the thread; its result, or what it raised.

        A task already cancelled does not start it; once started, the task
        waits for it (shielded), so what it did is known when this returns.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        return await self.start(function, *args).result()

    def start(self, function: Callable[..., T], *args: Any) -> Pending[T]:
        """Hand ``function(*args)`` to the thread now; the caller must await its ``result()``."""
        pending = Pending(function, args)
        with self._lock:
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                threading.Thread(
                    target=self._serve, args=(self._queue,), name=self._name, daemon=True
                ).start()
            self._queue.put(pending)
        return pending

    def stop(self) -> None:
        """Let the thread end once the calls handed over so far ran (non-blocking)."""
        with self._lock:
            if self._queue is not None:
                self._queue.put(None)
                self._queue = None

    def _serve(self, jobs: queue.SimpleQueue[Pending[Any] | None]) -> None:
        while True:
            try:
                job = jobs.get(timeout=self._idle)
            except queue.Empty:
                with self._lock:
                    if not jobs.empty():
                        continue  # handed over just now
                    if self._queue is jobs:
                        self._queue = None
                    return
            if job is None:
                return
            job()


class _Worker(WorkerThread):
    """A pool's worker thread, with the connection only it uses (``None`` until opened)."""

    connection: Any = None

    def close(self) -> None:
        """Close the connection, if open (in the thread)."""
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()

    async def retire(self) -> None:
        """Close the connection in the thread (shielded), then let the thread end."""
        await self.start(self.close).result()
        self.stop()


class ConnectionPool:
    """Up to ``size`` connections from ``connect``, opened on demand, reused, closed on
    ``close``; each is used in a :class:`WorkerThread` of its own.

    ``name`` names the store in errors and threads; ``failure`` turns a driver
    error into the ``CheckpointError`` to raise (``None``: not the driver's,
    let it through); ``idle`` tells whether a connection is out of any
    transaction (one that is not is never reused). The idle workers and
    ``closed`` are only touched in the event loop's thread: no lock.
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
        self._limiter = anyio.CapacityLimiter(size)
        self._idle: list[_Worker] = []  # at most ``size`` workers exist
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
            if self.closed:
                store = self._name.split("(")[0].split()[-1]
                raise InvalidStateError(
                    f"cannot {operation}: {self._name} is closed; open a new {store}"
                )
            worker = self._idle.pop() if self._idle else _Worker(f"agentloop {self._name}")
            try:
                pending: Pending[T] = worker.start(self._run, worker, operation, work)
                return await pending.result()
            finally:
                if self.closed:
                    await worker.retire()
                else:
                    self._idle.append(worker)
        finally:
            self._limiter.release()

    async def close(self) -> None:
        """Close every idle connection (the others once their calls ran); later calls raise
        ``InvalidStateError``. Idempotent."""
        self.closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            await worker.retire()

    def _run(self, worker: _Worker, operation: str, work: Callable[[Any], T]) -> T:
        try:
            if worker.connection is None:
                worker.connection = self._connect(operation)
                self.opened = True
            return work(worker.connection)
        except Exception as error:
            failure = self._failure(operation, error)
            if failure is None:
                raise
            # After a database error the connection is not reused: a fresh one has no
            # half-known session state (an aborted transaction, prepared statements).
            worker.close()
            raise failure from error
        finally:
            if worker.connection is not None and not self._is_idle(worker.connection):
                worker.close()
