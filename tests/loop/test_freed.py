"""A finished session is freed as soon as the host drops it, without the garbage
collector: the driver's parts hold no reference cycle (a server running many
sessions would otherwise keep each one until a full collection, and pay for
that collection). A session paused at an approval is the exception: the pending
``ApprovalRequest`` (kept in the round, so a restart can show it again) holds its
driver, so that ``step.approve()`` works whoever else still holds the driver."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import anyio
import pytest

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


@al.tool
async def echo(value: str) -> str:
    """Return ``value``."""
    await anyio.lowlevel.checkpoint()
    return value


class Observer:
    def __init__(self) -> None:
        self.events = 0

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events += 1


class _Tracked:
    """Whether an item still exists, without holding it (items take no weak
    references: they are values, and a slot for one costs every item 8 bytes)."""

    def __init__(self, item: al.Item) -> None:
        self.address = id(item)
        self.created_at = item.created_at

    def alive(self) -> bool:
        return any(
            id(thing) == self.address
            and isinstance(thing, al.Item)
            and thing.created_at == self.created_at
            for thing in gc.get_objects()
        )


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def reply(request: al.model.TurnRequest) -> object:
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(call("echo", {"value": "a"}), call("echo", {"value": "b"}))
    return "done"


def builder(manager: al.tasks.TaskManager | None) -> al.AgentBuilder:
    built = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(al.ToolRegistry().with_tool(echo))
    )
    return built.task_manager(manager) if manager is not None else built


@pytest.mark.parametrize("setup", ["simple", "async", "observed", "cancellable"])
async def test_a_finished_run_is_freed_when_the_host_drops_it(
    setup: str, no_collector: None
) -> None:
    async with al.tasks.AsyncTaskManager() as manager:
        agent_builder = builder(manager if setup != "simple" else None)
        if setup == "observed":
            agent_builder = agent_builder.observer(Observer())
        if setup == "cancellable":
            agent_builder = agent_builder.cancellation(al.CancellationController().handle())
        agent = agent_builder.build()
        result = await al.run(agent, "go", config="freed")
        assert result.stop_reason == "finished"
        assert result.final_text == "done"
        assert result.driver is not None
        driver = weakref.ref(result.driver)
        transcript_item = _Tracked(result.transcript[-1])
        del result
        assert driver() is None
        del agent, agent_builder  # the scripted model keeps every request it answered
        assert not transcript_item.alive()


async def test_a_driver_stepped_by_hand_is_freed_at_every_kind_of_step(no_collector: None) -> None:
    agent = builder(None).build()
    driver = await agent.start("freed")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "go")])
    step = await driver.next()
    assert isinstance(step, al.AfterToolResult)
    pause = weakref.ref(driver)
    del driver, step
    assert pause() is None

    driver = await agent.start("freed-2")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "go")])
    while not isinstance(step := await driver.next(), al.Finished):
        pass
    assert isinstance(await driver.next(), al.AwaitingInput)
    idle = weakref.ref(driver)
    del driver, step
    assert idle() is None


async def test_a_manager_nobody_holds_is_freed_and_its_handle_stays_one_object(
    no_collector: None,
) -> None:
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        assert manager.handle() is handle  # the same object while the host keeps it
        result = await al.run(builder(manager).build(), "go", config="freed")
        assert result.stop_reason == "finished"
        events = [await handle.next_event() for _ in range(4)]
        assert [type(event).__name__ for event in events] == [
            "TaskStarted",
            "TaskStarted",
            "TaskSucceeded",
            "TaskSucceeded",
        ]
    gone = weakref.ref(manager)
    del manager, result, handle
    assert gone() is None
