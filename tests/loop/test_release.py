"""``LoopDriver.release()``: a host drops a driver whose session is saved; the driver's
running calls are cancelled and nothing is recorded, and the driver refuses any further
use; a driver resumed from the store goes on (the question asked again)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from loop_support import BlockingTool, user

import agentloop as al
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

SEAT = {"type": "object", "properties": {"seat": {"type": "string"}}, "required": ["seat"]}


class Book:
    """Asks for a seat (with resume data); records how each of its runs ended."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if ctx.resumed is not None:
            self.ended.append("resumed")
            return f"booked {ctx.resumed.answer.content['seat']}"
        try:
            answer = await ctx.ask(al.tools.Question("seat", "Which seat?", SEAT, resume={"n": 1}))
        except anyio.get_cancelled_exc_class():
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return f"booked {answer.content['seat']} at once"


class AskForDeploy:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if "deploy" in request.summary:
            return al.permissions.AskApproval("deploys need a person", request.summary)
        return al.permissions.Allow()


class Deploy:
    spec = al.ToolSpec("deploy", "Deploy.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "deployed"


@asynccontextmanager
async def agent_with(
    *tools: Any, first: Any, store: MemorySessionStore | None = None
) -> AsyncIterator[tuple[al.Agent, al.tasks.AsyncTaskManagerHandle]]:
    async with al.tasks.AsyncTaskManager() as manager:
        registry = al.ToolRegistry()
        for tool in tools:
            registry = registry.with_tool(tool)
        builder = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([first, "done"]))
            .add_tool_source(registry)
            .permissions(AskForDeploy())
            .task_manager(manager)
        )
        if store is not None:
            builder = builder.store(store)
        yield builder.build(), manager.handle()


@pytest.mark.parametrize("stored", [True, False])
async def test_release_cancels_the_asking_call_and_records_nothing(stored: bool) -> None:
    book, store = Book(), MemorySessionStore()
    first = tool_calls(call("book", {}, id="a"))
    async with agent_with(book, first=first, store=store if stored else None) as (agent, tasks):
        driver = await agent.start("s")
        driver.submit_input([user("book me a seat")])
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert driver.state is al.DriverState.AWAITING_ANSWER
        before = await store.load("s")
        assert driver.released is False
        await driver.release()
        assert driver.released is True
        assert book.ended == ["cancelled"]
        assert await tasks.list_running() == []
        assert await store.load("s") == before  # nothing saved, nothing written
        assert driver.state is al.DriverState.AWAITING_ANSWER  # as the store has it
        await driver.release()  # a second release does nothing
        if not stored:
            return
        assert before is not None
        assert before.status is SessionStatus.AWAITING_ANSWER
        resumed = await agent.resume(session_id="s")
        again = await resumed.next()
        assert isinstance(again, al.CallQuestion)
        assert again.id == step.id
        resumed.answer_question_for(step.id, al.QuestionAnswer.accept({"seat": "7D"}))
        assert isinstance(await resumed.run_until_blocked(), al.Finished)
        assert book.ended == ["cancelled", "resumed"]  # run again from the answer
        results = [p.output for item in resumed.snapshot().transcript for p in item.tool_results()]
        assert results == ["booked 7D"]


def _operations(driver: al.LoopDriver) -> list[tuple[str, Callable[[], Any]]]:
    items = [user("hi")]
    approve = al.ApprovalAnswer.approve()
    answer = al.QuestionAnswer.decline()
    return [
        ("next()", driver.next),
        ("next()", driver.run_until_blocked),
        ("retry()", driver.retry),
        ("continue_turn()", driver.continue_turn),
        ("save()", driver.save),
        ("checkpoint()", driver.checkpoint),
        ("submit_input()", lambda: driver.submit_input(items)),
        ("set_next_turn_cache()", lambda: driver.set_next_turn_cache(None)),
        ("steer()", lambda: driver.steer(items)),
        ("follow_up()", lambda: driver.follow_up(items)),
        ("clear_queues()", driver.clear_queues),
        ("answer_approval()", lambda: driver.answer_approval(approve)),
        ("answer_approval_for()", lambda: driver.answer_approval_for("a", approve)),
        ("answer_question_for()", lambda: driver.answer_question_for("q", answer)),
    ]


async def _used(use: Callable[[], Any]) -> None:
    result = use()
    if isinstance(result, Awaitable):
        await result


async def test_a_released_driver_refuses_every_use_and_changes_nothing() -> None:
    async with agent_with(first="hello") as (agent, _):
        driver = await agent.start("s")
        driver.follow_up([user("later")])
        await driver.release()  # idle, no turn: nothing runs, nothing to cancel
        for operation, use in _operations(driver):
            with pytest.raises(al.InvalidStateError) as raised:
                await _used(use)
            assert str(raised.value) == (
                f"cannot {operation} on session 's''s driver: it was released (release()), "
                "its running calls cancelled; resume the session from the store "
                "(Agent.resume) for a driver that goes on"
            )
        assert [m.items for m in driver.queued_follow_ups] == [(user("later"),)]
        assert driver.state is al.DriverState.IDLE


async def test_release_is_refused_while_a_step_runs() -> None:
    block = BlockingTool()
    async with agent_with(block, first=tool_calls(call("block", {}, id="b"))) as (agent, _):
        driver = await agent.start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            group.start_soon(driver.run_until_blocked)
            await block.entered.wait()
            with pytest.raises(al.InvalidStateError) as raised:
                await driver.release()
            assert str(raised.value) == (
                "cannot release() session 's''s driver in state STEPPING: a step is still "
                "running; await it (or cancel the task awaiting next()) first"
            )
            assert driver.released is False
            block.release.set()
        assert not block.cancelled
        await driver.release()
        assert driver.released is True


async def test_release_at_an_approval_cancels_the_round_s_running_call() -> None:
    block, store = BlockingTool(), MemorySessionStore()
    first = tool_calls(call("block", {}, id="b"), call("deploy", {}, id="d"))
    async with agent_with(block, Deploy(), first=first, store=store) as (agent, tasks):
        driver = await agent.start("s")
        driver.submit_input([user("go")])
        step = await driver.next()
        assert isinstance(step, al.ApprovalRequest)
        await block.entered.wait()
        assert [t.call_id for t in await tasks.list_running()] == ["b"]
        before = await store.load("s")
        await driver.release()
        assert block.cancelled
        assert await tasks.list_running() == []
        assert await store.load("s") == before
