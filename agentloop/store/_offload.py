"""Running a store's blocking calls in a thread of its own, with one cross-thread wake each way.

``anyio.to_thread.run_sync`` costs a store's short calls (a save is ~200 µs,
most of it the fsync) a yield to the event loop, a capacity limiter, a
cancel scope and a thread picked from a pool. :class:`WorkerThread` is the
minimum with the same guarantees: the calling task waits, shielded from
cancellation, until the call finished in the thread (so a save that returned
or raised is known to have committed or not); a task already cancelled does
not start it. Calls run one at a time, in the order they were made.
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

__all__ = ["Pending", "WorkerThread"]

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
