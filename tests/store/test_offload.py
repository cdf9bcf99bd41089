"""The stores' worker threads: results, errors, order, and cancellation waiting for the call.

A store's call that started runs to its end and the calling task waits for it, even
when cancelled (so a save that returned or raised is known to have committed or not);
a task already cancelled does not start it. On both anyio backends.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from agentloop import InvalidStateError
from agentloop.store import SqliteSessionStore
from agentloop.store._offload import WorkerThread
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio


async def test_a_call_returns_its_result_or_raises_its_error() -> None:
    worker = WorkerThread("test")
    assert await worker.run(lambda a, b: (a, b, threading.current_thread().name), 1, 2) == (
        1,
        2,
        "test",
    )
    error = ValueError("boom")

    def fail() -> None:
        raise error

    with pytest.raises(ValueError, match="boom") as raised:
        await worker.run(fail)
    assert raised.value is error
    worker.stop()


async def test_calls_run_one_at_a_time_in_the_order_made() -> None:
    worker = WorkerThread("test")
    log: list[str] = []

    def call(name: str) -> str:
        log.append(f"start {name}")
        time.sleep(0.01)
        log.append(f"end {name}")
        return name

    results: list[str] = []

    async def run(name: str) -> None:
        results.append(await worker.run(call, name))

    async with anyio.create_task_group() as group:
        for name in "abc":
            group.start_soon(run, name)
            await anyio.lowlevel.checkpoint()  # each hands its call over before the next
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert sorted(results) == ["a", "b", "c"]
    worker.stop()


async def test_a_cancelled_task_waits_for_its_call_to_finish() -> None:
    worker = WorkerThread("test")
    entered, release = threading.Event(), threading.Event()
    finished: list[str] = []
    seen: list[str] = []

    def slow() -> str:
        entered.set()
        release.wait(5)
        finished.append("slow")
        return "slow"

    async def caller(scope: anyio.CancelScope) -> None:
        with scope:
            seen.append(await worker.run(slow))
            seen.append(f"finished before return: {finished == ['slow']}")
            await anyio.sleep(1)  # the cancellation is delivered here
            seen.append("not cancelled")

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(caller, scope)
        await anyio.to_thread.run_sync(entered.wait, 5)
        scope.cancel()
        await anyio.sleep(0.05)
        assert seen == []  # still waiting for the call
        release.set()
    assert seen == ["slow", "finished before return: True"]
    worker.stop()


async def test_a_task_already_cancelled_does_not_start_its_call() -> None:
    worker = WorkerThread("test")
    started: list[str] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await worker.run(started.append, "x")
    assert started == []
    assert scope.cancelled_caught
    assert await worker.run(lambda: "still works") == "still works"
    worker.stop()


async def test_a_stopped_worker_ends_its_thread_and_starts_a_new_one_when_used() -> None:
    worker = WorkerThread("test-stop")
    first = await worker.run(threading.current_thread)
    worker.stop()
    first.join(5)
    assert not first.is_alive()
    second = await worker.run(threading.current_thread)
    assert second is not first
    assert second.is_alive()
    worker.stop()


async def test_a_sqlite_save_cancelled_before_it_starts_writes_nothing(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.save_checkpoint("s", sample_checkpoint("s", []))
        assert await store.load("s") is None
        assert await store.save_checkpoint("s", sample_checkpoint("s", [])) >= 1
    with pytest.raises(InvalidStateError, match="is closed"):
        await store.load("s")


async def test_an_idle_worker_ends_its_thread_and_the_next_call_starts_one() -> None:
    worker = WorkerThread("test-idle", idle=0.05)
    first = await worker.run(threading.current_thread)
    first.join(5)
    assert not first.is_alive()
    second = await worker.run(threading.current_thread)
    assert second is not first
    assert await worker.run(lambda: threading.current_thread() is second)  # still alive
    worker.stop()
    second.join(5)
    assert not second.is_alive()
