"""stream(): order, live tokens, back-pressure, inline approvals, early exit, errors."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from host_support import kinds, make_agent, tour_script

import agentloop as al
import agentloop.observe
import agentloop.testing
import agentloop.transcript
from agentloop.host import EventOrStep, RunStopReason, stream
from agentloop.testing import call, fail, hang, tool_calls

pytestmark = pytest.mark.anyio

TOUR_ORDER = [
    "RunStarted",
    "TurnStarted",
    "ModelCallStarted",
    "ToolCallRequested",
    "ModelCallFinished",
    "ToolExecutionStarted",
    "ToolExecutionFinished",
    "ToolResultReceived",
    "AfterToolResult",
    "ModelCallStarted",
    "ToolCallRequested",
    "ModelCallFinished",
    "ApprovalRequested",
    "ApprovalRequest",
    "ApprovalAnswered",
    "ToolExecutionStarted",
    "ToolExecutionFinished",
    "ToolResultReceived",
    "ModelCallStarted",
    "ContentDelta",
    "ContentDelta",
    "ContentDelta",
    "ContentDelta",
    "UsageUpdated",
    "ModelCallFinished",
    "TurnFinished",
    "AgentEnded",
    "Finished",
]


class Exploding:
    """A mutator with a bug: fails the driver (not a provider error)."""

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        raise RuntimeError("bug")


def names(items: list[EventOrStep]) -> list[str]:
    return [type(item).__name__ for item in items]


async def test_every_event_and_step_in_order() -> None:
    model = al.testing.ScriptedModel(tour_script())
    seen: list[EventOrStep] = []
    async with stream(make_agent(model), "q", approve=lambda request: True) as events:
        async for item in events:
            seen.append(item)
        result = await events.result()

    assert names(seen) == TOUR_ORDER
    tokens = [
        item.delta.text
        for item in seen
        if isinstance(item, al.observe.ContentDelta) and isinstance(item.delta, al.AppendText)
    ]
    assert tokens == ["42, and ", "eggs, flour, milk."]
    assert result.stop_reason is RunStopReason.FINISHED
    assert result.final_text == "42, and eggs, flour, milk."
    assert result.usage == al.Usage(input_tokens=30, output_tokens=6)


async def test_the_consumer_can_answer_an_approval_inline() -> None:
    model = al.testing.ScriptedModel(tour_script())
    async with stream(make_agent(model), "q") as events:
        async for item in events:
            if isinstance(item, al.ApprovalRequest):
                item.deny("the consumer said no")
        result = await events.result()

    assert result.stop_reason is RunStopReason.FINISHED
    results = [part for item in result.transcript for part in item.tool_results()]
    assert results[-1].output == "the consumer said no"


async def test_an_unanswered_approval_stops_the_stream() -> None:
    model = al.testing.ScriptedModel(tour_script())
    async with stream(make_agent(model), "q") as events:
        seen = [item async for item in events]
        result = await events.result()

    assert names(seen)[-1] == "ApprovalRequest"
    assert result.stop_reason is RunStopReason.APPROVAL_REQUIRED
    assert result.pending_approval is not None
    assert result.pending_approval.call_id == "call-2"


async def test_the_approver_runs_after_the_consumer_caught_up() -> None:
    model = al.testing.ScriptedModel(tour_script())
    log: list[str] = []

    def approve(request: al.ApprovalRequest) -> bool:
        log.append("approve")
        return True

    async with stream(make_agent(model), "q", approve=approve, buffer_size=100) as events:
        async for item in events:
            log.append(type(item).__name__)
            await anyio.lowlevel.checkpoint()  # a consumer that yields while it renders

    assert log.index("approve") == log.index("ApprovalRequest") + 1


async def test_tokens_arrive_while_the_model_is_still_streaming() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(
        [hang(al.BeginPart("text-0", al.PartKind.TEXT), al.AppendText("text-0", "Once"))]
    )
    agent = make_agent(model, cancellation=controller.handle())
    async with stream(agent, "a long poem") as events:
        async for item in events:
            if isinstance(item, al.observe.ContentDelta) and isinstance(item.delta, al.AppendText):
                controller.interrupt()  # the model is hanging: this token came live
        result = await events.result()

    assert result.stop_reason is RunStopReason.FINISHED
    assert result.finish_reason is al.FinishReason.CANCELLED
    assert kinds(result.transcript) == ["system", "user", "assistant"]
    assert result.transcript[-1].metadata["agentloop.interrupt_stage"] == "model"


async def test_a_slow_consumer_holds_the_loop_back() -> None:
    rounds = 5
    model = al.testing.ScriptedModel(
        [tool_calls(call("add", {"a": n, "b": 1})) for n in range(rounds)] + ["done"]
    )
    async with stream(make_agent(model), "q", buffer_size=1) as events:
        await anyio.wait_all_tasks_blocked()
        # The producer is parked on the full channel: one model call, no more.
        assert len(model.requests) == 1
        first = await events.__anext__()
        await anyio.wait_all_tasks_blocked()
        assert type(first).__name__ == "RunStarted"
        assert len(model.requests) == 1
        rest = [item async for item in events]
        result = await events.result()

    assert result.steps == rounds + 1
    assert names(rest).count("AfterToolResult") == rounds
    # At most one step waited behind the channel: the last one's seven events
    # (model call started, three deltas, model call finished, turn finished,
    # agent ended) and the step.
    assert events.peak_overflow == 8


async def test_leaving_early_cancels_the_turn_and_keeps_the_transcript_valid() -> None:
    model = al.testing.ScriptedModel(
        [hang(al.BeginPart("text-0", al.PartKind.TEXT), al.AppendText("text-0", "Once"))]
    )
    async with stream(make_agent(model), "q") as events:
        async for item in events:
            if isinstance(item, al.observe.ContentDelta):
                break
    driver = events.driver
    assert driver is not None
    assert driver.state is al.DriverState.IDLE
    transcript = driver.snapshot().transcript
    assert kinds(transcript) == ["system", "user", "assistant"]
    assert transcript[-1].metadata["agentloop.interrupt_stage"] == "host"
    al.transcript.validate_transcript(transcript)
    with pytest.raises(al.InvalidStateError, match="the run did not finish"):
        await events.result()


async def test_a_provider_error_is_a_failed_turn_in_the_stream() -> None:
    # Behaviour change (issue 14): the turn ends with ERROR; nothing is raised.
    model = al.testing.ScriptedModel([fail(al.ProviderError("boom", retryable=True))])
    seen: list[EventOrStep] = []
    async with stream(make_agent(model), "q") as events:
        async for item in events:
            seen.append(item)
        result = await events.result()
    assert names(seen) == [
        "RunStarted",
        "TurnStarted",
        "ModelCallStarted",
        "ModelCallFailed",
        "TurnFinished",
        "AgentEnded",
        "Finished",
    ]
    failed = seen[3]
    assert isinstance(failed, al.observe.ModelCallFailed)
    assert (failed.turn_id, failed.index, failed.error_kind, failed.message) == (
        "turn-1",
        1,
        "retryable",
        "boom",
    )
    assert result.finish_reason is al.FinishReason.ERROR
    assert result.error is not None
    assert result.error.retryable


async def test_errors_that_fail_the_driver_propagate_from_the_iteration() -> None:
    model = al.testing.ScriptedModel(["never"])
    seen: list[EventOrStep] = []

    async def consume() -> None:
        async with stream(make_agent(model, mutator=Exploding()), "q") as events:
            async for item in events:
                seen.append(item)

    with pytest.raises(al.MutatorError, match="mutator 'Exploding' failed"):
        await consume()
    assert names(seen)[-1] == "RunFailed"


async def test_errors_propagate_on_exit_when_nobody_iterated() -> None:
    model = al.testing.ScriptedModel(["never"])

    async def ignore() -> None:
        async with stream(make_agent(model, mutator=Exploding()), "q"):
            await anyio.wait_all_tasks_blocked()

    with pytest.raises(al.MutatorError, match="mutator 'Exploding' failed"):
        await ignore()


async def test_result_drains_unread_events() -> None:
    model = al.testing.ScriptedModel(["hello"])
    async with stream(make_agent(model), "q", buffer_size=1) as events:
        result = await events.result()
    assert result.final_text == "hello"


async def test_iterating_outside_the_block_is_refused() -> None:
    events = stream(make_agent(al.testing.ScriptedModel([])), "q")
    with pytest.raises(al.InvalidStateError) as raised:
        await events.__anext__()
    assert str(raised.value) == (
        "cannot iterate a stream outside its block: use "
        "'async with agentloop.stream(...) as events: async for event in events'"
    )


def test_bad_buffer_size_is_refused() -> None:
    with pytest.raises(al.InvalidInputError) as raised:
        stream(make_agent(al.testing.ScriptedModel([])), "q", buffer_size=0)
    assert str(raised.value) == "stream: buffer_size must be an int >= 1, got 0"
