"""The core's decisions, table-driven, with no event loop: facts in, actions out.

Each row builds a core in some situation (through its own methods), feeds it
one fact, and checks the action it answers with and what it changed. This is
the table at the top of ``docs/loop.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import agentloop as al
import agentloop.tasks
from agentloop.core._cancellation import CancellationController
from agentloop.loop._actions import (
    CallModel,
    FinishCancelled,
    Hand,
    RecordDecisions,
    RunRound,
)
from agentloop.loop._core import LoopCore
from agentloop.loop._machine import LoopMachine, ModelAnswer
from agentloop.loop._mutators import MutationPoint
from agentloop.loop._observer import NOBODY
from agentloop.loop._state import (
    CallStatus,
    QueuedMessage,
    RoundCall,
    ToolRound,
    TurnPhase,
    TurnState,
)
from agentloop.model._protocol import ModelTurnResult, TurnRequest
from agentloop.tasks._protocol import TaskResult
from agentloop.tools import ToolRequest


class Host:
    """A resolver that records what the steps would ask of the driver."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def submit_input(self, items: Any) -> None:
        self.calls.append(("submit_input", items))

    def answer_approval_for(self, call_id: str, decision: al.ApprovalAnswer) -> None:
        self.calls.append((call_id, decision))


class Background:
    """A task manager's background results, taken once."""

    def __init__(self, done: list[TaskResult] | None = None) -> None:
        self.done = done or []
        self.taken = 0

    def take_background(self) -> list[TaskResult]:
        self.taken += 1
        done, self.done = self.done, []
        return done


class Tools:
    """A catalog offering one spec, with no changes."""

    spec = al.ToolSpec("echo", "echo", {"type": "object"})

    def changes(self) -> tuple[list[Any], tuple[al.ToolSpec, ...] | None]:
        return [], (self.spec,)

    def specs(self) -> tuple[al.ToolSpec, ...]:
        return (self.spec,)


def machine(limits: al.LoopLimits | None = None, cancellable: bool = False) -> LoopMachine:
    config = al.SessionConfig("s", limits=limits or al.LoopLimits())
    core = LoopCore(config, [], [], None)
    handle = CancellationController().handle() if cancellable else None
    return LoopMachine(core, config, NOBODY, cancellation=handle, model_name="m", tasks_name="T")


def cancel(m: LoopMachine) -> None:
    """Interrupt the session ``m`` belongs to (its turn's snapshot sees it)."""
    assert m.cancellation is not None
    m.cancellation._interrupt()


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


def with_turn(m: LoopMachine) -> TurnState:
    m.core.pending_input = (user("hi"),)
    m.core.fold_pending_input()
    return m.start_turn()


def with_round(m: LoopMachine, *statuses: CallStatus) -> tuple[TurnState, ToolRound]:
    turn = with_turn(m)
    calls = []
    for index, status in enumerate(statuses):
        part = al.ToolCallPart(f"c{index}", "echo", {})
        call = RoundCall(index, part, ToolRequest(part.id, "echo", {}, "s", turn.turn_id))
        path = {
            CallStatus.PREPARED: [],
            CallStatus.AWAITING_APPROVAL: [CallStatus.AWAITING_APPROVAL],
            CallStatus.APPROVAL_SHOWN: [CallStatus.AWAITING_APPROVAL, CallStatus.APPROVAL_SHOWN],
            CallStatus.DECIDED: [CallStatus.AWAITING_APPROVAL, CallStatus.DECIDED],
            CallStatus.RUNNING: [CallStatus.RUNNING],
            CallStatus.ANSWERED: [CallStatus.RUNNING, CallStatus.ANSWERED],
        }[status]
        for step in path:
            call.move(step)
        if status is CallStatus.DECIDED:
            call.decision = al.ApprovalAnswer.approve()
        if status in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVAL_SHOWN, CallStatus.DECIDED):
            call.approval = al.ApprovalRequest(
                part.id, "echo", {}, "tool.invoke", "asks", "echo", f"a:{part.id}", turn.turn_id
            )
        calls.append(call)
    turn.round = ToolRound(calls)
    return turn, turn.round


def answered(*items: al.Item, reason: al.FinishReason = al.FinishReason.COMPLETED) -> ModelAnswer:
    return ModelAnswer(0.01, ModelTurnResult(reason, items))


def assistant(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.ASSISTANT, text)


def calls(*names: str) -> al.Item:
    parts = tuple(al.ToolCallPart(f"m{i}", name, {}) for i, name in enumerate(names))
    return al.Item(al.ItemKind.ASSISTANT, parts)


# -- a step's first action ----------------------------------------------------------


def test_no_turn_and_no_input_waits_for_input() -> None:
    m, host = machine(), Host()
    action = m.begin(host, Background())
    assert isinstance(action, Hand)
    assert isinstance(action.step, al.AwaitingInput)
    assert m.core.turn is None


def test_input_starts_a_turn_that_calls_the_model() -> None:
    m, host = machine(), Host()
    m.core.pending_input = (user("hi"),)
    action = m.begin(host, Background())
    assert isinstance(action, CallModel)
    assert (action.point, action.fold_input, action.mutators) == (
        MutationPoint.AFTER_TURN_ENDED,
        True,
        (),
    )
    assert action.turn is m.core.turn
    assert action.turn.turn_id == "turn-1"


def test_background_results_start_a_turn_without_input() -> None:
    m, host = machine(), Host()
    result = al.ToolResultPart("bg", "done")
    action = m.begin(host, Background([TaskResult("t1", result)]))
    assert isinstance(action, CallModel)
    assert [item.kind for item in m.core.transcript] == [al.ItemKind.NOTIFICATION]


def test_a_paused_turn_calls_the_model_after_the_tool_results() -> None:
    m, host = machine(), Host()
    turn = with_turn(m)
    turn.phase = TurnPhase.PAUSED
    action = m.begin(host, Background())
    assert isinstance(action, CallModel)
    assert (action.turn, action.point) == (turn, MutationPoint.AFTER_TOOL_RESULT)
    assert turn.phase is TurnPhase.ACTIVE


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ((CallStatus.DECIDED,), RecordDecisions),
        ((CallStatus.AWAITING_APPROVAL,), Hand),
        ((CallStatus.APPROVAL_SHOWN,), Hand),
        ((CallStatus.PREPARED,), RunRound),
        ((CallStatus.ANSWERED, CallStatus.PREPARED), RunRound),
        ((CallStatus.RUNNING, CallStatus.APPROVAL_SHOWN), Hand),
    ],
)
def test_a_round_in_progress(statuses: tuple[CallStatus, ...], expected: type) -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, *statuses)
    background = Background()
    action = m.begin(host, background)
    assert type(action) is expected
    assert background.taken == 0  # taken in the model phase only
    if isinstance(action, Hand):
        assert isinstance(action.step, al.ApprovalRequest)
        assert tool_round.by_id(action.step.call_id).status is CallStatus.APPROVAL_SHOWN
    if isinstance(action, RunRound):
        assert (action.turn, action.round, action.fresh) == (turn, tool_round, False)


def test_recorded_decisions_move_the_approved_call_to_prepared() -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, CallStatus.DECIDED)
    action = m.after_decisions(turn, tool_round, host)
    assert isinstance(action, RunRound)
    assert tool_round.calls[0].status is CallStatus.PREPARED


def test_a_denied_call_is_answered_denied() -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, CallStatus.DECIDED)
    tool_round.calls[0].decision = al.ApprovalAnswer.deny("no")
    assert isinstance(m.after_decisions(turn, tool_round, host), RunRound)
    assert tool_round.calls[0].status is CallStatus.DENIED
    assert tool_round.results[0].output == "no"


@pytest.mark.parametrize(
    ("phase", "with_a_round", "stage"),
    [(TurnPhase.PAUSED, False, "pause"), (TurnPhase.ACTIVE, True, "approval")],
)
def test_a_cancelled_turn_is_finished_first(
    phase: TurnPhase, with_a_round: bool, stage: str
) -> None:
    m, host = machine(cancellable=True), Host()
    turn, _ = with_round(m, CallStatus.APPROVAL_SHOWN) if with_a_round else (with_turn(m), None)
    turn.phase = phase
    cancel(m)
    action = m.begin(host, Background())
    assert isinstance(action, FinishCancelled)
    assert (action.turn, action.stage) == (turn, stage)


# -- a model call ---------------------------------------------------------------------


def test_the_request_carries_the_transcript_and_tools() -> None:
    m = machine()
    turn = with_turn(m)
    request = m.next_request(turn, Tools())
    assert isinstance(request, TurnRequest)
    assert (len(request.transcript), request.available_tools, turn.model_calls) == (
        1,
        (Tools.spec,),
        1,
    )


def test_the_model_call_limit_ends_the_turn_before_the_request() -> None:
    m = machine(al.LoopLimits(max_model_calls_per_turn=1))
    turn = with_turn(m)
    turn.model_calls = 1
    action = m.next_request(turn, Tools())
    assert isinstance(action, Hand)
    assert isinstance(action.step, al.Finished)
    assert action.step.result.finish_reason is al.FinishReason.LIMIT_REACHED
    assert action.step.result.metadata["agentloop.limit"] == "max_model_calls_per_turn"


def test_the_final_answer_call_withholds_the_tools() -> None:
    m = machine(al.LoopLimits(max_model_calls_per_turn=1, on_limit=al.LimitAction.FINAL_ANSWER))
    turn = with_turn(m)
    turn.model_calls = 1
    request = m.next_request(turn, Tools())
    assert isinstance(request, TurnRequest)
    assert (request.available_tools, turn.final_answer) == ((), True)


Expect = Callable[[Any, LoopMachine, TurnState], None]


def ended(reason: al.FinishReason, **metadata: Any) -> Expect:
    def check(action: Any, m: LoopMachine, turn: TurnState) -> None:
        assert isinstance(action, Hand)
        assert isinstance(action.step, al.Finished)
        assert action.step.result.finish_reason is reason
        for key, value in metadata.items():
            assert action.step.result.metadata[f"agentloop.{key}"] == value
        assert m.core.turn is None

    return check


def cancelled(action: Any, m: LoopMachine, turn: TurnState) -> None:
    assert isinstance(action, FinishCancelled)
    assert (action.turn, action.stage) == (turn, "model")


def round_fresh(action: Any, m: LoopMachine, turn: TurnState) -> None:
    assert isinstance(action, RunRound)
    assert (action.fresh, [c.call.name for c in action.round.calls]) == (True, ["echo", "look"])
    assert turn.round is action.round


def model_again(action: Any, m: LoopMachine, turn: TurnState) -> None:
    assert isinstance(action, CallModel)
    assert (action.turn, action.point) == (turn, MutationPoint.AFTER_TURN_ENDED)


MODEL_ROWS: list[tuple[str, ModelAnswer, Expect]] = [
    ("text", answered(assistant("hello")), ended(al.FinishReason.COMPLETED)),
    ("tool calls", answered(calls("echo", "look")), round_fresh),
    (
        "provider error",
        ModelAnswer(0.1, error=al.ProviderError("down", retryable=True)),
        ended(al.FinishReason.ERROR, error_kind="retryable"),
    ),
    (
        "timeout",
        ModelAnswer(0.1, timed_out=True),
        ended(al.FinishReason.LIMIT_REACHED, limit="request_timeout"),
    ),
    ("cancelled", ModelAnswer(0.1), cancelled),
    (
        "empty",
        answered(),
        ended(al.FinishReason.ERROR, empty_response="no output items; finish reason completed"),
    ),
]


@pytest.mark.parametrize(("name", "answer", "expect"), MODEL_ROWS, ids=[r[0] for r in MODEL_ROWS])
def test_what_a_model_answer_means(name: str, answer: ModelAnswer, expect: Expect) -> None:
    m, host = machine(), Host()
    turn = with_turn(m)
    turn.model_calls = 1
    expect(m.model_answered(turn, MutationPoint.AFTER_TURN_ENDED, answer, host), m, turn)


def test_a_failed_call_leaves_a_retry_point() -> None:
    m, host = machine(), Host()
    turn = with_turn(m)
    turn.model_calls = 1
    error = al.ProviderError("down", retryable=True)
    m.model_answered(turn, MutationPoint.AFTER_TURN_ENDED, ModelAnswer(0.1, error=error), host)
    assert m.core.retry_point is not None
    assert (m.core.retry_point.turn_id, m.core.retry_point.point) == ("turn-1", "after_turn_ended")


def test_an_error_while_cancelled_is_the_interrupts_echo() -> None:
    m, host = machine(cancellable=True), Host()
    turn = with_turn(m)
    cancel(m)
    error = al.ProviderError("aborted", retryable=True)
    action = m.model_answered(
        turn, MutationPoint.AFTER_TURN_ENDED, ModelAnswer(0, error=error), host
    )
    cancelled(action, m, turn)


def test_steering_that_arrived_meanwhile_calls_the_model_again() -> None:
    m, host = machine(), Host()
    turn = with_turn(m)
    m.core.steering = (QueuedMessage((user("also"),)),)
    model_again(
        m.model_answered(turn, MutationPoint.AFTER_TURN_ENDED, answered(assistant("x")), host),
        m,
        turn,
    )


def test_a_round_over_the_tool_call_limit_is_refused_whole() -> None:
    m, host = machine(al.LoopLimits(max_tool_calls_per_round=1)), Host()
    turn = with_turn(m)
    action = m.model_answered(turn, MutationPoint.AFTER_TURN_ENDED, answered(calls("a", "b")), host)
    ended(al.FinishReason.LIMIT_REACHED, limit="max_tool_calls_per_round")(action, m, turn)
    kinds = [item.kind for item in m.core.transcript]
    assert kinds == [al.ItemKind.USER, al.ItemKind.ASSISTANT, al.ItemKind.TOOL, al.ItemKind.TOOL]


# -- a round's end --------------------------------------------------------------------


def test_a_finished_round_pauses_before_the_model() -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, CallStatus.ANSWERED)
    tool_round.results[0] = al.ToolResultPart("c0", "ok")
    action = m.round_collected(turn, tool_round, host)
    assert isinstance(action, Hand)
    assert isinstance(action.step, al.AfterToolResult)
    assert (turn.phase, turn.round) == (TurnPhase.PAUSED, None)
    assert [item.kind for item in m.core.transcript][-1] is al.ItemKind.TOOL


def test_a_round_the_host_answered_goes_straight_to_the_model() -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, CallStatus.ANSWERED)
    tool_round.calls[0].approval = object()  # type: ignore[assignment]
    tool_round.results[0] = al.ToolResultPart("c0", "ok")
    action = m.round_collected(turn, tool_round, host)
    assert isinstance(action, CallModel)
    assert action.point is MutationPoint.AFTER_TOOL_RESULT


def test_a_round_of_background_calls_waits_for_input() -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, CallStatus.RUNNING)
    m.call_started(
        tool_round.calls[0], tool_round, al.tasks.TaskLaunched("t", al.tasks.TaskKind.BACKGROUND)
    )  # type: ignore[attr-defined]
    action = m.round_collected(turn, tool_round, host)
    assert isinstance(action, Hand)
    assert isinstance(action.step, al.AwaitingInput)
    assert m.core.turn is None


def test_a_round_still_running_after_the_wait_is_refused() -> None:
    m, host = machine(), Host()
    turn, tool_round = with_round(m, CallStatus.RUNNING)
    with pytest.raises(al.InvalidStateError, match="task manager T reported no running tasks"):
        m.round_collected(turn, tool_round, host)
