"""Driver behaviour beyond the reference: approvals, state errors, failures, repairs."""

from __future__ import annotations

import pytest
from loop_support import ApproveFsReads, EchoTool, KeepLast, Recorder, tool_texts, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio


def two_call_model(final: str = "done") -> al.testing.ScriptedModel:
    def answer(request: al.model.TurnRequest) -> Reply | str:
        if request.transcript[-1].kind is al.ItemKind.TOOL:
            return final
        return tool_calls(
            call("echo", {"value": "a"}, id="call-1"), call("echo", {"value": "b"}, id="call-2")
        )

    return al.testing.ScriptedModel(answer)


async def approval_driver(model: al.testing.ScriptedModel | None = None) -> al.LoopDriver:
    agent = (
        al.Agent.builder()
        .model(model or two_call_model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
        .input([user("go")])
        .build()
    )
    return await agent.start("s")


async def test_deny_with_reason_becomes_an_error_result_the_model_sees() -> None:
    model = two_call_model()
    driver = await approval_driver(model)
    first = await driver.next()
    assert isinstance(first, al.ApprovalRequest)
    first.deny("policy says no")
    second = await driver.next()
    assert isinstance(second, al.ApprovalRequest)
    assert second.call_id == "call-2"
    second.deny()
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert tool_texts(model.requests[-1].transcript) == [
        ("call-1", "policy says no", True),
        ("call-2", "approval denied", True),
    ]
    results = [r for item in driver.snapshot().transcript for r in item.tool_results()]
    assert [al.tools.result_outcome(r) for r in results] == [al.tools.ResultOutcome.DENIED] * 2


async def test_approvals_resolve_in_any_order_and_mixed() -> None:
    model = two_call_model()
    driver = await approval_driver(model)
    first = await driver.next()
    second = await driver.next()
    assert isinstance(first, al.ApprovalRequest)
    assert isinstance(second, al.ApprovalRequest)
    driver.answer_approval_for("call-2", al.ApprovalAnswer.approve_with({"value": "B!"}))
    driver.answer_approval_for("call-1", al.ApprovalAnswer.deny("no"))
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.final_items[0].text_content == "done"
    assert tool_texts(driver.snapshot().transcript) == [
        ("call-1", "no", True),
        ("call-2", "B!", False),
    ]
    al.transcript.validate_transcript(model.requests[-1].transcript)


async def test_submit_input_while_approval_pending_raises_and_changes_nothing() -> None:
    driver = await approval_driver()
    pending = await driver.next()
    assert isinstance(pending, al.ApprovalRequest)
    before = driver.snapshot()
    with pytest.raises(al.InvalidStateError) as info:
        driver.submit_input([user("hello?")])
    assert str(info.value) == (
        "cannot submit input in state AWAITING_APPROVAL: call-1, call-2 is unresolved; "
        "approve() or deny() it first, then call next()"
    )
    assert driver.snapshot() == before
    assert driver.state is al.DriverState.AWAITING_APPROVAL
    pending.approve()  # still resolvable


async def test_unknown_call_id_double_answer_and_ambiguous_resolve_raise() -> None:
    driver = await approval_driver()
    await driver.next()
    await driver.next()
    with pytest.raises(al.InvalidStateError, match="no approval is pending for it"):
        driver.answer_approval_for("call-9", al.ApprovalAnswer.approve())
    with pytest.raises(al.InvalidStateError, match="2 are pending \\(call-1, call-2\\)"):
        driver.answer_approval(al.ApprovalAnswer.approve())
    driver.answer_approval_for("call-1", al.ApprovalAnswer.approve())
    with pytest.raises(al.InvalidStateError, match="it was already answered \\(approve\\)"):
        driver.answer_approval_for("call-1", al.ApprovalAnswer.deny())
    driver.answer_approval(al.ApprovalAnswer.approve())  # exactly one left: call-2
    assert isinstance(await driver.next(), al.Finished)
    with pytest.raises(al.InvalidStateError, match="no approval request is pending"):
        driver.answer_approval_for("call-1", al.ApprovalAnswer.approve())


async def test_resolve_rejects_a_non_decision() -> None:
    driver = await approval_driver()
    await driver.next()
    with pytest.raises(al.InvalidInputError, match="expects an ApprovalAnswer"):
        driver.answer_approval_for("call-1", "yes")  # type: ignore[arg-type]


async def test_submit_input_rejects_bad_items_and_queues_nothing() -> None:
    driver = await al.Agent.builder().model(al.testing.ScriptedModel([])).build().start("s")
    with pytest.raises(al.InvalidInputError, match="element 1 is str"):
        driver.submit_input([user("ok"), "not an item"])  # type: ignore[list-item]
    with pytest.raises(al.InvalidInputError, match="holds a tool_call or tool_result part"):
        driver.submit_input([al.Item(al.ItemKind.USER, [al.ToolResultPart("c", "x")])])
    with pytest.raises(al.InvalidInputError, match="got a single Item"):
        driver.submit_input(user("x"))  # type: ignore[arg-type]
    assert driver.snapshot().pending_input == ()


def test_builder_requires_a_model_and_a_valid_transcript() -> None:
    with pytest.raises(al.InvalidStateError, match=r"no model adapter was given; call \.model"):
        al.Agent.builder().build()
    broken = [al.Item(al.ItemKind.ASSISTANT, [al.ToolCallPart("c1", "echo", {})])]
    with pytest.raises(al.InvalidInputError, match="without matching tool_result: c1"):
        al.Agent.builder().model(al.testing.ScriptedModel([])).transcript(broken).build()


async def test_awaiting_input_without_input_and_submit_through_interrupt() -> None:
    model = al.testing.ScriptedModel(["hi there"])
    agent = (
        al.Agent.builder()
        .model(model)
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "You are helpful.")])
        .build()
    )
    driver = await agent.start(al.SessionConfig("s"))
    step = await driver.next()
    assert isinstance(step, al.AwaitingInput)
    step.submit([user("hello")])
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.turn_id == "turn-1"
    assert [i.kind for i in model.requests[0].transcript] == [
        al.ItemKind.SYSTEM,
        al.ItemKind.USER,
    ]


async def test_stream_without_result_ends_the_turn_with_a_protocol_error() -> None:
    # Behaviour change (issue 14): a broken model stream ends the turn, not the driver.
    model = al.testing.ScriptedModel([Reply.raw([al.BeginPart("p", al.PartKind.TEXT)]), "fixed"])
    recorder = Recorder()
    agent = al.Agent.builder().model(model).observer(recorder).input([user("x")]).build()
    driver = await agent.start("s")
    step = await driver.next()
    assert isinstance(step, al.Finished)
    result = step.result
    assert result.finish_reason is al.FinishReason.ERROR
    assert isinstance(result.error, al.ModelProtocolError)
    assert str(result.error) == (
        "model stream ended without a ModelTurnResult: every model turn must end with one "
        "(check the adapter)"
    )
    assert result.metadata == {"agentloop.error_kind": "invalid_response"}
    assert driver.state is al.DriverState.IDLE
    assert recorder.of(al.observe.RunFailed) == []
    (failed,) = recorder.of(al.observe.ModelCallFailed)
    assert failed.error_kind == "invalid_response"
    retried = await driver.retry()
    assert isinstance(retried, al.Finished)
    assert retried.result.final_items[0].text_content == "fixed"
    assert list(model.requests[0].transcript) == list(model.requests[1].transcript)


async def test_a_call_id_repeating_an_earlier_round_gets_a_fresh_id() -> None:
    model = al.testing.ScriptedModel(
        [tool_calls(call("echo", id="c1")), tool_calls(call("echo", id="c1")), "done"]
    )
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .input([user("x")])
        .build()
    )
    driver = await agent.start("s")
    assert isinstance(await driver.next(), al.AfterToolResult)
    assert isinstance(await driver.next(), al.AfterToolResult)
    final = await driver.next()
    assert isinstance(final, al.Finished)
    calls = [c for item in driver.snapshot().transcript for c in item.tool_calls()]
    assert [c.id for c in calls] == ["c1", "c1_2"]
    assert calls[1].metadata == {"agentloop.provider_call_id": "c1"}
    assert tool_texts(driver.snapshot().transcript) == [
        ("c1", "pong", False),
        ("c1_2", "pong", False),
    ]
    al.transcript.validate_transcript(driver.snapshot().transcript)


async def test_a_call_id_repeated_within_one_response_answers_the_repeat_with_an_error() -> None:
    model = al.testing.ScriptedModel(
        [
            tool_calls(
                call("echo", {"value": "a"}, id="c1"), call("echo", {"value": "b"}, id="c1")
            ),
            "done",
        ]
    )
    tool = EchoTool()
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .input([user("x")])
        .build()
    )
    driver = await agent.start("s")
    assert isinstance(await driver.next(), al.AfterToolResult)
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert tool.inputs == [{"value": "a"}]
    assert tool_texts(driver.snapshot().transcript) == [
        ("c1", "a", False),
        (
            "c1_2",
            "not run: this call repeated the id 'c1' of another call in the same response; "
            "call ids must be unique, so it was given a new id and not run",
            True,
        ),
    ]
    al.transcript.validate_transcript(driver.snapshot().transcript)


async def test_a_non_assistant_item_from_the_model_ends_the_turn_as_a_protocol_error() -> None:
    bad = al.model.ModelTurnResult(al.FinishReason.COMPLETED, (user("I am the user now"),))
    model = al.testing.ScriptedModel([Reply.raw([bad]), "ok"])
    agent = al.Agent.builder().model(model).input([user("x")]).build()
    driver = await agent.start("s")
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.ERROR
    assert isinstance(step.result.error, al.ModelProtocolError)
    assert "model output item 0 is a user item" in str(step.result.error)
    assert [i.kind for i in driver.snapshot().transcript] == [al.ItemKind.USER]
    again = await driver.retry()
    assert isinstance(again, al.Finished)
    assert again.result.finish_reason is al.FinishReason.COMPLETED


async def test_mutator_that_breaks_pairs_raises_mutator_error_naming_the_call() -> None:
    model = al.testing.ScriptedModel([tool_calls(call("echo", id="call-7")), "done"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .mutator(KeepLast(1))
        .input([user("x")])
        .build()
    )
    driver = await agent.start("s")
    assert isinstance(await driver.next(), al.AfterToolResult)
    with pytest.raises(al.MutatorError) as info:
        await driver.next()
    assert str(info.value) == (
        "mutator pass at after_tool_result broke the transcript: orphaned tool_result for "
        "call call-7: no earlier tool_call has this id"
    )


class Exploding:
    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        raise RuntimeError("boom")


async def test_mutator_exception_is_wrapped() -> None:
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(["x"]))
        .mutator(Exploding())
        .input([user("x")])
        .build()
    )
    driver = await agent.start("s")
    with pytest.raises(
        al.MutatorError, match="mutator 'Exploding' failed at after_turn_ended: RuntimeError: boom"
    ):
        await driver.next()


def test_validator_rejects_unanswered_and_duplicate_calls() -> None:
    call_item = al.Item(al.ItemKind.ASSISTANT, [al.ToolCallPart("c1", "echo", {})])
    with pytest.raises(al.TranscriptError, match="without matching tool_result: c1") as info:
        al.transcript.validate_transcript([call_item])
    assert info.value.violation == "unanswered"
    with pytest.raises(al.TranscriptError, match="duplicate tool_call id c1"):
        al.transcript.validate_transcript([call_item, call_item])
    ok = [call_item, al.Item(al.ItemKind.TOOL, [al.ToolResultPart("c1", "x")])]
    al.transcript.validate_transcript(ok)
    assert al.transcript.find_violation(ok) is None


async def test_tool_specs_reach_the_model_sorted_by_name() -> None:
    class Named:
        def __init__(self, name: str) -> None:
            self.spec = al.ToolSpec(name, name)

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            return "x"

    registry = al.ToolRegistry()
    for name in ("zeta", "alpha", "mid"):
        registry.with_tool(Named(name))
    model = al.testing.ScriptedModel(["ok"])
    agent = al.Agent.builder().model(model).add_tool_source(registry).input([user("x")]).build()
    await (await agent.start("s")).next()
    assert [s.name for s in model.requests[0].available_tools] == ["alpha", "mid", "zeta"]


async def test_first_source_wins_a_name_clash() -> None:
    class Named:
        def __init__(self, answer: str) -> None:
            self.spec = al.ToolSpec("echo", answer)
            self.answer = answer

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            return self.answer

    model = al.testing.ScriptedModel([tool_calls(call("echo", id="c1")), "done"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Named("primary")))
        .add_tool_source(al.ToolRegistry().with_tool(Named("secondary")))
        .input([user("x")])
        .build()
    )
    driver = await agent.start("s")
    await driver.run_until_blocked()
    assert tool_texts(driver.snapshot().transcript) == [("c1", "primary", False)]
    assert [s.description for s in model.requests[0].available_tools] == ["primary"]


async def test_usage_is_summed_per_turn_and_stamped_on_assistant_items() -> None:
    usage = al.Usage(input_tokens=10, output_tokens=2)
    model = al.testing.ScriptedModel([tool_calls(call("echo", id="c1"), usage=usage), "done"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .input([user("x")])
        .build()
    )
    driver = await agent.start("s")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert step.result.usage == usage
    assert driver.usage == usage
    assistant = driver.snapshot().transcript[1]
    assert assistant.usage == usage
    assert assistant.finish_reason is al.FinishReason.TOOL_CALL


async def test_no_observer_events_are_built_without_observers() -> None:
    # Event construction is guarded by `if self._observers`; constructing an event
    # here would raise, so a run without observers proves none were built.
    original = al.observe.ContentDelta.__init__

    def forbidden(self: object, *args: object, **kwargs: object) -> None:
        raise AssertionError("an event was built with no observer registered")

    al.observe.ContentDelta.__init__ = forbidden  # type: ignore[method-assign]
    try:
        driver = await al.Agent.builder().model(al.testing.ScriptedModel(["hi"])).build().start("s")
        driver.submit_input([user("x")])
        assert isinstance(await driver.next(), al.Finished)
    finally:
        al.observe.ContentDelta.__init__ = original  # type: ignore[method-assign]


def test_scripted_model_assert_complete_fails_when_replies_are_left() -> None:
    model = al.testing.ScriptedModel(["a", "b"])
    with pytest.raises(AssertionError, match="2 of 2 scripted replies were never used"):
        model.assert_complete()
