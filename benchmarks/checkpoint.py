"""Checkpoint, restore and SQLite saves of a session with a 1,000-item transcript.

Run with ``python benchmarks/checkpoint.py``. Prints the document size, the
median time of ``driver.checkpoint()`` and of ``agent.resume(document)``
(against ``json.dumps`` of the same document, measured in the same run), and
the median time of ``SqliteSessionStore.save_checkpoint`` for the first save
of a session vs. the save after one more step (which writes only the new
items: its ratio to the first save should be small), with the share of
that save spent checking and encoding the whole document.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
from agentloop.store import SqliteSessionStore
from agentloop.store._documents import encode_checkpoint  # to attribute the save's cost

ITEMS = 1_000
REPEATS = 30
SESSIONS = 8


def history(count: int) -> list[al.Item]:
    """A valid transcript: user asks, the model calls a tool, the tool answers, the model says."""
    items: list[al.Item] = []
    while len(items) < count:
        call_id = f"call-{len(items)}"
        items += [
            al.Item.text(al.ItemKind.USER, f"step {len(items)}: look up the order status"),
            al.Item(
                al.ItemKind.ASSISTANT,
                [al.ToolCallPart(call_id, "lookup", {"order": len(items), "fields": ["status"]})],
                finish_reason=al.FinishReason.TOOL_CALL,
            ),
            al.Item(al.ItemKind.TOOL, [al.ToolResultPart(call_id, "shipped " * 8)]),
            al.Item.text(al.ItemKind.ASSISTANT, "The order has shipped."),
        ]
    return items[:count]


def make_agent() -> al.Agent:
    model = al.ScriptedModel(lambda request: "noted")
    return al.Agent.builder().model(model).transcript(history(ITEMS)).build()


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


async def timed_save(store: SqliteSessionStore, session_id: str, document: Any) -> float:
    start = time.perf_counter()
    await store.save_checkpoint(session_id, document)
    return time.perf_counter() - start


async def measure_documents(agent: al.Agent) -> tuple[int, float, float, float]:
    """Size, and median ms of json.dumps, checkpoint() and resume(document)."""
    driver = await agent.start("bench")
    document = driver.checkpoint()
    size = len(json.dumps(document))
    dumps, capture, restore = [], [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        json.dumps(document)
        dumps.append(time.perf_counter() - start)
        start = time.perf_counter()
        driver.checkpoint()
        capture.append(time.perf_counter() - start)
        restore.append(await timed(lambda: agent.resume(document)))
    return size, median_ms(dumps), median_ms(capture), median_ms(restore)


async def measure_saves(agent: al.Agent, path: Path) -> tuple[float, float, float]:
    """Median ms of a session's first save, of the save after one more step, and of
    checking and encoding that document (work every save does, whatever it writes)."""
    first, appended, encode = [], [], []
    async with SqliteSessionStore(path) as store:
        for number in range(SESSIONS):
            driver = await agent.start(f"bench-{number}")
            document = driver.checkpoint()
            first.append(await timed_save(store, driver.session_id, document))
            driver.submit_input([al.Item.text(al.ItemKind.USER, "one more thing")])
            await driver.next()  # two new items: the question and the answer
            document = driver.checkpoint()
            appended.append(await timed_save(store, driver.session_id, document))
            start = time.perf_counter()
            encode_checkpoint(driver.session_id, document)
            encode.append(time.perf_counter() - start)
    return median_ms(first), median_ms(appended), median_ms(encode)


async def run() -> None:
    agent = make_agent()
    size, dumps, capture, restore = await measure_documents(agent)
    with tempfile.TemporaryDirectory() as directory:
        first, appended, encode = await measure_saves(agent, Path(directory) / "sessions.db")
    print(f"session with a {ITEMS:,}-item transcript (medians of {REPEATS} runs)")
    print(f"  document size (json.dumps):   {size:>10,} bytes")
    print(f"  json.dumps (baseline):        {dumps:10.2f} ms")
    print(f"  driver.checkpoint():          {capture:10.2f} ms  {capture / dumps:6.1f}x json.dumps")
    print(f"  agent.resume(document):       {restore:10.2f} ms  {restore / dumps:6.1f}x json.dumps")
    print(f"SqliteSessionStore.save_checkpoint (medians of {SESSIONS} sessions)")
    print(f"  first save ({ITEMS:,} items):     {first:10.2f} ms")
    print(f"  after one more step (+2):     {appended:10.2f} ms  {appended / first:6.2f}x first")
    print(f"  of which check + encode:      {encode:10.2f} ms  {encode / appended:6.2f}x the save")


def main() -> None:
    anyio.run(run)


if __name__ == "__main__":
    main()
