"""The core's decisions about questions of running calls, table-driven, no event loop.

The question box is fed by hand (``_Waiting`` entries, as ``ToolContext.ask``
would leave them); nothing awaits.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_machine import Background, Host, cancel, machine, with_round

import agentloop as al
import agentloop.tools
from agentloop.loop._actions import FinishCancelled, Hand, RunRound
from agentloop.loop._core import LoopCore
from agentloop.loop._questions import QuestionBox, _Waiting, answer_question, surface_question
from agentloop.loop._state import CallStatus, DriverEvent, DriverState, ToolRound, TurnState

QUESTION = al.tools.Question("k", "Which one?", {"type": "string"})


class QuestionHost(Host):
    def answer_question_for(self, question_id: str, answer: al.QuestionAnswer) -> None:
        self.calls.append((question_id, answer))


def asked(box: QuestionBox, call_id: str, question: al.tools.Question = QUESTION) -> _Waiting:
    """What ``box.ask(call_id, question)`` leaves before it awaits."""
    waiting = _Waiting(call_id, question)
    box._asked.append(waiting)
    return waiting


def resting_on(core: LoopCore) -> None:
    core.handle(DriverEvent.STEP)
    core.handle(DriverEvent.ASK_HOST)


# -- surfacing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "asker", "surfaced", "answered"),
    [
        ((CallStatus.RUNNING,), "c0", True, None),
        ((CallStatus.RUNNING, CallStatus.RUNNING), "c1", True, None),
        ((CallStatus.ANSWERED,), "c0", False, al.QuestionAnswer.cancel()),  # its call ended
        ((CallStatus.RUNNING,), "elsewhere", False, al.QuestionAnswer.cancel()),  # not this round
        ((CallStatus.RUNNING,), None, False, None),  # nothing asked
    ],
)
def test_the_first_unshown_question_of_a_running_call_surfaces(
    statuses: tuple[CallStatus, ...],
    asker: str | None,
    surfaced: bool,
    answered: al.QuestionAnswer | None,
) -> None:
    m, host, box = machine(), QuestionHost(), QuestionBox()
    turn, tool_round = with_round(m, *statuses)
    waiting = asked(box, asker) if asker is not None else None
    step = surface_question(turn, tool_round, box, host)
    if surfaced:
        assert waiting is not None
        assert isinstance(step, al.CallQuestion)
        assert (step.id, step.call_id, step.tool_name, step.turn_id, step.question) == (
            f"question:{asker}:1",
            asker,
            "echo",
            "turn-1",
            QUESTION,
        )
        call = tool_round.by_id(asker)
        assert call is not None
        assert call.question is step
        assert waiting.shown is step
        assert box.unshown() is None
        assert surface_question(turn, tool_round, box, host) is None  # shown once
    else:
        assert step is None
        assert all(call.question is None for call in tool_round.calls)
    if waiting is not None:
        assert waiting.answer == answered
        assert waiting.done.is_set() is (answered is not None)


def test_a_cancelled_turn_surfaces_no_question() -> None:
    m, box = machine(cancellable=True), QuestionBox()
    turn, tool_round = with_round(m, CallStatus.RUNNING)
    asked(box, "c0")
    cancel(m)
    assert surface_question(turn, tool_round, box, QuestionHost()) is None
    assert tool_round.calls[0].question is None


# -- the step after the host spoke ------------------------------------------------


def shown(m: Any, box: QuestionBox) -> tuple[TurnState, ToolRound, al.CallQuestion]:
    turn, tool_round = with_round(m, CallStatus.RUNNING)
    asked(box, "c0")
    step = surface_question(turn, tool_round, box, QuestionHost())
    assert step is not None
    return turn, tool_round, step


def test_an_unanswered_question_is_handed_again() -> None:
    m, box = machine(), QuestionBox()
    _turn, _round, step = shown(m, box)
    action = m.begin(QuestionHost(), Background())
    assert isinstance(action, Hand)
    assert action.step is step


def test_an_answered_question_continues_the_round() -> None:
    m, box = machine(), QuestionBox()
    turn, tool_round, step = shown(m, box)
    resting_on(m.core)
    answer_question(m.core, box, step.id, al.QuestionAnswer.accept("this"))
    assert tool_round.calls[0].question is None
    assert box._asked[0].answer == al.QuestionAnswer.accept("this")
    m.core.handle(DriverEvent.STEP)
    action = m.begin(QuestionHost(), Background())
    assert isinstance(action, RunRound)
    assert (action.turn, action.round) == (turn, tool_round)


def test_an_interrupt_while_a_question_waits_finishes_the_turn_at_the_question() -> None:
    m, box = machine(cancellable=True), QuestionBox()
    turn, _round, _step = shown(m, box)
    cancel(m)
    action = m.begin(QuestionHost(), Background())
    assert isinstance(action, FinishCancelled)
    assert (action.turn, action.stage) == (turn, "question")


def test_an_approval_surfaces_before_a_shown_question() -> None:
    m, box = machine(), QuestionBox()
    turn, tool_round = with_round(m, CallStatus.RUNNING, CallStatus.AWAITING_APPROVAL)
    asked(box, "c0")
    assert surface_question(turn, tool_round, box, QuestionHost()) is not None
    action = m.begin(QuestionHost(), Background())
    assert isinstance(action, Hand)
    assert isinstance(action.step, al.ApprovalRequest)


def test_a_call_that_ends_drops_its_shown_question() -> None:
    m, box = machine(), QuestionBox()
    _turn, tool_round, _step = shown(m, box)
    call = tool_round.calls[0]
    m.finalize(
        call, tool_round, al.ToolResultPart("c0", "timed out", is_error=True), CallStatus.ANSWERED
    )
    assert call.question is None
    box.release(tool_round.is_running)
    assert box._asked[0].answer == al.QuestionAnswer.cancel()


# -- answers refused ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "question_id", "answer", "error", "message"),
    [
        (
            DriverState.IDLE,
            "question:c0:1",
            al.QuestionAnswer.accept("x"),
            al.InvalidStateError,
            "cannot answer_question_for('question:c0:1') in state IDLE: no question of a "
            "running call is pending; answer a CallQuestion step returned by next()",
        ),
        (
            DriverState.AWAITING_ANSWER,
            "question:c0:1",
            al.QuestionAnswer.accept(5),
            al.InvalidInputError,
            "answer_question_for('question:c0:1'): the content does not match the question's "
            "schema ((content): 5 is not of type 'string'); answer with content that matches "
            "question.schema, or decline()",
        ),
        (
            DriverState.AWAITING_ANSWER,
            "question:c9:4",
            al.QuestionAnswer.decline(),
            al.InvalidStateError,
            "cannot answer_question_for('question:c9:4'): that question is not pending "
            "(pending: 'question:c0:1', asked by call c0)",
        ),
    ],
)
def test_answers_that_do_not_fit_are_refused_and_change_nothing(
    state: DriverState, question_id: str, answer: Any, error: type[Exception], message: str
) -> None:
    m, box = machine(), QuestionBox()
    _turn, tool_round, step = shown(m, box)
    if state is DriverState.AWAITING_ANSWER:
        resting_on(m.core)
    with pytest.raises(error) as raised:
        answer_question(m.core, box, question_id, answer)
    assert str(raised.value) == message
    assert tool_round.calls[0].question is step
    assert m.core.state is state
    assert box._asked[0].answer is None
    assert not box._asked[0].done.is_set()


def test_a_restore_of_a_shown_question_that_cannot_resume_is_a_pause() -> None:
    m, box = machine(), QuestionBox()
    turn, tool_round, _step = shown(m, box)
    tool_round.calls[0].question = None  # what restore_turn leaves (the call is in doubt)
    assert m.core.restore_event() is DriverEvent.RESTORE_PAUSE
    tool_round.calls[0].question = _step
    assert m.core.restore_event() is DriverEvent.RESTORE_QUESTION
    assert turn.round is tool_round
