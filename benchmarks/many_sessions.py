"""Many sessions on one event loop: wall time, and memory per idle session.

1. Wall time: 1,000 drivers of one ``Agent`` run a turn of 5 echo rounds
   each, concurrently in one anyio task group (the zero-latency model yields
   to the event loop once per call, as a network call would, so sessions
   really interleave). Baseline, same run: the same 1,000 sessions one after
   another. Best of a few repeats.
2. Memory: tracemalloc counts what 1,000 parked sessions hold. Each session
   runs one short turn (user, tool call, tool result, answer: 4 items) and is
   parked at ``AwaitingInput``; per session = (traced after - traced before) /
   1,000, after a warm-up session and ``gc.collect()`` on both sides.

``--json PATH`` also writes the checks for ``run_all.py``.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc

import anyio
from _fixtures import Echo, FastModel
from _report import Check, json_path, report

import agentloop as al
import agentloop.tools

SESSIONS = 1_000
ROUNDS = 5
REPEATS = 3
KIB_TARGET = 40.0


def build_agent(rounds: int) -> al.Agent:
    return (
        al.Agent.builder()
        .model(FastModel(rounds, yield_control=True))
        .add_tool_source(al.ToolRegistry().with_tool(Echo()))
        .build()
    )


async def one_session(agent: al.Agent, number: int, rounds: int) -> al.LoopDriver:
    """Start a session, run one turn of ``rounds`` echo rounds, park it at AwaitingInput."""
    driver = await agent.start(f"session-{number}")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "go")])
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished), finished
    assert len(driver.snapshot().transcript) == 2 * rounds + 2
    parked = await driver.next()
    assert isinstance(parked, al.AwaitingInput), parked
    return driver


async def concurrent(agent: al.Agent) -> float:
    """Seconds for ``SESSIONS`` sessions run concurrently in one task group."""
    drivers: list[al.LoopDriver] = []

    async def run(number: int) -> None:
        drivers.append(await one_session(agent, number, ROUNDS))

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(SESSIONS):
            group.start_soon(run, number)
    elapsed = time.perf_counter() - start
    assert len(drivers) == SESSIONS
    return elapsed


async def sequential(agent: al.Agent) -> float:
    """Seconds for the same sessions, one after another."""
    start = time.perf_counter()
    for number in range(SESSIONS):
        await one_session(agent, number, ROUNDS)
    return time.perf_counter() - start


async def memory_per_session() -> float:
    """Bytes held per parked session (tracemalloc), ``SESSIONS`` sessions."""
    agent = build_agent(1)
    await one_session(agent, -1, 1)  # warm-up: imports, validator cache, interned names
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    drivers: list[al.LoopDriver] = []

    async def run(number: int) -> None:
        drivers.append(await one_session(agent, number, 1))

    async with anyio.create_task_group() as group:
        for number in range(SESSIONS):
            group.start_soon(run, number)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(drivers) == SESSIONS
    return (after - before) / SESSIONS


async def main() -> None:
    print(f"python {sys.version.split()[0]}, anyio backend asyncio")
    agent = build_agent(ROUNDS)
    await one_session(agent, -1, ROUNDS)  # warm-up
    together = min([await concurrent(agent) for _ in range(REPEATS)])
    alone = min([await sequential(agent) for _ in range(REPEATS)])
    rounds = SESSIONS * ROUNDS
    print(f"{SESSIONS} sessions x {ROUNDS} rounds, best of {REPEATS}")
    for label, seconds in (("concurrent (one task group)", together), ("one after another", alone)):
        per_round = seconds / rounds * 1e6
        print(f"  {label + ':':29}{seconds * 1000:8.1f} ms  {per_round:6.1f} us/round")
    print(f"  concurrent / sequential:     {together / alone:8.2f}x")
    per_session = await memory_per_session()
    print(f"memory per idle session ({SESSIONS} parked, 4-item transcripts, tracemalloc)")
    print(f"  {per_session / 1024:.1f} KiB per session ({per_session:.0f} bytes)")
    report(
        "many sessions",
        [
            Check(
                "memory per idle session",
                per_session / 1024,
                KIB_TARGET,
                "KiB",
                f"{SESSIONS} parked sessions, tracemalloc",
            ),
        ],
        json_path(),
    )


if __name__ == "__main__":
    anyio.run(main)
