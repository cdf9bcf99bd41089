"""Ports of the reference crate's async task manager scenarios (seed 004).

Differences from the reference, by design: a background call is answered at
once with a placeholder result and its real result arrives as a notification
item (never as a second tool_result); the interrupted foreground call is
answered with a "cancelled" error result.
"""

from __future__ import annotations

import anyio
import pytest
from tasks_support import GateTool, StepRunner, describe, next_event, notifications, user

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio


def fake_model(*calls: str) -> al.testing.ScriptedModel:
    """Calls ``calls`` once, then answers with what the last tool said."""

    def answer(request: al.model.TurnRequest) -> Reply | str:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.NOTIFICATION:
            return "tool said: " + last.text_content.split(": ", 1)[1]
        if last.kind is al.ItemKind.TOOL:
            return f"tool said: {list(last.tool_results())[-1].output}"
        return tool_calls(*(call(name) for name in calls))

    return al.testing.ScriptedModel(answer)


class BlockingTool(GateTool):
    """Like the reference's BlockingTool: a fixed output once released."""

    def __init__(self, name: str, output: str) -> None:
        super().__init__(name)
        self.output = output

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await super().invoke(request, ctx)
        return self.output


async def test_async_task_manager_background_round_requires_explicit_continue() -> None:
    tool = BlockingTool("background-wait", "background-done")
    routing = al.tasks.RouteByName({"background-wait": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        agent = (
            al.Agent.builder()
            .model(fake_model("background-wait"))
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .build()
        )
        driver = await agent.start(al.SessionConfig("session-background"))
        driver.submit_input([user("ping")])

        first = await driver.next()
        assert isinstance(first, al.AwaitingInput)
        started = await next_event(handle)
        assert describe(started) == ("TaskStarted", "call-1", "background-wait")
        assert started.task.kind is al.tasks.TaskKind.BACKGROUND

        await tool.entered("call-1").wait()
        tool.release("call-1")
        completed = await next_event(handle)
        assert isinstance(completed, al.tasks.TaskSucceeded)
        assert completed.result.output == "background-done"

        resumed = await driver.next()
        assert isinstance(resumed, al.Finished)
        assert resumed.result.finish_reason is al.FinishReason.COMPLETED
        assert resumed.result.items[0].text_content == "tool said: background-done"
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert notifications(transcript) == [
            "Background tool call call-1 completed: background-done"
        ]


async def test_loop_interrupt_cancels_foreground_tasks_but_keeps_background_tasks_running() -> None:
    controller = al.CancellationController()
    foreground = BlockingTool("foreground-wait", "foreground-done")
    background = BlockingTool("background-wait", "background-done")
    routing = al.tasks.RouteByName(
        {
            "foreground-wait": al.tasks.TaskKind.FOREGROUND,
            "background-wait": al.tasks.TaskKind.BACKGROUND,
        }
    )
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        agent = (
            al.Agent.builder()
            .model(fake_model("foreground-wait", "background-wait"))
            .add_tool_source(al.ToolRegistry().with_tool(foreground).with_tool(background))
            .cancellation(controller.handle())
            .task_manager(manager)
            .build()
        )
        driver = await agent.start(al.SessionConfig("session-mixed-cancel"))
        driver.submit_input([user("run both")])

        async with anyio.create_task_group() as group:
            runner = StepRunner(group, driver)
            assert [describe(await next_event(handle)) for _ in range(2)] == [
                ("TaskStarted", "call-1", "foreground-wait"),
                ("TaskStarted", "call-2", "background-wait"),
            ]
            await foreground.entered("call-1").wait()
            await background.entered("call-2").wait()
            controller.interrupt()
            cancelled = await runner.result()

        assert isinstance(cancelled, al.Finished)
        assert cancelled.result.finish_reason is al.FinishReason.CANCELLED
        assert describe(await next_event(handle)) == (
            "TaskCancelled",
            "call-1",
            "foreground-wait",
        )
        assert foreground.cancelled == ["call-1"]
        running = await handle.list_running()
        assert [(task.tool_name, task.kind) for task in running] == [
            ("background-wait", al.tasks.TaskKind.BACKGROUND)
        ]
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        results = {r.call_id: r for item in transcript for r in item.tool_results()}
        assert al.tools.result_outcome(results["call-1"]) is al.tools.ResultOutcome.CANCELLED
        assert al.tools.result_outcome(results["call-2"]) is al.tools.ResultOutcome.BACKGROUND

        background.release("call-2")
        completed = await next_event(handle)
        assert isinstance(completed, al.tasks.TaskSucceeded)
        assert completed.task.tool_name == "background-wait"
        assert completed.result.output == "background-done"

        # The late result is delivered as a notification and drives a new turn.
        resumed = await driver.next()
        assert isinstance(resumed, al.Finished)
        assert resumed.result.items[0].text_content == "tool said: background-done"
        al.transcript.validate_transcript(driver.snapshot().transcript)
