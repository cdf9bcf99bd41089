"""AsyncTaskManager driven through the public API: parallel rounds, failures, detach,
host cancellation, background delivery, approvals, lifecycle and routing."""

from __future__ import annotations

import anyio
import pytest
import structlog
import structlog.testing
from tasks_support import (
    ApproveFsReads,
    GateTool,
    StepRunner,
    build,
    describe,
    events,
    next_event,
    notifications,
    tool_outputs,
    user,
)

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


async def test_sixteen_parallel_calls_append_results_in_call_order() -> None:
    gate = GateTool("gate")
    ids = [f"c{index:02d}" for index in range(16)]
    model = al.testing.ScriptedModel([tool_calls(*(call("gate", id=i) for i in ids)), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            for call_id in ids:  # all 16 run at the same time
                await gate.entered(call_id).wait()
            started = await events(handle, 16)
            assert [e.task.call_id for e in started] == ids
            for call_id in reversed(ids):  # finish in reverse order, one at a time
                gate.release(call_id)
                assert describe(await next_event(handle)) == ("TaskSucceeded", call_id, "gate")
            step = await runner.result()
        assert isinstance(step, al.AfterToolResult)
        assert tool_outputs(driver.snapshot().transcript) == [
            (call_id, f"gate-done:{call_id}", False) for call_id in ids
        ]
        assert isinstance(await driver.next(), al.Finished)
        al.transcript.validate_transcript(driver.snapshot().transcript)
        model.assert_complete()


async def test_a_failing_call_among_parallel_calls_is_an_error_result_and_task_failed() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel(
        [tool_calls(call("gate"), call("gate", {"fail": True}), call("gate")), "done"]
    )
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            await events(handle, 3)
            for call_id in ("call-2", "call-3", "call-1"):
                gate.release(call_id)
            ended = sorted(describe(e) for e in await events(handle, 3))
            step = await runner.result()
        assert ended == [
            ("TaskFailed", "call-2", "gate"),
            ("TaskSucceeded", "call-1", "gate"),
            ("TaskSucceeded", "call-3", "gate"),
        ]
        assert isinstance(step, al.AfterToolResult)
        assert tool_outputs(driver.snapshot().transcript) == [
            ("call-1", "gate-done:call-1", False),
            ("call-2", "tool 'gate' failed: RuntimeError: call-2 broke", True),
            ("call-3", "gate-done:call-3", False),
        ]


async def test_detach_after_moves_a_slow_call_to_the_background() -> None:
    slow = GateTool("slow")
    quick = GateTool("quick", blocking=False)
    model = al.testing.ScriptedModel(
        [tool_calls(call("slow"), call("quick")), "answered without slow", "slow is done"]
    )
    routing = al.tasks.RouteByName({"slow": al.tasks.DetachAfter(0)})
    async with al.tasks.AsyncTaskManager(routing=routing, detach_after=30) as manager:
        handle = manager.handle()
        driver = await build(model, manager, slow, quick).build().start("s")
        driver.submit_input([user("go")])
        step = await driver.next()
        assert isinstance(step, al.AfterToolResult)
        transcript = driver.snapshot().transcript
        results = [r for item in transcript for r in item.tool_results()]
        assert [(r.call_id, al.tools.result_outcome(r)) for r in results] == [
            ("call-1", al.tools.ResultOutcome.DETACHED),
            ("call-2", None),
        ]
        assert results[0].output == (
            "Tool slow is now running in the background; the result will be delivered "
            "when it completes."
        )
        finished = await driver.next()
        assert isinstance(finished, al.Finished)
        assert finished.result.final_items[0].text_content == "answered without slow"

        seen = [describe(e) for e in await events(handle, 4)]
        assert sorted(seen[:2]) == [
            ("TaskStarted", "call-1", "slow"),
            ("TaskStarted", "call-2", "quick"),
        ]
        assert sorted(seen[2:]) == [
            ("TaskDetached", "call-1", "slow"),
            ("TaskSucceeded", "call-2", "quick"),
        ]
        running = await handle.list_running()
        assert [(t.call_id, t.kind) for t in running] == [("call-1", al.tasks.TaskKind.BACKGROUND)]

        slow.release("call-1")
        assert describe(await next_event(handle)) == ("TaskSucceeded", "call-1", "slow")
        resumed = await driver.next()
        assert isinstance(resumed, al.Finished)
        assert resumed.result.items[0].text_content == "slow is done"
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert notifications(transcript) == [
            "Background tool call call-1 completed: slow-done:call-1"
        ]
        model.assert_complete()


async def test_a_quick_call_never_detaches() -> None:
    quick = GateTool("quick", blocking=False)
    model = al.testing.ScriptedModel([tool_calls(call("quick")), "done"])
    async with al.tasks.AsyncTaskManager(detach_after=30) as manager:
        handle = manager.handle()
        driver = await build(model, manager, quick).build().start("s")
        driver.submit_input([user("go")])
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [describe(e) for e in await events(handle, 2)] == [
        ("TaskStarted", "call-1", "quick"),
        ("TaskSucceeded", "call-1", "quick"),
    ]
    assert await handle.next_event() is None  # closed, nothing more


async def test_cancel_a_background_task_through_the_handle() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel([tool_calls(call("gate")), "saw the cancellation"])
    routing = al.tasks.RouteByName({"gate": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        assert isinstance(await driver.next(), al.AwaitingInput)
        await gate.entered("call-1").wait()
        assert await handle.cancel("task-1") is True
        assert gate.cancelled == ["call-1"]
        assert await handle.list_running() == []
        assert await handle.cancel("task-1") is False  # finished
        assert await handle.cancel("task-99") is False  # unknown
        step = await driver.next()
        assert isinstance(step, al.Finished)
        assert step.result.items[0].text_content == "saw the cancellation"
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert notifications(transcript) == [
            "Background tool call call-1 failed: cancelled: task task-1 (gate) did not "
            "finish: the host cancelled it"
        ]
    assert [describe(e) for e in await events(handle, 2)] == [
        ("TaskStarted", "call-1", "gate"),
        ("TaskCancelled", "call-1", "gate"),
    ]
    assert await handle.next_event() is None  # the failed cancels emitted nothing


async def test_cancel_a_foreground_task_through_the_handle_answers_its_call() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel([tool_calls(call("gate"), call("gate")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            await gate.entered("call-1").wait()
            await gate.entered("call-2").wait()
            assert await handle.cancel("task-1") is True
            gate.release("call-2")
            step = await runner.result()
        assert isinstance(step, al.AfterToolResult)
        assert tool_outputs(driver.snapshot().transcript) == [
            ("call-1", "cancelled: task task-1 (gate) did not finish: the host cancelled it", True),
            ("call-2", "gate-done:call-2", False),
        ]


async def test_background_result_arriving_while_awaiting_input_drives_the_model() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel([tool_calls(call("gate"), call("gate")), "both are done"])
    routing = al.tasks.RouteByName({"gate": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        assert isinstance(await driver.next(), al.AwaitingInput)
        assert isinstance(await driver.next(), al.AwaitingInput)  # nothing finished yet
        assert len(model.requests) == 1
        await events(handle, 2)
        for call_id in ("call-2", "call-1"):
            gate.release(call_id)
            assert describe(await next_event(handle)) == ("TaskSucceeded", call_id, "gate")
        step = await driver.next()
        assert isinstance(step, al.Finished)
        assert step.result.items[0].text_content == "both are done"
        request = model.requests[-1]
        assert [item.text_content for item in request.transcript][-2:] == [
            "Background tool call call-2 completed: gate-done:call-2",
            "Background tool call call-1 completed: gate-done:call-1",
        ]
        al.transcript.validate_transcript(driver.snapshot().transcript)
        model.assert_complete()


async def test_approvals_surface_one_by_one_while_background_calls_run() -> None:
    background = GateTool("bg")
    foreground = GateTool("fg")
    guarded = GateTool("read", guarded=True, blocking=False)
    model = al.testing.ScriptedModel(
        [
            tool_calls(call("bg"), call("read"), call("fg"), call("read")),
            "round done",
            "background done",
        ]
    )
    routing = al.tasks.RouteByName({"bg": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        builder = build(
            model, manager, background, foreground, guarded, permissions=ApproveFsReads()
        )
        driver = await builder.build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            await background.entered("call-1").wait()
            await foreground.entered("call-3").wait()
            assert guarded.invoked == []  # nothing runs before approval
            foreground.release("call-3")
            first = await runner.result()
        assert isinstance(first, al.ApprovalRequest)
        assert first.call_id == "call-2"
        assert guarded.invoked == []
        assert [t.call_id for t in await handle.list_running()] == ["call-1"]

        first.approve()
        second = await driver.next()
        assert isinstance(second, al.ApprovalRequest)
        assert second.call_id == "call-4"  # surfaced while call-2 may still run

        second.deny("not this one")
        finished = await driver.next()
        assert isinstance(finished, al.Finished)
        assert finished.result.final_items[0].text_content == "round done"
        assert guarded.invoked == ["call-2"]  # a denied call never runs
        assert [t.call_id for t in await handle.list_running()] == ["call-1"]
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert [(c, e) for c, _, e in tool_outputs(transcript)] == [
            ("call-1", False),  # the background placeholder
            ("call-2", False),  # results land in call order, whatever order they finished
            ("call-3", False),
            ("call-4", True),
        ]

        background.release("call-1")
        await next_event(handle)  # Started call-1
        while not isinstance(event := await next_event(handle), al.tasks.TaskSucceeded) or (
            event.task.call_id != "call-1"
        ):
            pass
        resumed = await driver.next()
        assert isinstance(resumed, al.Finished)
        assert resumed.result.items[0].text_content == "background done"
        model.assert_complete()


async def test_starting_a_task_outside_the_block_is_refused() -> None:
    manager = al.tasks.AsyncTaskManager()
    model = al.testing.ScriptedModel([tool_calls(call("quick"))])
    driver = await build(model, manager, GateTool("quick", blocking=False)).build().start("s")
    driver.submit_input([user("go")])
    with pytest.raises(al.InvalidStateError) as raised:
        await driver.next()
    assert str(raised.value) == (
        "cannot start a task for call call-1 (quick): AsyncTaskManager is in state NEW, "
        "expected OPEN; use it as `async with AsyncTaskManager(...) as manager:` and run the "
        "driver inside"
    )
    assert manager.state is al.tasks.TaskManagerState.NEW
    assert await manager.handle().list_running() == []


async def test_a_manager_is_entered_once() -> None:
    manager = al.tasks.AsyncTaskManager()
    states = [manager.state]
    async with manager:
        states.append(manager.state)
        with pytest.raises(al.InvalidStateError, match="in state OPEN: a manager is entered once"):
            await manager.__aenter__()
        states.append(manager.state)
    states.append(manager.state)
    with pytest.raises(al.InvalidStateError, match="in state CLOSED"):
        await manager.__aenter__()
    states.append(manager.state)
    assert [state.name for state in states] == ["NEW", "OPEN", "OPEN", "CLOSED", "CLOSED"]


async def test_an_error_in_the_block_propagates_unwrapped() -> None:
    with pytest.raises(KeyError, match="boom"):
        async with al.tasks.AsyncTaskManager():
            raise KeyError("boom")


async def test_leaving_the_block_cancels_running_tasks() -> None:
    gate = GateTool("gate")
    model = al.testing.ScriptedModel([tool_calls(call("gate"))])
    routing = al.tasks.RouteByName({"gate": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        driver = await build(model, manager, gate).build().start("s")
        driver.submit_input([user("go")])
        assert isinstance(await driver.next(), al.AwaitingInput)
        await gate.entered("call-1").wait()
    assert gate.cancelled == ["call-1"]
    assert [describe(e) for e in await events(handle, 2)] == [
        ("TaskStarted", "call-1", "gate"),
        ("TaskCancelled", "call-1", "gate"),
    ]
    assert await handle.next_event() is None
    (done,) = manager.take_background_results()
    assert done.result.output == (
        "cancelled: task task-1 (gate) did not finish: the task manager shut down"
    )


async def test_an_approval_surfaces_while_a_foreground_call_still_runs() -> None:
    slow = GateTool("slow")
    guarded = GateTool("read", guarded=True, blocking=False)
    model = al.testing.ScriptedModel([tool_calls(call("slow"), call("read")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        builder = build(model, manager, slow, guarded, permissions=ApproveFsReads())
        driver = await builder.build().start("s")
        driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            await slow.entered("call-1").wait()
            await anyio.wait_all_tasks_blocked()
            surfaced = runner.done.is_set()
            slow.release("call-1")
            step = await runner.result()
        assert surfaced  # the approval did not wait for call-1
        assert isinstance(step, al.ApprovalRequest)


class Watcher:
    """Holds the turn's cancellation scope open until released; reports what it saw."""

    spec = al.ToolSpec("watch", "Watch something for a while.", {"type": "object"})

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.gate = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        assert ctx.cancellation is not None
        with ctx.cancellation.scope() as scope:
            self.entered.set()
            await self.gate.wait()
        return f"watched: scope cancelled={scope.cancel_called}, turn cancelled=" + str(
            ctx.cancellation.is_cancelled
        )


@pytest.mark.parametrize(
    "routing",
    [al.tasks.TaskKind.BACKGROUND, al.tasks.DetachAfter(0)],
    ids=["background", "detached"],
)
async def test_a_background_tool_is_not_cancelled_by_a_later_interrupt(
    routing: al.tasks.TaskRoute,
) -> None:
    watcher = Watcher()
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("watch", {})), "noted", "done"])
    async with al.tasks.AsyncTaskManager(
        routing=al.tasks.RouteByName({"watch": routing})
    ) as manager:
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(al.ToolRegistry().with_tool(watcher))
            .task_manager(manager)
            .cancellation(controller.handle())
            .input([user("watch it")])
            .build()
        )
        driver = await agent.start("s")
        step = await driver.run_until_blocked()
        await watcher.entered.wait()
        controller.interrupt()  # a later interrupt, after the call left the turn
        watcher.gate.set()
        handle = manager.handle()
        while not isinstance(await handle.next_event(), al.tasks.TaskSucceeded):
            pass
        step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
    notes = [
        item.text_content
        for item in driver.snapshot().transcript
        if item.kind is al.ItemKind.NOTIFICATION
    ]
    assert notes == [
        "Background tool call call-1 completed: watched: scope cancelled=False, "
        "turn cancelled=False"
    ]


@al.tool
async def echo(value: str) -> str:
    """Return ``value``."""
    return value


async def run_echo_rounds(manager: al.tasks.AsyncTaskManager, rounds: int) -> None:
    model = al.testing.ScriptedModel(
        [*(tool_calls(call("echo", {"value": f"v{i}"}, id=f"c{i}")) for i in range(rounds)), "done"]
    )
    agent = build(model, manager, echo).build()
    result = await al.run(agent, "go")
    assert result.stop_reason == "finished"
    model.assert_complete()


async def test_events_are_recorded_only_once_the_handle_was_taken() -> None:
    async with al.tasks.AsyncTaskManager() as manager:
        await run_echo_rounds(manager, 3)  # nobody can read these: none is kept
        handle = manager.handle()
        await run_echo_rounds(manager, 1)
    assert [describe(e) for e in await events(handle, 2)] == [
        ("TaskStarted", "c0", "echo"),
        ("TaskSucceeded", "c0", "echo"),
    ]
    assert await handle.next_event() is None


async def test_unread_events_are_bounded_the_oldest_dropped_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentloop.tasks._async as async_module

    monkeypatch.setattr(async_module, "MAX_UNREAD_EVENTS", 3)
    with structlog.testing.capture_logs() as logs:
        async with al.tasks.AsyncTaskManager() as manager:
            handle = manager.handle()
            await run_echo_rounds(manager, 3)  # 6 events, the first 3 dropped
    assert [describe(e) for e in await events(handle, 3)] == [
        ("TaskSucceeded", "c1", "echo"),
        ("TaskStarted", "c2", "echo"),
        ("TaskSucceeded", "c2", "echo"),
    ]
    assert await handle.next_event() is None
    dropped = [entry for entry in logs if entry["event"].startswith("task events dropped")]
    assert len(dropped) == 1
    assert dropped[0]["limit"] == 3
