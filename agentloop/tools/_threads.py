"""Synchronous tool code in worker threads, and what became of it after a cancel.

A thread cannot be stopped. When the call running it is cancelled or times
out, the executor waits a bounded, shielded moment for the thread
(``thread_grace``) and then records what really happened: the function's
own result if it finished, else an ``in_doubt`` result saying its work may
still complete.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs
import sniffio

__all__ = [
    "ThreadCall",
    "really_cancelled",
    "run_in_thread",
    "stop_collecting",
    "thread_calls",
    "wait_for_threads",
]

_POLL_SECONDS = 0.005


def _same(value: Any) -> Any:
    return value


@attrs.define(eq=False)
class ThreadCall:
    """One function running in a worker thread: done once it returned or raised."""

    finish: Callable[[Any], Any] = _same
    done: threading.Event = attrs.field(factory=threading.Event)
    value: Any = None
    error: BaseException | None = None

    def outcome(self) -> Any:
        """The function's value (through ``finish``), or its exception raised again."""
        if self.error is not None:
            raise self.error
        return self.finish(self.value)


_CALLS: ContextVar[list[ThreadCall] | None] = ContextVar("agentloop_thread_calls", default=None)


def thread_calls() -> tuple[list[ThreadCall], Any]:
    """Start collecting the thread calls the current task makes: ``(calls, token)``;
    give the token to ``_CALLS.reset`` through :func:`stop_collecting`."""
    calls: list[ThreadCall] = []
    return calls, _CALLS.set(calls)


def stop_collecting(token: Any) -> None:
    """Stop the collection :func:`thread_calls` started."""
    _CALLS.reset(token)


async def run_in_thread(function: Callable[[], Any], finish: Callable[[Any], Any] = _same) -> Any:
    """Run ``function`` in a worker thread; its value through ``finish``, or its exception.

    A cancellation does not wait for the thread (it cannot be stopped); the
    executor running the call learns about the thread and settles it.
    """
    call = ThreadCall(finish)
    collecting = _CALLS.get()
    if collecting is not None:
        collecting.append(call)

    def work() -> None:
        try:
            call.value = function()
        except BaseException as error:  # handed to the event loop's side as it is
            call.error = error
        finally:
            call.done.set()

    await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    return call.outcome()


async def wait_for_threads(calls: list[ThreadCall], grace: float) -> None:
    """Wait, shielded, up to ``grace`` seconds for every call to finish."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
        # A threading.Event set by a thread that may outlive the call: poll it.
        while not all(call.done.is_set() for call in calls):  # noqa: ASYNC110
            await anyio.sleep(_POLL_SECONDS)


async def really_cancelled() -> bool:
    """Whether a cancellation just caught was the host's (or a deadline's) and not a stray
    ``CancelledError`` raised by tool code: some enclosing scope is cancelled, or on
    asyncio the task has a pending ``cancel()``."""
    cancelled = anyio.get_cancelled_exc_class()
    try:
        await anyio.lowlevel.checkpoint_if_cancelled()
    except cancelled:
        return True
    if sniffio.current_async_library() == "asyncio":
        asyncio = sys.modules["asyncio"]
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    return False
