"""Ports of every scenario in the reference crate's loop test module (seed 004).

Each test names the reference test it covers. Scenarios of the async task
manager live in tests/tasks/.
"""

from __future__ import annotations

import anyio
import pytest
from loop_support import (
    ApproveFsReads,
    DenyFsReads,
    DynamicTool,
    EchoTool,
    KeepLast,
    PointRecorder,
    Recorder,
    user,
)

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, hang, tool_calls

pytestmark = pytest.mark.anyio


def fake_model() -> al.testing.ScriptedModel:
    """Like the reference FakeAdapter: call echo, then answer with what the tool said."""

    def answer(request: al.model.TurnRequest) -> Reply | str:
        results = [r for item in request.transcript for r in item.tool_results()]
        if results:
            return f"tool said: {results[-1].output}"
        return tool_calls(call("echo", {}))

    return al.testing.ScriptedModel(answer)


async def start(builder: al.AgentBuilder, session: str = "session-1") -> al.LoopDriver:
    return await builder.build().start(al.SessionConfig(session))


async def test_loop_continues_after_completed_tool_call() -> None:
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
    )
    driver = await start(builder)
    driver.submit_input([user("ping")])
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    assert [item.text_content for item in step.result.final_items] == ["tool said: pong"]


async def test_post_tool_continuation_reports_after_tool_result_mutation_point() -> None:
    points = PointRecorder()
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .mutator(points)
    )
    driver = await start(builder)
    driver.submit_input([user("ping")])
    await driver.run_until_blocked()
    assert points.points == [
        al.transcript.MutationPoint.AFTER_TURN_ENDED,
        al.transcript.MutationPoint.AFTER_TOOL_RESULT,
    ]


def test_pending_input_requires_input_bearing_tail_role() -> None:
    assert not al.transcript.has_pending_input([])
    for kind in (al.ItemKind.SYSTEM, al.ItemKind.DEVELOPER, al.ItemKind.CONTEXT):
        assert not al.transcript.has_pending_input([al.Item.text(kind, "x")])
    assert not al.transcript.has_pending_input([al.Item.text(al.ItemKind.ASSISTANT, "x")])
    assert al.transcript.has_pending_input([user("x")])
    assert al.transcript.has_pending_input([al.Item.notification("background update")])
    result = al.ToolResultPart("call-test", "ok")
    assert al.transcript.has_pending_input([al.Item(al.ItemKind.TOOL, [result])])


class DropTrailingUser:
    name = "drop-trailing-user"

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        if cursor and cursor[-1].kind is al.ItemKind.USER:
            cursor.pop()


async def test_drive_does_not_dispatch_without_valid_trailing_input() -> None:
    model = al.testing.ScriptedModel(["never used"])
    builder = (
        al.Agent.builder()
        .model(model)
        .mutator(DropTrailingUser())
        .transcript([user("kickoff"), al.Item.text(al.ItemKind.ASSISTANT, "prior reply")])
    )
    driver = await start(builder, "session-no-valid-input")
    driver.submit_input([user("follow up")])
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    # The turn's input was added, then the mutator removed it: no model call.
    assert [item.text_content for item in step.result.items] == ["follow up"]
    assert step.result.final_items == ()
    assert model.requests == []


async def test_loop_uses_injected_permission_checker() -> None:
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(DenyFsReads())
    )
    driver = await start(builder, "session-2")
    driver.submit_input([user("ping")])
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert step.result.final_items[0].text_content == (
        "tool said: tool permission denied: reads are not allowed here (code: path_not_allowed)"
    )


async def test_loop_can_cancel_a_turn_and_continue_after_new_input() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([hang(), "done"])
    builder = al.Agent.builder().model(model).cancellation(controller.handle())
    driver = await start(builder, "session-cancel")
    driver.submit_input([user("do the long task")])
    steps: list[al.Step] = []

    async def drive() -> None:
        steps.append(await driver.next())

    async with anyio.create_task_group() as group:
        group.start_soon(drive)
        await anyio.wait_all_tasks_blocked()
        controller.interrupt()
    (cancelled,) = steps
    assert isinstance(cancelled, al.Finished)
    assert cancelled.result.finish_reason is al.FinishReason.CANCELLED
    assert [item.kind for item in cancelled.result.items] == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
    ]
    assert cancelled.result.items[-1].metadata["agentloop.interrupted"] is True

    driver.submit_input([user("try again")])
    retry = await driver.next()
    assert isinstance(retry, al.Finished)
    assert retry.result.finish_reason is al.FinishReason.COMPLETED
    model.assert_complete()


async def test_loop_resumes_after_approved_tool_request() -> None:
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
    )
    driver = await start(builder, "session-approval")
    driver.submit_input([user("ping")])
    first = await driver.next()
    assert isinstance(first, al.ApprovalRequest)
    assert first.task_id is None  # not started: nothing runs before approval
    assert first.id == f"approval:{first.call_id}"
    assert first.request_kind == "filesystem.read"
    first.approve()
    second = await driver.next()
    assert isinstance(second, al.Finished)
    assert second.result.final_items[0].text_content == "tool said: pong"


async def test_loop_resumes_with_patched_input_on_approval() -> None:
    echo = EchoTool()
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(echo))
        .permissions(ApproveFsReads())
    )
    driver = await start(builder, "session-approval-patched")
    driver.submit_input([user("ping")])
    pending = await driver.next()
    assert isinstance(pending, al.ApprovalRequest)
    pending.approve_with({"value": "patched"})
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.final_items[0].text_content == "tool said: patched"
    assert echo.inputs == [{"value": "patched"}]
    calls = [c for item in driver.snapshot().transcript for c in item.tool_calls()]
    assert [c.input for c in calls] == [{}]  # the transcript keeps the model's input


async def test_loop_tracks_multiple_pending_approvals_by_call_id() -> None:
    def answer(request: al.model.TurnRequest) -> Reply | str:
        if request.transcript[-1].kind is al.ItemKind.TOOL:
            return "both approvals finished"
        return tool_calls(call("echo", {}, id="call-1"), call("echo", {}, id="call-2"))

    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
    )
    driver = await start(builder, "session-dual-approval")
    driver.submit_input([user("run both approvals")])
    pending_first = await driver.next()
    assert isinstance(pending_first, al.ApprovalRequest)
    assert pending_first.call_id == "call-1"
    pending_second = await driver.next()
    assert isinstance(pending_second, al.ApprovalRequest)
    assert pending_second.call_id == "call-2"

    pending_second.approve()
    again = await driver.next()
    assert isinstance(again, al.ApprovalRequest)
    assert again.call_id == "call-1"

    pending_first.approve()
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.finish_reason is al.FinishReason.COMPLETED
    assert final.result.final_items[0].text_content == "both approvals finished"


async def test_loop_compacts_transcript_before_new_turns() -> None:
    recorder = Recorder()
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(["one", "two"]))
        .mutator(KeepLast(1))
        .observer(recorder)
    )
    driver = await start(builder, "session-4")
    for text in ("first", "second"):
        driver.submit_input([user(text)])
        await driver.next()
    finished = recorder.of(al.observe.MutationFinished)
    assert [(event.mutator, event.point, event.dirty) for event in finished] == [
        ("keep-last", "after_turn_ended", False),
        ("keep-last", "after_turn_ended", True),
    ]
    assert [item.text_content for item in driver.snapshot().transcript] == ["second", "two"]


def test_transcript_validation_rejects_orphaned_tool_result() -> None:
    items = [al.Item(al.ItemKind.TOOL, [al.ToolResultPart("call-1", "result")])]
    with pytest.raises(al.TranscriptError, match="orphaned tool_result for call call-1") as info:
        al.transcript.validate_transcript(items)
    assert info.value.violation == "orphaned"
    assert info.value.call_ids == ("call-1",)


def test_transcript_validation_rejects_duplicate_tool_result() -> None:
    items = [
        al.Item(al.ItemKind.ASSISTANT, [al.ToolCallPart("call-1", "lookup", {})]),
        al.Item(al.ItemKind.TOOL, [al.ToolResultPart("call-1", "result")]),
        al.Item(al.ItemKind.TOOL, [al.ToolResultPart("call-1", "again")]),
    ]
    with pytest.raises(al.TranscriptError, match="duplicate tool_result for call call-1"):
        al.transcript.validate_transcript(items)


async def test_loop_refreshes_tool_specs_each_turn() -> None:
    tool = DynamicTool()
    model = al.testing.ScriptedModel(["a", "b"])
    builder = al.Agent.builder().model(model).add_tool_source(al.ToolRegistry().with_tool(tool))
    driver = await start(builder)
    for text in ("first", "second"):
        driver.submit_input([user(text)])
        await driver.next()
        tool.version = 2
    seen = [[spec.description for spec in r.available_tools] for r in model.requests]
    assert seen == [["dynamic version 1"], ["dynamic version 2"]]


async def test_loop_emits_catalog_change_and_uses_updated_specs_next_turn() -> None:
    registry = al.ToolRegistry("mcp:mock")
    recorder = Recorder()
    model = al.testing.ScriptedModel(["a", "b"])
    builder = al.Agent.builder().model(model).add_tool_source(registry).observer(recorder)
    driver = await start(builder, "session-catalog-events")
    driver.submit_input([user("first")])
    await driver.next()
    registry.add(DynamicTool())
    driver.submit_input([user("second")])
    await driver.next()
    assert [[s.name for s in r.available_tools] for r in model.requests] == [[], ["dynamic"]]
    assert recorder.of(al.observe.ToolCatalogChanged) == [
        al.observe.ToolCatalogChanged("mcp:mock", ("dynamic",), (), ())
    ]


async def test_loop_passes_session_default_and_next_turn_cache_requests() -> None:
    model = al.testing.ScriptedModel(["a", "b", "c"])
    default = al.model.PromptCacheRequest.best_effort(al.model.AutomaticCache()).with_retention(
        al.model.PromptCacheRetention.SHORT
    )
    override = al.model.PromptCacheRequest.required(al.model.ExplicitCache([al.model.AfterItem(0)]))
    agent = al.Agent.builder().model(model).build()
    driver = await agent.start(al.SessionConfig("session-cache", cache=default))
    driver.submit_input([user("first")])
    await driver.next()
    driver.set_next_turn_cache(override)
    driver.submit_input([user("second")])
    await driver.next()
    driver.submit_input([user("third")])
    await driver.next()
    assert [r.cache for r in model.requests] == [default, override, default]


async def test_loop_yields_after_tool_result_between_rounds() -> None:
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
    )
    driver = await start(builder, "yield-session")
    driver.submit_input([user("ping")])
    step = await driver.next()
    assert isinstance(step, al.AfterToolResult)
    assert step.session_id == "yield-session"
    assert step.transcript_len == 3
    assert step.is_blocking is False
    step.submit([user("also: report back")])
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.finish_reason is al.FinishReason.COMPLETED
    kinds = [item.kind for item in driver.snapshot().transcript]
    assert kinds == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        al.ItemKind.TOOL,
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
    ]
    assert driver.snapshot().transcript[3].text_content == "also: report back"


async def test_observers_see_full_tool_round() -> None:
    recorder = Recorder()
    builder = (
        al.Agent.builder()
        .model(fake_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .observer(recorder)
        .transcript_observer(recorder)
    )
    driver = await start(builder, "observer-session")
    driver.submit_input([user("ping")])
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    (requested,) = recorder.of(al.observe.ToolCallRequested)
    (received,) = recorder.of(al.observe.ToolResultReceived)
    assert received.result.call_id == requested.call.id
    assert received.result.is_error is False
    assert [item.kind for item in recorder.items] == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        al.ItemKind.TOOL,
        al.ItemKind.ASSISTANT,
    ]
    assert recorder.items == list(driver.snapshot().transcript)


def test_convenience_cache_builders_construct_expected_defaults() -> None:
    cache = (
        al.model.PromptCacheRequest.automatic()
        .with_retention(al.model.PromptCacheRetention.SHORT)
        .with_key("workspace:demo")
    )
    session = al.SessionConfig("demo").with_cache(cache)
    assert session.session_id == "demo"
    assert session.cache == cache
    explicit = al.model.PromptCacheRequest.explicit(
        [al.model.AfterTools(), al.model.AfterItem(2), al.model.AfterPart(3, 1)]
    )
    assert explicit.mode is al.model.PromptCacheMode.BEST_EFFORT
    assert explicit.strategy == al.model.ExplicitCache(
        (al.model.AfterTools(), al.model.AfterItem(2), al.model.AfterPart(3, 1))
    )
    assert al.model.PromptCacheRequest.disabled().is_enabled is False
    assert (
        al.model.PromptCacheRequest.automatic_required().mode is al.model.PromptCacheMode.REQUIRED
    )
