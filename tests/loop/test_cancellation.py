"""Interrupts at every await point leave a provider-valid transcript and a usable driver."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
from loop_support import ApproveFsReads, BlockingTool, EchoTool, tool_texts, user

import agentloop as al
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, hang, tool_calls

pytestmark = pytest.mark.anyio


async def next_with_interrupt(
    driver: al.LoopDriver,
    controller: al.CancellationController,
    ready: Callable[[], Awaitable[object]],
) -> al.Step:
    """Run ``driver.next()`` and interrupt once ``ready()`` returns."""
    steps: list[al.Step] = []

    async def drive() -> None:
        steps.append(await driver.next())

    async with anyio.create_task_group() as group:
        group.start_soon(drive)
        await ready()
        controller.interrupt()
    return steps[0]


INTERRUPT_REASONS = {
    "model": "interrupted while the model was answering",
    "tool": "interrupted while tool calls were running",
    "mutator": "interrupted while a transcript mutator ran",
    "approval": "interrupted while an approval was pending",
    "pause": "interrupted while paused after a tool round",
    "host": "the host cancelled the task awaiting next()",
}


def assert_cancelled(step: al.Step, stage: str) -> None:
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    assert step.result.metadata == {
        "agentloop.interrupted": True,
        "agentloop.interrupt_stage": stage,
        "agentloop.interrupt_reason": INTERRUPT_REASONS[stage],
    }
    item = step.result.items[-1]
    assert item.kind is al.ItemKind.ASSISTANT
    assert item.metadata["agentloop.interrupted"] is True


async def test_interrupt_during_a_tool_answers_the_call_and_the_next_turn_works() -> None:
    controller = al.CancellationController()
    tool = BlockingTool()
    model = al.testing.ScriptedModel([tool_calls(call("block", id="c1")), "fine"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .cancellation(controller.handle())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    step = await next_with_interrupt(driver, controller, tool.entered.wait)
    assert_cancelled(step, "tool")
    assert tool.cancelled is True
    assert tool_texts(driver.snapshot().transcript) == [
        ("c1", "cancelled: the turn was interrupted before this call finished", True)
    ]
    al.transcript.validate_transcript(driver.snapshot().transcript)
    driver.submit_input([user("again")])
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.finish_reason is al.FinishReason.COMPLETED
    al.transcript.validate_transcript(model.requests[-1].transcript)
    model.assert_complete()


class WaitingMutator:
    name = "waiting"

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.calls = 0

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        self.calls += 1
        if self.calls == 1:
            cursor.append(al.Item.text(al.ItemKind.CONTEXT, "half-done"))
            self.entered.set()
            await anyio.sleep_forever()


async def test_interrupt_during_a_mutator_discards_its_pass() -> None:
    controller = al.CancellationController()
    mutator = WaitingMutator()
    model = al.testing.ScriptedModel(["answer"])
    agent = (
        al.Agent.builder()
        .model(model)
        .mutator(mutator)
        .cancellation(controller.handle())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    step = await next_with_interrupt(driver, controller, mutator.entered.wait)
    assert_cancelled(step, "mutator")
    kinds = [item.kind for item in driver.snapshot().transcript]
    assert kinds == [al.ItemKind.USER, al.ItemKind.ASSISTANT]
    driver.submit_input([user("again")])
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.final_items[0].text_content == "answer"


async def test_interrupt_during_streaming_keeps_no_partial_output() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(
        [hang(al.BeginPart("t", al.PartKind.TEXT), al.AppendText("t", "partial")), "ok"]
    )
    recorder_items: list[al.Item] = []

    class Items:
        def on_item_appended(self, item: al.Item) -> None:
            recorder_items.append(item)

    agent = (
        al.Agent.builder()
        .model(model)
        .cancellation(controller.handle())
        .transcript_observer(Items())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    step = await next_with_interrupt(driver, controller, anyio.wait_all_tasks_blocked)
    assert_cancelled(step, "model")
    assert [i.text_content for i in recorder_items] == [
        "go",
        "Previous assistant response was interrupted by the user before completion.",
    ]


async def test_interrupt_while_an_approval_waits_closes_the_turn_on_next() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("echo", id="c1")), "after"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
        .cancellation(controller.handle())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    pending = await driver.next()
    assert isinstance(pending, al.ApprovalRequest)
    controller.interrupt()
    with pytest.raises(al.InvalidStateError, match=r"turn turn-1 was cancelled; call next\(\)"):
        pending.approve()
    step = await driver.next()
    assert_cancelled(step, "approval")
    assert tool_texts(driver.snapshot().transcript) == [
        ("c1", "cancelled: the turn was interrupted before this call was approved", True)
    ]
    results = [r for i in driver.snapshot().transcript for r in i.tool_results()]
    assert al.tools.result_outcome(results[0]) is al.tools.ResultOutcome.CANCELLED
    driver.submit_input([user("next")])
    assert isinstance(await driver.next(), al.Finished)
    al.transcript.validate_transcript(model.requests[-1].transcript)


async def test_interrupt_during_after_tool_result_pause() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("echo", id="c1")), "unused"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .cancellation(controller.handle())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    assert isinstance(await driver.next(), al.AfterToolResult)
    controller.interrupt()
    assert_cancelled(await driver.next(), "pause")
    assert model.remaining == 1


async def test_host_cancelling_next_closes_the_turn_and_reraises() -> None:
    tool = BlockingTool()
    model = al.testing.ScriptedModel([tool_calls(call("block", id="c1")), "after"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    async with anyio.create_task_group() as group:

        async def drive() -> None:
            await driver.next()

        group.start_soon(drive)
        await tool.entered.wait()
        group.cancel_scope.cancel()
    assert driver.state is al.DriverState.IDLE
    transcript = driver.snapshot().transcript
    al.transcript.validate_transcript(transcript)
    assert transcript[-1].metadata["agentloop.interrupt_stage"] == "host"
    driver.submit_input([user("again")])
    assert isinstance(await driver.next(), al.Finished)


async def test_an_interrupt_between_turns_does_not_cancel_the_next_turn() -> None:
    controller = al.CancellationController()
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(["one"]))
        .cancellation(controller.handle())
        .build()
    )
    driver = await agent.start("s")
    controller.interrupt()
    driver.submit_input([user("x")])
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED


async def test_checkpoint_can_be_awaited() -> None:
    controller = al.CancellationController()
    checkpoint = controller.handle().snapshot()
    assert checkpoint.is_cancelled is False
    async with anyio.create_task_group() as group:
        group.start_soon(checkpoint.cancelled)
        await anyio.wait_all_tasks_blocked()
        assert controller.interrupt() == 1
    assert checkpoint.is_cancelled is True
    assert controller.handle().snapshot().is_cancelled is False
