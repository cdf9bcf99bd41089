"""The setup the docs show, against a hand-written floor measured in the same run.

``run.py`` measures the friendliest configuration (``SimpleTaskManager``, a
hand-written tool class, a model that never yields). A user who follows the
docs gets something else: an ``@tool`` function, ``AsyncTaskManager`` entered
around the driver (docs/tasks.md), a model that passes control to the event
loop once per request as a network read would, and ``agentloop.run()``.

Printed, each as a ratio against a floor measured in this process, agentloop
and floor interleaved, median of several repeats after a warm-up:

- W1: microseconds per tool round at R = 10, 100 and 400 rounds, against a
  hand-written loop *without* schema validation (the work a loop cannot skip:
  build a request, call the model, look the tool up, run it, append two
  items); and R400/R10 (flat in transcript length).
- W3: 1,000 concurrent sessions of 5 rounds each: wall time, and peak traced
  memory per session (``tracemalloc``; the sessions are alive together).

``--json PATH`` writes the checks for ``run_all.py``; ``--profile`` prints
the top functions by cumulative and own time for W1 at R = 100.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import statistics
import sys
import time
import tracemalloc
from typing import Any

import anyio
import anyio.lowlevel
from _fixtures import FastModel
from _report import Check, json_path, report

import agentloop as al

ROUND_COUNTS = (10, 100, 400)
REPEATS = 7
ROUNDS_PER_SIZE = 3000
RATIO_TARGET = 6.0
GROWTH_TARGET = 1.1
SESSIONS = 1000
SESSION_ROUNDS = 5
W3_SECONDS_TARGET = 0.5
W3_KIB_TARGET = 16.0


@al.tool
async def echo(value: str) -> str:
    """Return ``value``."""
    return value


def make_agent(rounds: int, manager: al.AsyncTaskManager) -> al.Agent:
    return (
        al.Agent.builder()
        .model(FastModel(rounds, yield_control=True))
        .add_tool_source(al.ToolRegistry().with_tool(echo))
        .task_manager(manager)
        .build()
    )


def limits(rounds: int) -> al.SessionConfig:
    return al.SessionConfig("bench", limits=al.LoopLimits(max_model_calls_per_turn=rounds + 1))


async def agentloop_rounds(rounds: int) -> float:
    """Seconds for one ``agentloop.run()`` turn of ``rounds`` tool rounds."""
    async with al.AsyncTaskManager() as manager:
        agent = make_agent(rounds, manager)
        start = time.perf_counter()
        result = await al.run(agent, "go", config=limits(rounds), max_steps=10 * rounds + 10)
        elapsed = time.perf_counter() - start
    assert result.stop_reason == "finished", result.stop_reason
    assert len(result.transcript) == 2 * rounds + 2, len(result.transcript)
    return elapsed


async def floor_rounds(rounds: int) -> float:
    """A hand-written loop doing the essential work, without schema validation."""
    transcript: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tools = {"echo": lambda arguments: arguments["value"]}
    specs = [{"name": "echo"}]
    calls = 0

    async def model(request: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        await anyio.lowlevel.checkpoint()  # one network read per request
        calls += 1
        if calls <= rounds:
            call = {"id": f"c{calls}", "name": "echo", "arguments": {"value": "x"}}
            return {"role": "assistant", "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}

    start = time.perf_counter()
    while True:
        reply = await model({"messages": transcript, "tools": specs})
        transcript.append(reply)
        tool_calls = reply.get("tool_calls")
        if not tool_calls:
            break
        for call in tool_calls:
            output = tools[call["name"]](call["arguments"])
            transcript.append({"role": "tool", "call_id": call["id"], "content": output})
    elapsed = time.perf_counter() - start
    assert len(transcript) == 2 * rounds + 2
    return elapsed


def repeats_for(rounds: int) -> int:
    return max(REPEATS, ROUNDS_PER_SIZE // rounds)


async def w1() -> tuple[dict[int, float], dict[int, float]]:
    """Median microseconds per round, agentloop and floor, for each size."""
    await agentloop_rounds(10)  # warm-up: imports, compiled validators
    await floor_rounds(10)
    ours: dict[int, float] = {}
    floor: dict[int, float] = {}
    for rounds in ROUND_COUNTS:
        a: list[float] = []
        f: list[float] = []
        for _ in range(repeats_for(rounds)):
            a.append(await agentloop_rounds(rounds))
            f.append(await floor_rounds(rounds))
        ours[rounds] = statistics.median(a) / rounds * 1e6
        floor[rounds] = statistics.median(f) / rounds * 1e6
    return ours, floor


async def w3() -> tuple[float, float]:
    """Wall seconds and peak traced KiB per session for many concurrent sessions."""
    async with al.AsyncTaskManager() as manager:
        agent = make_agent(SESSION_ROUNDS, manager)
        await al.run(agent, "warm", config=limits(SESSION_ROUNDS))
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(SESSIONS):
            group.start_soon(one_session, index)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, (peak - base) / SESSIONS / 1024


async def one_session(index: int) -> None:
    async with al.AsyncTaskManager() as manager:
        agent = make_agent(SESSION_ROUNDS, manager)
        config = al.SessionConfig(
            f"s{index}", limits=al.LoopLimits(max_model_calls_per_turn=SESSION_ROUNDS + 1)
        )
        result = await al.run(agent, "go", config=config)
    assert result.stop_reason == "finished", result.stop_reason


async def w3_untraced() -> float:
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(SESSIONS):
            group.start_soon(one_session, index)
    return time.perf_counter() - start


def profile() -> None:
    """Top functions for W1 at R = 100 (cumulative and own time)."""
    anyio.run(agentloop_rounds, 10)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(30):
        anyio.run(agentloop_rounds, 100)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def main() -> int:
    if "--profile" in sys.argv:
        profile()
        return 0
    ours, floor = anyio.run(w1)
    print("W1, documented setup (@tool, AsyncTaskManager, yielding model, run()):")
    checks: list[Check] = []
    for rounds in ROUND_COUNTS:
        ratio = ours[rounds] / floor[rounds]
        print(
            f"  R={rounds:>3}: agentloop {ours[rounds]:7.1f} us/round, "
            f"floor (no validation) {floor[rounds]:5.1f} us, ratio {ratio:5.1f}x"
        )
        checks.append(Check(f"documented setup, R={rounds}, vs floor", ratio, RATIO_TARGET, "x"))
    growth = ours[400] / ours[10]
    print(f"  R400/R10: {growth:.2f}")
    checks.append(Check("documented setup, R400/R10", growth, GROWTH_TARGET, "x"))
    seconds = min(anyio.run(w3_untraced) for _ in range(3))
    _, kib = anyio.run(w3)
    print(
        f"W3: {SESSIONS} sessions x {SESSION_ROUNDS} rounds: {seconds:.2f} s (best of 3), "
        f"{kib:.1f} KiB peak traced memory per session"
    )
    checks.append(Check(f"W3 {SESSIONS} sessions wall", seconds, W3_SECONDS_TARGET, "s"))
    checks.append(Check("W3 peak memory per session", kib, W3_KIB_TARGET, "KiB"))
    report("documented", checks, json_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
