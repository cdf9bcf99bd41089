"""AsyncTaskManager runs a round's only call at once, inside ``start_task`` (no task of
its own): the same results, events, context isolation, host cancellation and
interrupts as a spawned task."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tasks_support import GateTool, StepRunner, build, describe, events, tool_outputs, user

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("agentloop_test_sole_call")


class ContextTool:
    """Reports the variable it sees, then sets it (in its own context only)."""

    spec = al.ToolSpec("ctx", "Read and set a context variable.", {"type": "object"})

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.tasks: list[object] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.seen.append(VAR.get("unset"))
        await anyio.lowlevel.checkpoint()
        VAR.set(f"tool:{request.call_id}")
        await anyio.lowlevel.checkpoint()
        assert VAR.get() == f"tool:{request.call_id}"
        return f"saw {self.seen[-1]}"


async def test_a_sole_call_sees_the_drivers_context_and_its_own_changes_stay_its_own() -> None:
    tool = ContextTool()
    model = al.testing.ScriptedModel([tool_calls(call("ctx")), tool_calls(call("ctx")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        agent = build(model, manager, tool).build()
        token = VAR.set("host")
        try:
            result = await al.run(agent, "go")
        finally:
            VAR.reset(token)
    assert result.stop_reason == "finished"
    assert tool.seen == ["host", "host"]
    assert tool_outputs(result.transcript) == [
        ("call-1", "saw host", False),
        ("call-2", "saw host", False),
    ]
    assert [describe(e) for e in await events(handle, 4)] == [
        ("TaskStarted", "call-1", "ctx"),
        ("TaskSucceeded", "call-1", "ctx"),
        ("TaskStarted", "call-2", "ctx"),
        ("TaskSucceeded", "call-2", "ctx"),
    ]
    assert await handle.next_event() is None


class WhereTool:
    """Records the id of the task each call runs in."""

    spec = al.ToolSpec("where", "Record the current task.", {"type": "object"})

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.seen.append(anyio.get_current_task().id)
        return "here"


async def test_a_sole_call_runs_in_the_task_awaiting_next() -> None:
    tool = WhereTool()
    seen = tool.seen
    model = al.testing.ScriptedModel([tool_calls(call("where")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await build(model, manager, tool).build().start("s")
        driver.submit_input([user("go")])
        assert isinstance(await driver.next(), al.AfterToolResult)
        assert seen == [anyio.get_current_task().id]


GATE_CANCELLED = [("TaskStarted", "call-1", "gate"), ("TaskCancelled", "call-1", "gate")]
"""The task events of a gated call-1 that was cancelled."""


async def test_cancel_a_running_sole_call_through_the_handle_answers_its_call() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel([tool_calls(call("gate")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            await gate.entered("call-1").wait()
            assert [t.call_id for t in await handle.list_running()] == ["call-1"]
            assert await handle.cancel("task-1") is True
            assert await handle.cancel("task-1") is False
            step = await runner.result()
        assert isinstance(step, al.AfterToolResult)
        assert gate.cancelled == ["call-1"]
        assert tool_outputs(driver.snapshot().transcript) == [
            ("call-1", "cancelled: task task-1 (gate) did not finish: the host cancelled it", True)
        ]
        assert await handle.list_running() == []
        final = await driver.next()
        assert isinstance(final, al.Finished)
        assert final.result.finish_reason is al.FinishReason.COMPLETED
    assert [describe(e) for e in await events(handle, 2)] == GATE_CANCELLED


async def test_an_interrupt_during_a_sole_call_cancels_the_tool_and_closes_the_turn() -> None:
    gate = GateTool("gate")
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("gate")), "fine"])
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        agent = build(model, manager, gate, cancellation=controller.handle()).build()
        driver = await agent.start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            await gate.entered("call-1").wait()
            controller.interrupt()
            step = await runner.result()
        assert isinstance(step, al.Finished)
        assert step.result.finish_reason is al.FinishReason.CANCELLED
        assert step.result.metadata["agentloop.interrupt_stage"] == "tool"
        assert gate.cancelled == ["call-1"]
        transcript = driver.snapshot().transcript
        assert tool_outputs(transcript) == [
            ("call-1", "cancelled: the turn was interrupted before this call finished", True)
        ]
        al.transcript.validate_transcript(transcript)
        assert await handle.list_running() == []
        driver.submit_input([user("again")])
        final = await driver.next()
        assert isinstance(final, al.Finished)
        assert final.result.finish_reason is al.FinishReason.COMPLETED
    assert [describe(e) for e in await events(handle, 2)] == GATE_CANCELLED
    assert manager.take_background_results() == []


async def test_the_host_cancelling_next_during_a_sole_call_cancels_it_and_closes_the_turn() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel([tool_calls(call("gate")), "after"])
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:

            async def drive() -> None:
                await driver.next()

            group.start_soon(drive)
            await gate.entered("call-1").wait()
            group.cancel_scope.cancel()
        assert driver.state is al.DriverState.IDLE
        assert gate.cancelled == ["call-1"]
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert transcript[-1].metadata["agentloop.interrupt_stage"] == "host"
        assert tool_outputs(transcript) == [
            ("call-1", "cancelled: the turn was interrupted before this call finished", True)
        ]
        assert await handle.list_running() == []
        driver.submit_input([user("again")])
        assert isinstance(await driver.next(), al.Finished)
    assert [describe(e) for e in await events(handle, 2)] == GATE_CANCELLED


async def test_a_round_of_two_calls_still_runs_them_in_tasks_of_their_own() -> None:
    tool = WhereTool()
    where = tool.seen
    model = al.testing.ScriptedModel([tool_calls(call("where"), call("where")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await build(model, manager, tool).build().start("s")
        driver.submit_input([user("go")])
        assert isinstance(await driver.next(), al.AfterToolResult)
        me = anyio.get_current_task().id
        assert len(set(where)) == 2
        assert me not in where


# -- the protocol directly: a sole launch that never ran -----------------------------


class Recorder:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.entered = anyio.Event()
        self.release = anyio.Event()

    def launch(self, call_id: str, *, wait: bool = False) -> al.tasks.TaskLaunch:
        request = al.ToolRequest(call_id, "rec", {}, "s", "t1")

        async def run() -> al.ToolResultPart:
            self.ran.append(call_id)
            self.entered.set()
            if wait:
                await self.release.wait()
            return al.ToolResultPart(call_id, "ran")

        return al.tasks.TaskLaunch(request, run, sole=True)


async def test_start_task_runs_a_sole_launch_and_returns_its_result() -> None:
    recorder = Recorder()
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        started = await manager.start_task(recorder.launch("c1"), "t1")
        assert started == al.tasks.TaskResult("task-1", al.ToolResultPart("c1", "ran"))
        assert recorder.ran == ["c1"]
        assert await handle.list_running() == []
        assert await manager.wait_for_turn("t1") is None
    assert [describe(e) for e in await events(handle, 2)] == [
        ("TaskStarted", "c1", "rec"),
        ("TaskSucceeded", "c1", "rec"),
    ]


async def test_a_sole_launch_started_by_a_cancelled_caller_never_runs() -> None:
    recorder = Recorder()
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await manager.start_task(recorder.launch("c1"), "t1")
        assert scope.cancelled_caught
        assert await handle.list_running() == []
        assert await manager.wait_for_turn("t1") is None
    assert recorder.ran == []
    assert await handle.next_event() is None  # not even started


@pytest.mark.parametrize("how", ["handle", "shutdown"])
async def test_a_running_sole_launch_cancelled_from_another_task_answers_cancelled(
    how: str,
) -> None:
    recorder = Recorder()
    results: list[al.tasks.TaskResult | al.tasks.TaskLaunched] = []
    manager = al.tasks.AsyncTaskManager()
    async with anyio.create_task_group() as group, manager:
        handle = manager.handle()

        async def start() -> None:
            results.append(await manager.start_task(recorder.launch("c1", wait=True), "t1"))

        group.start_soon(start)
        await recorder.entered.wait()
        assert [t.call_id for t in await handle.list_running()] == ["c1"]
        if how == "handle":
            assert await handle.cancel("task-1") is True
            assert await handle.list_running() == []
        # Left the block ("shutdown") or not: the launch answered either way.
    why = "the host cancelled it" if how == "handle" else "the task manager shut down"
    assert results == [
        al.tasks.TaskResult(
            "task-1",
            al.ToolResultPart(
                "c1",
                f"cancelled: task task-1 (rec) did not finish: {why}",
                is_error=True,
                metadata={al.tools.OUTCOME_KEY: al.tools.ResultOutcome.CANCELLED.value},
            ),
        )
    ]
    assert [describe(e) for e in await events(handle, 2)] == [
        ("TaskStarted", "c1", "rec"),
        ("TaskCancelled", "c1", "rec"),
    ]


async def test_a_sole_launch_with_a_detach_limit_or_a_background_route_gets_a_task() -> None:
    where: list[Any] = []
    for manager in (
        al.tasks.AsyncTaskManager(detach_after=30.0),
        al.tasks.AsyncTaskManager(routing=lambda request: al.tasks.TaskKind.BACKGROUND),
    ):
        async with manager:
            request = al.ToolRequest("c1", "rec", {}, "s", "t1")

            async def run() -> al.ToolResultPart:
                where.append(anyio.get_current_task().id)
                return al.ToolResultPart("c1", "ran")

            await manager.start_task(al.tasks.TaskLaunch(request, run, sole=True), "t1")
            await anyio.sleep(0.01)
            assert len(where) == 1  # ran in its own task before anyone waited
            assert where.pop() != anyio.get_current_task().id


# -- in place or in a task of its own: the same outcome -------------------------------

STEPS = st.lists(
    st.sampled_from(["yield", "set_var", "read_var", "raise", "stray_cancel", "sleep"]),
    max_size=6,
)


class ScriptedTool:
    """Plays its input's ``steps``; answers with what it saw."""

    spec = al.ToolSpec("script", "Play steps.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        seen: list[str] = []
        for step in request.input["steps"]:
            if step == "yield":
                await anyio.lowlevel.checkpoint()
            elif step == "sleep":
                await anyio.sleep(0.001)
            elif step == "set_var":
                VAR.set(f"{request.call_id}:{len(seen)}")
            elif step == "read_var":
                seen.append(VAR.get("unset"))
            elif step == "raise":
                raise ValueError(f"{request.call_id} failed after {seen}")
            else:  # a CancelledError the host did not ask for
                raise anyio.get_cancelled_exc_class()()
        return f"saw {seen}"


async def play(rounds: list[list[str]], manager: al.tasks.AsyncTaskManager) -> tuple[Any, ...]:
    """Run one turn with a one-call round per entry; the transcript's results and events."""
    replies: list[Reply | str] = [tool_calls(call("script", {"steps": s})) for s in rounds]
    model = al.testing.ScriptedModel([*replies, "done"])
    async with manager:
        handle = manager.handle()
        token = VAR.set("host")
        try:
            result = await al.run(build(model, manager, ScriptedTool()).build(), "go")
        finally:
            VAR.reset(token)
        assert VAR.get("unset") == "unset"
    events = []
    while (event := await handle.next_event()) is not None:
        events.append(describe(event))
    return result.stop_reason, tool_outputs(result.transcript), events


@settings(max_examples=60, deadline=None)
@given(rounds=st.lists(STEPS, min_size=1, max_size=3))
async def test_a_sole_call_ends_as_it_would_in_a_task_of_its_own(rounds: list[list[str]]) -> None:
    in_place = await play(rounds, al.tasks.AsyncTaskManager())
    # A detach limit nobody reaches makes the manager spawn a task for every call.
    in_a_task = await play(rounds, al.tasks.AsyncTaskManager(detach_after=3600))
    assert in_place == in_a_task
