"""run() and continue_from(): whole outcomes over a scripted model."""

from __future__ import annotations

import pytest
from host_support import USAGE, ReadNote, kinds, last_result_text, make_agent, tour_script

import agentloop as al
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.host import RunStopReason, continue_from, run
from agentloop.testing import Reply, call, fail, text, tool_calls

pytestmark = pytest.mark.anyio

TOUR_KINDS = ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]


async def test_run_with_sync_approver_finishes_the_turn() -> None:
    model = al.testing.ScriptedModel(tour_script())
    seen: list[str] = []

    def approve(request: al.ApprovalRequest) -> bool:
        seen.append(f"{request.call_id} {request.summary}")
        return True

    result = await run(make_agent(model), "2 + 40 and my note?", approve=approve)

    assert seen == ["call-2 Read /notes/groceries"]
    assert result.stop_reason is RunStopReason.FINISHED
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert result.final_text == "42, and eggs, flour, milk."
    assert result.usage == al.Usage(input_tokens=30, output_tokens=6)
    assert result.steps == 3
    assert [turn.turn_id for turn in result.turns] == ["turn-1"]
    assert kinds(result.transcript) == TOUR_KINDS
    assert result.pending_approval is None
    al.transcript.validate_transcript(result.transcript)
    model.assert_complete()


async def test_async_approver_can_deny_with_a_reason() -> None:
    model = al.testing.ScriptedModel(tour_script())

    async def approve(request: al.ApprovalRequest) -> al.ApprovalAnswer:
        return al.ApprovalAnswer.deny("not today")

    result = await run(make_agent(model), "q", approve=approve)

    assert result.stop_reason is RunStopReason.FINISHED
    assert last_result_text(result.transcript) == "not today"


async def test_approver_can_patch_the_input() -> None:
    note = ReadNote()
    model = al.testing.ScriptedModel(tour_script())
    decision = al.ApprovalAnswer.approve_with({"name": "todo"})

    result = await run(make_agent(model, note=note), "q", approve=lambda request: decision)

    assert note.inputs == [{"name": "todo"}]
    assert last_result_text(result.transcript) == "no such note"


async def test_approver_returning_something_else_is_refused() -> None:
    model = al.testing.ScriptedModel(tour_script())
    with pytest.raises(al.InvalidInputError) as raised:
        await run(make_agent(model), "q", approve=lambda request: "yes")  # type: ignore[arg-type,return-value]
    assert str(raised.value) == (
        "approve callback: for call-2 (read_note) it returned 'yes'; expected an "
        "ApprovalAnswer (ApprovalAnswer.approve(), .approve_with(input), .deny(reason)) "
        "or a bool"
    )


async def test_without_approver_the_run_stops_and_resumes() -> None:
    model = al.testing.ScriptedModel(tour_script())

    paused = await run(make_agent(model), "q")

    assert paused.stop_reason is RunStopReason.APPROVAL_REQUIRED
    assert paused.pending_approval is not None
    assert paused.pending_approval.call_id == "call-2"
    assert paused.turns == ()
    assert paused.final_text == ""
    assert paused.usage == al.Usage(input_tokens=20, output_tokens=4)
    assert paused.is_paused

    paused.pending_approval.approve()
    resumed = await continue_from(paused)

    assert resumed.stop_reason is RunStopReason.FINISHED
    assert resumed.final_text == "42, and eggs, flour, milk."
    assert resumed.usage == USAGE
    assert resumed.steps == 1
    assert kinds(resumed.transcript) == TOUR_KINDS
    model.assert_complete()


async def test_a_prompt_is_refused_while_an_approval_waits() -> None:
    paused = await run(make_agent(al.testing.ScriptedModel(tour_script())), "q")
    with pytest.raises(al.InvalidStateError) as raised:
        await continue_from(paused, "and more")
    assert str(raised.value) == (
        "continue_from: the run is waiting for approval of call-2; answer it "
        "(result.pending_approval.approve()/deny() or approve=) and resume without a prompt"
    )
    with pytest.raises(al.InvalidStateError) as refused:
        paused.continuation()
    assert str(refused.value) == (
        "cannot build a continuation of a run stopped with approval_required: tool_call(s) "
        "without matching tool_result: call-2; call continue_from(result) to resume the same "
        "driver"
    )


async def test_max_steps_stops_cleanly_and_resumes_with_an_approver() -> None:
    model = al.testing.ScriptedModel(tour_script())

    stopped = await run(make_agent(model), "q", max_steps=1)

    assert stopped.stop_reason is RunStopReason.MAX_STEPS
    assert stopped.steps == 1
    assert stopped.pending_approval is None
    assert kinds(stopped.transcript) == ["system", "user", "assistant", "tool"]

    resumed = await continue_from(stopped, approve=lambda request: True)

    assert resumed.stop_reason is RunStopReason.FINISHED
    assert resumed.steps == 2
    assert resumed.final_text == "42, and eggs, flour, milk."


async def test_continue_from_a_finished_run_sends_the_whole_history() -> None:
    model = al.testing.ScriptedModel(["first answer", "second answer"])
    agent = make_agent(model)

    first = await run(agent, "one", config="chat-1")
    second = await continue_from(first, "two")

    assert second.final_text == "second answer"
    assert second.config.session_id == "chat-1"
    assert kinds(second.transcript) == ["system", "user", "assistant", "user", "assistant"]
    assert [item.text_content for item in model.last_request.transcript] == [
        "You are helpful.",
        "one",
        "first answer",
        "two",
    ]
    assert [config.session_id for config in model.sessions] == ["chat-1", "chat-1"]


async def test_continue_from_with_another_agent() -> None:
    first = await run(make_agent(al.testing.ScriptedModel(["first answer"])), "one")
    other = al.testing.ScriptedModel(["from the other model"])

    second = await continue_from(first, "two", agent=make_agent(other))

    assert second.final_text == "from the other model"
    assert len(other.last_request.transcript) == 4


async def test_continue_from_a_finished_run_needs_a_prompt() -> None:
    first = await run(make_agent(al.testing.ScriptedModel(["done"])), "one")
    with pytest.raises(al.InvalidInputError) as raised:
        await continue_from(first)
    assert str(raised.value) == (
        "continue_from: the run stopped with finished, so there is nothing to resume; "
        "give a prompt to ask again"
    )


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("", "run: the prompt is an empty string; give some text or a list of Items"),
        ([], "run: the prompt is an empty list; give at least one Item"),
        (["hi"], "run: prompt element 0 is str, not an Item"),
    ],
)
async def test_bad_prompts_are_refused(prompt: object, message: str) -> None:
    model = al.testing.ScriptedModel([])
    with pytest.raises(al.InvalidInputError) as raised:
        await run(make_agent(model), prompt)  # type: ignore[arg-type]
    assert str(raised.value) == message
    assert model.requests == []


async def test_max_steps_below_one_is_refused() -> None:
    with pytest.raises(al.InvalidInputError) as raised:
        await run(make_agent(al.testing.ScriptedModel([])), "q", max_steps=0)
    assert str(raised.value) == "run: max_steps must be an int >= 1, got 0"


async def test_items_prompt_and_a_provider_error_ends_the_run_as_a_failed_turn() -> None:
    # Behaviour change (issue 14): a failed model call ends the turn, not the driver.
    model = al.testing.ScriptedModel([fail(al.ProviderError("boom"))])
    result = await run(make_agent(model), [al.Item.text(al.ItemKind.USER, "q")])
    assert result.stop_reason is RunStopReason.FINISHED
    assert result.finish_reason is al.FinishReason.ERROR
    assert result.error is not None
    assert str(result.error) == "boom"
    assert result.error.kind is al.ProviderErrorKind.OTHER
    assert result.final_text == ""
    assert result.driver is not None
    assert result.driver.state is al.DriverState.IDLE
    assert kinds(result.transcript) == ["system", "user"]


async def test_a_cancelled_turn_is_a_finished_run() -> None:
    controller = al.CancellationController()

    class Interrupting:
        spec = al.ToolSpec("stop", "Interrupts the turn.", {"type": "object"})

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            controller.interrupt()
            return "never seen"

    model = al.testing.ScriptedModel([tool_calls(call("stop")), text("unused")])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Interrupting()))
        .cancellation(controller.handle())
        .build()
    )

    result = await run(agent, "q")

    assert result.stop_reason is RunStopReason.FINISHED
    assert result.finish_reason is al.FinishReason.CANCELLED
    al.transcript.validate_transcript(result.transcript)


async def test_an_interrupt_while_the_approver_thinks_cancels_the_turn() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(tour_script())

    def approve(request: al.ApprovalRequest) -> bool:
        controller.interrupt()  # e.g. Ctrl-C at the approval prompt
        return True

    agent = make_agent(model, cancellation=controller.handle())
    result = await run(agent, "q", approve=approve)

    assert result.stop_reason is RunStopReason.FINISHED
    assert result.finish_reason is al.FinishReason.CANCELLED
    assert last_result_text(result.transcript) == (
        "cancelled: the turn was interrupted before this call was approved"
    )
    assert result.transcript[-1].metadata["agentloop.interrupt_stage"] == "approval"


def _four_rounds() -> list[Reply | str]:
    return [tool_calls(call("add", {"a": n, "b": 1})) for n in range(4)] + ["done"]


@pytest.mark.parametrize("max_steps", [1, 2, 3, 4, 5, 6])
async def test_run_counts_every_pause_as_a_step_like_next_does(max_steps: int) -> None:
    # run() goes through AfterToolResult pauses inside the driver; where it
    # stops, with which step count and state, is what max_steps next() calls give.
    by_run = await run(
        make_agent(al.testing.ScriptedModel(_four_rounds())), "q", max_steps=max_steps
    )
    driver = await make_agent(al.testing.ScriptedModel(_four_rounds())).start("run")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "q")])
    steps = [await driver.next() for _ in range(min(max_steps, 5))]

    finished = max_steps >= 5
    assert by_run.steps == len(steps) == min(max_steps, 5)
    assert by_run.stop_reason is (RunStopReason.FINISHED if finished else RunStopReason.MAX_STEPS)
    assert [type(step).__name__ for step in steps] == ["AfterToolResult"] * min(max_steps, 4) + (
        ["Finished"] if finished else []
    )
    assert by_run.driver is not None
    assert by_run.driver.state is driver.state
    assert by_run.driver.state is (
        al.DriverState.IDLE if finished else al.DriverState.AFTER_TOOL_RESULT
    )
    # the same items (created_at differs between the two sessions)
    assert [(i.kind, i.parts) for i in by_run.transcript] == [
        (i.kind, i.parts) for i in driver.snapshot().transcript
    ]
    assert len(by_run.transcript) == 2 + 2 * min(max_steps, 4) + (1 if finished else 0)
