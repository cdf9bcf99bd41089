"""Checkpoint, restore and SQLite saves of a session with a 1,000-item transcript.

Run with ``python benchmarks/checkpoint.py``. Prints the document size, the
median time of ``driver.checkpoint()`` and of ``agent.resume(document)``
(against ``json.dumps`` of the same document, measured in the same run), and
the median time of a step of a driver bound to a ``SqliteSessionStore``: the
first (its save writes the whole transcript) vs. the next (its save encodes
and writes only the new items), against the same step without a store.

Then one long turn (400 tool rounds of the echo tool, a store-bound driver
stepped with ``next()``): a step's time and the head's size early (rounds
6-15) and late (rounds 391-400), with the bytes of the head row the store
wrote (the turn's lists are rows of their own since issue 22's fix, so this
stays flat while the document's head grows). Issue 22 asks a save per step to be O(new
items): the check is late / early <= 1.5. ``--json PATH`` writes it for
``run_all.py``.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
from _fixtures import Echo, FastModel
from _report import Check, json_path, report

import agentloop as al
import agentloop.testing
import agentloop.tools
from agentloop.store import SqliteSessionStore

ITEMS = 1_000
REPEATS = 30
SESSIONS = 8
LONG_TURN = 400
GROWTH_TARGET = 1.5


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
    model = al.testing.ScriptedModel(lambda request: "noted")
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


async def timed_step(driver: al.LoopDriver) -> float:
    driver.submit_input([al.Item.text(al.ItemKind.USER, "one more thing")])
    start = time.perf_counter()
    await driver.next()  # two new items: the question and the answer
    return time.perf_counter() - start


async def measure_saves(agent: al.Agent, path: Path) -> tuple[float, float, float]:
    """Median ms of one step of a store-bound driver on the long session: the first
    (its save writes the whole transcript), the next (its save encodes and writes
    only the two new items), and the same step without a store."""
    first, later, bare = [], [], []
    async with SqliteSessionStore(path) as store:
        stored = attrs.evolve(agent, store=store)
        for number in range(SESSIONS):
            driver = await stored.start(f"bench-{number}")
            first.append(await timed_step(driver))
            later.append(await timed_step(driver))
            plain = await agent.start(f"plain-{number}")
            await timed_step(plain)
            bare.append(await timed_step(plain))
    return median_ms(first), median_ms(later), median_ms(bare)


async def measure_long_turn(path: Path) -> tuple[float, float, list[tuple[int, int]]]:
    """Median ms of a store-bound step early and late in one long turn, and at those
    points the document's head size (bytes of JSON) and the stored head row's."""
    async with SqliteSessionStore(path) as store:
        agent = (
            al.Agent.builder()
            .model(FastModel(10**6))
            .add_tool_source(al.ToolRegistry().with_tool(Echo()))
            .store(store)
            .build()
        )
        limits = al.LoopLimits(max_model_calls_per_turn=LONG_TURN + 2)
        driver = await agent.start(al.SessionConfig("long-turn", limits=limits))
        driver.submit_input([al.Item.text(al.ItemKind.USER, "echo x, again and again")])
        times = []
        heads = []
        for number in range(1, LONG_TURN + 1):
            start = time.perf_counter()
            step = await driver.next()
            times.append(time.perf_counter() - start)
            assert isinstance(step, al.AfterToolResult), step
            if number in (10, LONG_TURN):  # the head a save wrote, measured untimed
                document = driver.checkpoint()
                head = len(json.dumps({**document, "transcript": []}))
                heads.append((head, stored_head(path, "long-turn")))
    early, late = times[5:15], times[-10:]
    return median_ms(early), median_ms(late), heads


def stored_head(path: Path, session_id: str) -> int:
    """Bytes of the session's head row in the SQLite file (read untimed, on the side)."""
    connection = sqlite3.connect(path)
    try:
        row = connection.execute(
            "SELECT length(CAST(head AS BLOB)) FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
    finally:
        connection.close()
    return int(row[0])


async def run() -> None:
    agent = make_agent()
    size, dumps, capture, restore = await measure_documents(agent)
    with tempfile.TemporaryDirectory() as directory:
        first, later, bare = await measure_saves(agent, Path(directory) / "sessions.db")
    print(f"session with a {ITEMS:,}-item transcript (medians of {REPEATS} runs)")
    print(f"  document size (json.dumps):   {size:>10,} bytes")
    print(f"  json.dumps (baseline):        {dumps:10.2f} ms")
    print(f"  driver.checkpoint():          {capture:10.2f} ms  {capture / dumps:6.1f}x json.dumps")
    print(f"  agent.resume(document):       {restore:10.2f} ms  {restore / dumps:6.1f}x json.dumps")
    print(f"a step with a SqliteSessionStore (medians of {SESSIONS} sessions)")
    print(f"  first step (saves {ITEMS:,} items): {first:10.2f} ms")
    print(f"  next step (saves +2 items):   {later:10.2f} ms  {later / first:6.2f}x first")
    print(f"  same step without a store:    {bare:10.2f} ms")
    print(f"  cost of the save per step:    {later - bare:10.2f} ms")
    with tempfile.TemporaryDirectory() as directory:
        early, late, heads = await measure_long_turn(Path(directory) / "long.db")
    print(f"one turn of {LONG_TURN} tool rounds, a store-bound step (median of 10)")
    for label, ms, (head, row) in (
        ("rounds 6-15:                 ", early, heads[0]),
        (f"rounds {LONG_TURN - 9}-{LONG_TURN}:             ", late, heads[1]),
    ):
        print(f"  {label} {ms:10.2f} ms  head {head:>9,} bytes, head row {row:>7,} bytes")
    report(
        "checkpoint",
        [
            Check(
                f"store-bound step, round ~{LONG_TURN} / round ~10 of one turn",
                late / early,
                GROWTH_TARGET,
                "x",
            )
        ],
        json_path(),
    )


def main() -> None:
    anyio.run(run)


if __name__ == "__main__":
    main()
