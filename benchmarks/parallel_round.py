"""One tool round of 16 calls that each sleep 50 ms: AsyncTaskManager vs SimpleTaskManager.

Run with ``python benchmarks/parallel_round.py``. Prints the wall time of the
round (from ``next()`` to the ``AfterToolResult`` pause) for each manager,
best of a few repeats, and the speedup as a ratio against the sequential
baseline measured in the same run, under asyncio and trio. Targets: the
concurrent round within 10 ms of one 50 ms sleep (issue 7), and within 2 ms
on asyncio (issue 22's W2: the round in at most 52 ms). ``--json PATH`` also
writes the checks for ``run_all.py``.
"""

from __future__ import annotations

import time

import anyio
from _report import Check, json_path, report

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

CALLS = 16
SLEEP = 0.050
REPEATS = 5
OVERHEAD_TARGET_MS = 10.0
W2_TARGET_MS = 2.0


class Sleep:
    spec = al.ToolSpec("sleep", "Sleep 50 ms.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await anyio.sleep(SLEEP)
        return "slept"


async def one_round(manager: al.tasks.TaskManager) -> float:
    model = al.testing.ScriptedModel([tool_calls(*(call("sleep") for _ in range(CALLS)))])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Sleep()))
        .task_manager(manager)
        .build()
    )
    driver = await agent.start("bench")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "go")])
    began = time.perf_counter()
    step = await driver.next()
    elapsed = time.perf_counter() - began
    assert isinstance(step, al.AfterToolResult), step
    return elapsed


async def main() -> float:
    """Print the figures; return the concurrent round's overhead over one sleep, in ms."""
    simple = min([await one_round(al.tasks.SimpleTaskManager()) for _ in range(REPEATS)])
    concurrent: list[float] = []
    for _ in range(REPEATS):
        async with al.tasks.AsyncTaskManager() as manager:
            concurrent.append(await one_round(manager))
    parallel = min(concurrent)
    print(f"one round of {CALLS} tools sleeping {SLEEP * 1000:.0f} ms (best of {REPEATS})")
    print(f"  SimpleTaskManager: {simple * 1000:8.1f} ms")
    print(f"  AsyncTaskManager:  {parallel * 1000:8.1f} ms")
    print(f"  speedup:           {simple / parallel:8.1f}x")
    print(f"  overhead over one sleep: {(parallel - SLEEP) * 1000:.1f} ms")
    return (parallel - SLEEP) * 1000


if __name__ == "__main__":
    checks = []
    for backend in ("asyncio", "trio"):
        print(f"[{backend}]")
        overhead = anyio.run(main, backend=backend)
        checks.append(
            Check(
                f"16x50 ms round over 50 ms, AsyncTaskManager, {backend}",
                overhead,
                OVERHEAD_TARGET_MS,
                "ms",
            )
        )
        if backend == "asyncio":
            checks.append(
                Check("W2: 16x50 ms round over 50 ms, asyncio", overhead, W2_TARGET_MS, "ms")
            )
    report("parallel round", checks, json_path())
