"""A complete TurnResult (items, tool calls, model calls) and the per-model-call events."""

from __future__ import annotations

import time

import pytest
from loop_support import ApproveFsReads, EchoTool, Recorder, user

import agentloop as al
import agentloop.observe
import agentloop.testing
import agentloop.tools
from agentloop.loop import _driver, _machine, _model_io, _observer, _rounds, _tool_io
from agentloop.testing import call, fail, text, tool_calls

pytestmark = pytest.mark.anyio

U1 = al.Usage(input_tokens=10, output_tokens=5)
U2 = al.Usage(input_tokens=30, output_tokens=7)


def two_round_model() -> al.testing.ScriptedModel:
    return al.testing.ScriptedModel(
        [
            tool_calls(
                call("echo", {"value": "a"}, id="c1"),
                call("echo", {"value": "b"}, id="c2"),
                text="let me look",
                usage=U1,
            ),
            text("both done", usage=U2),
        ]
    )


async def approval_driver(
    model: al.testing.ScriptedModel, recorder: Recorder | None = None
) -> al.LoopDriver:
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
        .input([user("go")])
    )
    if recorder is not None:
        builder = builder.observer(recorder)
    return await builder.build().start("s")


async def test_the_turn_result_holds_every_item_call_and_model_call() -> None:
    before = time.time()
    driver = await approval_driver(two_round_model())
    first = await driver.next()
    assert isinstance(first, al.ApprovalRequest)
    first.approve_with({"value": "edited"})
    second = await driver.next()
    assert isinstance(second, al.ApprovalRequest)
    second.deny("no")
    finished = await driver.next()
    assert isinstance(finished, al.Finished)
    result = finished.result

    assert result.finish_reason is al.FinishReason.COMPLETED
    assert [(item.kind, item.text_content) for item in result.items] == [
        (al.ItemKind.USER, "go"),
        (al.ItemKind.ASSISTANT, "let me look"),
        (al.ItemKind.TOOL, ""),
        (al.ItemKind.TOOL, ""),
        (al.ItemKind.ASSISTANT, "both done"),
    ]
    assert list(result.items) == list(driver.snapshot().transcript)
    assert [item.text_content for item in result.final_items] == ["both done"]

    ran, denied = result.tool_calls
    assert (ran.call_id, ran.tool_name, ran.input, ran.output, ran.is_error, ran.outcome) == (
        "c1",
        "echo",
        {"value": "edited"},
        "edited",
        False,
        None,
    )
    assert ran.started_at is not None
    assert ran.finished_at is not None
    assert ran.duration is not None
    assert before <= ran.started_at <= ran.finished_at <= time.time()
    assert ran.duration >= 0
    assert (denied.call_id, denied.input, denied.output, denied.is_error, denied.outcome) == (
        "c2",
        {"value": "b"},
        "no",
        True,
        al.tools.ResultOutcome.DENIED,
    )
    assert (denied.started_at, denied.finished_at, denied.duration) == (None, None, None)

    assert [(r.index, r.finish_reason, r.usage, r.model) for r in result.model_calls] == [
        (1, al.FinishReason.TOOL_CALL, U1, "scripted-model"),
        (2, al.FinishReason.COMPLETED, U2, "scripted-model"),
    ]
    assert all(r.duration >= 0 and r.error_kind is None for r in result.model_calls)
    assert result.usage == U1 + U2


async def test_a_turn_result_round_trips_through_the_converter() -> None:
    driver = await approval_driver(two_round_model())
    step = await driver.run_until_blocked()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    step = await driver.run_until_blocked()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    data = al.unstructure(finished.result)
    assert al.structure(data, al.TurnResult) == finished.result


async def test_each_model_call_and_tool_call_is_an_event() -> None:
    recorder = Recorder()
    model = al.testing.ScriptedModel(
        [tool_calls(call("echo", {"value": "x"}, id="c1"), usage=U1), "ok"]
    )
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .observer(recorder)
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)

    started = recorder.of(al.observe.ModelCallStarted)
    assert [
        (e.turn_id, e.index, e.transcript_items, e.tools, e.tools_withheld) for e in started
    ] == [
        ("turn-1", 1, 1, 1, False),
        ("turn-1", 2, 3, 1, False),
    ]
    finished = recorder.of(al.observe.ModelCallFinished)
    assert [(e.index, e.finish_reason, e.usage) for e in finished] == [
        (1, al.FinishReason.TOOL_CALL, U1),
        (2, al.FinishReason.COMPLETED, None),
    ]
    (tool_event,) = recorder.of(al.observe.ToolExecutionFinished)
    assert tool_event.result == al.ToolResultPart("c1", "x")
    (ended,) = recorder.of(al.observe.AgentEnded)
    assert ended == al.observe.AgentEnded("s", "turn-1", al.FinishReason.COMPLETED)
    names = [type(e).__name__ for e in recorder.events]
    assert names.index("TurnFinished") + 1 == names.index("AgentEnded")


async def test_a_tool_error_is_carried_by_its_event() -> None:
    class Boom:
        spec = al.ToolSpec("boom", "Fails.", {"type": "object"})

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            raise ValueError("disk on fire")

    recorder = Recorder()
    model = al.testing.ScriptedModel([tool_calls(call("boom", id="c1")), "sorry"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Boom()))
        .observer(recorder)
        .input([user("go")])
        .build()
    )
    await (await agent.start("s")).run_until_blocked()
    (event,) = recorder.of(al.observe.ToolExecutionFinished)
    assert event.is_error
    assert event.result is not None
    assert event.result.is_error
    assert "disk on fire" in str(event.result.output)


async def test_no_agent_ended_while_input_waits() -> None:
    recorder = Recorder()
    model = al.testing.ScriptedModel(["one", "two"])
    agent = al.Agent.builder().model(model).observer(recorder).input([user("go")]).build()
    driver = await agent.start("s")
    driver.follow_up([user("and then")])
    await driver.next()
    assert recorder.of(al.observe.AgentEnded) == []
    await driver.next()
    assert [e.turn_id for e in recorder.of(al.observe.AgentEnded)] == ["turn-2"]


async def test_no_event_is_built_without_observers(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an event was built with no observer listening")

    for module in (_driver, _machine, _model_io, _observer, _rounds, _tool_io):
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, al.observe.AgentEvent):
                monkeypatch.setattr(module, name, refuse)
    model = al.testing.ScriptedModel(
        [tool_calls(call("echo", id="c1")), fail(al.ProviderError("x", retryable=True)), "ok"]
    )
    driver = await approval_driver(model)
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    failed = await driver.next()
    assert isinstance(failed, al.Finished)
    assert failed.result.finish_reason is al.FinishReason.ERROR
    done = await driver.retry()
    assert isinstance(done, al.Finished)
    assert done.result.finish_reason is al.FinishReason.COMPLETED


async def test_an_interrupted_turn_states_its_reason() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("echo", id="c1"))])
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
    assert isinstance(await driver.next(), al.ApprovalRequest)
    controller.interrupt()
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.metadata["agentloop.interrupt_reason"] == (
        "interrupted while an approval was pending"
    )
    (cancelled,) = step.result.tool_calls
    assert cancelled.outcome is al.tools.ResultOutcome.CANCELLED
