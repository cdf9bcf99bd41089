"""A model of kills and resolutions of calls in doubt, on memory and SQLite stores.

Each "process" resumes the stored session with a new agent that asks the host
about calls in doubt (``ask_in_doubt()``), and dies (its task cancelled) when a
call it runs is drawn to hang. The host resolves each ``CallInDoubt`` with a
drawn choice, or is killed itself while the step waits. Property: a claimed call
runs once, plus once for each time the host chose ``run_again``; every call ends
with exactly the result the last resolution gave it.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.store import BackendSessionStore, MemorySessionStore, SqliteSessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

CALLS = ("a", "b", "c")


class World:
    """The side effects (runs per call) and the draws that kill processes."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.runs: Counter[str] = Counter()
        self.deaths = 0
        self.entered = anyio.Event()


class Pay:
    """A non-idempotent tool: each run is a side effect; a run drawn to hang kills."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.spec = al.ToolSpec(
            "pay", "Pay.", {"type": "object"}, annotations=al.ToolAnnotations(idempotent=False)
        )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        world = self.world
        world.runs[request.call_id] += 1
        if world.deaths < 3 and world.data.draw(st.booleans(), label=f"hang {request.call_id}"):
            world.deaths += 1
            world.entered.set()
            await anyio.sleep_forever()
        return f"paid {request.call_id}"


@asynccontextmanager
async def opened(kind: str) -> AsyncIterator[BackendSessionStore]:
    if kind == "memory":
        yield MemorySessionStore()
        return
    with tempfile.TemporaryDirectory(prefix="wt-indoubt-") as directory:
        async with SqliteSessionStore(Path(directory) / "sessions.db") as store:
            yield store


def agent(store: BackendSessionStore, world: World, first: bool) -> al.Agent:
    script: list[object] = ["done"]
    if first:
        script.insert(0, tool_calls(*(call("pay", {}, id=c) for c in CALLS)))
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(script))
        .add_tool_source(al.ToolRegistry().with_tool(Pay(world)))
        .store(store)
        .input([al.Item.text(al.ItemKind.USER, "pay all")])
        .ask_in_doubt()
        .build()
    )


async def host(
    driver: al.LoopDriver, world: World, expected: dict[str, str], agains: Counter[str]
) -> bool:
    """Step to the end; resolve each call in doubt as drawn. ``False``: the host was killed
    while a call waited for it (the session rests, saved)."""
    while True:
        step = await driver.next()
        if isinstance(step, al.Finished):
            return True
        if not isinstance(step, al.CallInDoubt):
            continue
        how = world.data.draw(
            st.sampled_from(["settle", "fail", "run_again", "kill"]), label=step.call_id
        )
        if how == "kill":
            return False
        if how == "settle":
            step.settle(f"settled {step.call_id}")
            expected[step.call_id] = f"settled {step.call_id}"
        elif how == "fail":
            step.fail("not paid")
            expected[step.call_id] = "failed: not paid"
        else:
            agains[step.call_id] += 1
            step.run_again()
            expected[step.call_id] = f"paid {step.call_id}"


async def process(
    store: BackendSessionStore,
    world: World,
    first: bool,
    expected: dict[str, str],
    agains: Counter[str],
) -> al.LoopDriver | None:
    """One process: start or resume the session and drive it; the driver once it
    finished, ``None`` when it died (a call hung, or the host left a call in doubt)."""
    built = agent(store, world, first)
    driver = await (built.start("s") if first else built.resume(session_id="s"))
    world.entered = anyio.Event()
    finished = False
    async with anyio.create_task_group() as group:

        async def drive() -> None:
            nonlocal finished
            finished = await host(driver, world, expected, agains)
            group.cancel_scope.cancel()

        group.start_soon(drive)
        await world.entered.wait()  # a call hangs: the process dies
        group.cancel_scope.cancel()
    return driver if finished else None


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_no_claimed_call_runs_twice_unless_the_host_chose_run_again(
    kind: str, data: st.DataObject
) -> None:
    async with opened(kind) as store:
        world = World(data)
        expected = {c: f"paid {c}" for c in CALLS}
        agains: Counter[str] = Counter()
        driver, first = None, True
        for _ in range(20):
            driver = await process(store, world, first, expected, agains)
            first = False
            if driver is not None:
                break
            world.data = data  # the next process draws on
        assert driver is not None
        for call_id in CALLS:
            assert world.runs[call_id] == 1 + agains[call_id], call_id
        results = {
            part.call_id: part.output
            for item in driver.snapshot().transcript
            for part in item.parts
            if isinstance(part, al.ToolResultPart)
        }
        assert results == expected
