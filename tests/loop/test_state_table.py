"""The driver's transition tables, tested directly: no event loop, no effects.

In the spirit of h11's ``tests/test_state.py``: every listed transition leads
where the table says, every other (state, event) pair is refused with an error
naming both, and a refused transition changes nothing.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest
from source_ast import parse_source

import agentloop as al
import agentloop.loop
import agentloop.tools
from agentloop.loop._core import LoopCore, event_after
from agentloop.loop._state import (
    ANSWERED,
    CALL_TRANSITIONS,
    TRANSITIONS,
    CallStatus,
    DriverEvent,
    DriverState,
    RoundCall,
    ToolRound,
    TurnPhase,
    next_state,
)
from agentloop.tools import ToolRequest

ALL_PAIRS = list(itertools.product(DriverState, DriverEvent))
UNLISTED = [pair for pair in ALL_PAIRS if pair not in TRANSITIONS]
CALL_PAIRS = list(itertools.product(CallStatus, CallStatus))


def make_core() -> LoopCore:
    appended: list[al.Item] = []
    return LoopCore(al.SessionConfig("s"), [], [], appended.append)


def core_in(state: DriverState) -> LoopCore:
    """A core brought to ``state`` through ``handle`` only."""
    core = make_core()
    path = {
        DriverState.IDLE: [],
        DriverState.STEPPING: [DriverEvent.STEP],
        DriverState.AWAITING_APPROVAL: [DriverEvent.STEP, DriverEvent.ASK_APPROVAL],
        DriverState.AFTER_TOOL_RESULT: [DriverEvent.STEP, DriverEvent.PAUSE],
        DriverState.AWAITING_ANSWER: [DriverEvent.STEP, DriverEvent.ASK_HOST],
        DriverState.AWAITING_RESOLUTION: [DriverEvent.STEP, DriverEvent.ASK_RESOLUTION],
        DriverState.FAILED: [DriverEvent.STEP, DriverEvent.FAIL],
    }[state]
    for event in path:
        core.handle(event)
    assert core.state is state
    return core


def make_call(status: CallStatus) -> RoundCall:
    part = al.ToolCallPart("call-1", "echo", {})
    return RoundCall(0, part, ToolRequest("call-1", "echo", {}, "s", "turn-1"), status=status)


def test_the_table_lists_exactly_these_transitions() -> None:
    resting = (
        DriverState.IDLE,
        DriverState.AWAITING_APPROVAL,
        DriverState.AFTER_TOOL_RESULT,
        DriverState.AWAITING_ANSWER,
        DriverState.AWAITING_RESOLUTION,
    )
    expected = {
        **{(state, DriverEvent.STEP): DriverState.STEPPING for state in resting},
        (DriverState.IDLE, DriverEvent.RETRY): DriverState.STEPPING,
        (DriverState.IDLE, DriverEvent.CONTINUE): DriverState.STEPPING,
        (DriverState.STEPPING, DriverEvent.FINISH): DriverState.IDLE,
        (DriverState.STEPPING, DriverEvent.ASK_APPROVAL): DriverState.AWAITING_APPROVAL,
        (DriverState.STEPPING, DriverEvent.PAUSE): DriverState.AFTER_TOOL_RESULT,
        (DriverState.STEPPING, DriverEvent.ASK_HOST): DriverState.AWAITING_ANSWER,
        (DriverState.STEPPING, DriverEvent.ASK_RESOLUTION): DriverState.AWAITING_RESOLUTION,
        (DriverState.STEPPING, DriverEvent.FAIL): DriverState.FAILED,
        (DriverState.STEPPING, DriverEvent.HOST_CANCEL): DriverState.IDLE,
        (DriverState.IDLE, DriverEvent.RESTORE): DriverState.IDLE,
        (DriverState.IDLE, DriverEvent.RESTORE_APPROVAL): DriverState.AWAITING_APPROVAL,
        (DriverState.IDLE, DriverEvent.RESTORE_PAUSE): DriverState.AFTER_TOOL_RESULT,
        (DriverState.IDLE, DriverEvent.RESTORE_QUESTION): DriverState.AWAITING_ANSWER,
        (DriverState.IDLE, DriverEvent.RESTORE_IN_DOUBT): DriverState.AWAITING_RESOLUTION,
    }
    assert expected == TRANSITIONS


@pytest.mark.parametrize(("state", "event"), list(TRANSITIONS))
def test_every_listed_transition_leads_where_the_table_says(
    state: DriverState, event: DriverEvent
) -> None:
    core = core_in(state)
    assert core.handle(event) is TRANSITIONS[state, event]
    assert core.state is TRANSITIONS[state, event]


@pytest.mark.parametrize(("state", "event"), UNLISTED)
def test_every_unlisted_transition_is_refused_and_changes_nothing(
    state: DriverState, event: DriverEvent
) -> None:
    core = core_in(state)
    with pytest.raises(al.InvalidStateError) as raised:
        core.handle(event)
    message = str(raised.value)
    assert message.startswith(f"driver cannot handle event {event.value!r} in state {state}: ")
    assert core.state is state
    with pytest.raises(al.InvalidStateError, match=f"in state {state}"):
        next_state(state, event)


def test_failed_allows_no_event_and_says_so() -> None:
    with pytest.raises(al.InvalidStateError) as raised:
        next_state(DriverState.FAILED, DriverEvent.STEP)
    assert str(raised.value) == (
        "driver cannot handle event 'step' in state FAILED: no event is allowed there"
    )


def test_the_refusal_names_the_events_allowed_in_that_state() -> None:
    with pytest.raises(al.InvalidStateError) as raised:
        next_state(DriverState.STEPPING, DriverEvent.RESTORE)
    assert str(raised.value) == (
        "driver cannot handle event 'restore' in state STEPPING: allowed there: "
        "ask_approval, ask_host, ask_resolution, fail, finish, host_cancel, pause"
    )


def test_every_step_maps_to_its_event() -> None:
    approval = al.ApprovalRequest("c", "t", {}, "tool", "r", "s", "approval:c", "turn-1")
    finished = al.Finished(al.TurnResult("turn-1", al.FinishReason.COMPLETED, ()))
    assert event_after(approval) is DriverEvent.ASK_APPROVAL
    assert event_after(al.AfterToolResult("s", "turn-1", 3)) is DriverEvent.PAUSE
    assert event_after(al.AwaitingInput("s")) is DriverEvent.FINISH
    assert event_after(finished) is DriverEvent.FINISH
    question = al.CallQuestion("question:c:1", "c", "t", "turn-1", al.tools.Question("k", "m"))
    assert event_after(question) is DriverEvent.ASK_HOST
    doubt = al.CallInDoubt("c", "t", {}, "turn-1", "key", "why")
    assert event_after(doubt) is DriverEvent.ASK_RESOLUTION


def test_restoring_picks_its_event_from_the_turn() -> None:
    core = make_core()
    assert core.restore_event() is DriverEvent.RESTORE  # no turn
    turn = core.start_turn(None)
    assert core.restore_event() is DriverEvent.RESTORE  # a turn neither paused nor in a round
    turn.phase = TurnPhase.PAUSED
    assert core.restore_event() is DriverEvent.RESTORE_PAUSE
    turn.phase = TurnPhase.ACTIVE
    turn.round = ToolRound([make_call(CallStatus.PREPARED)])
    assert core.restore_event() is DriverEvent.RESTORE_PAUSE  # a round to finish
    for waiting in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVAL_SHOWN, CallStatus.DECIDED):
        turn.round = ToolRound([make_call(CallStatus.ANSWERED), make_call(waiting)])
        assert core.restore_event() is DriverEvent.RESTORE_APPROVAL
    doubted = make_call(CallStatus.PREPARED)
    doubted.doubt = al.CallInDoubt("call-1", "echo", {}, "turn-1", "key", "why")
    turn.round = ToolRound([doubted])
    assert core.restore_event() is DriverEvent.RESTORE_IN_DOUBT
    turn.round = ToolRound([make_call(CallStatus.APPROVAL_SHOWN)])
    core.handle(core.restore_event())
    assert core.state is DriverState.AWAITING_APPROVAL


def test_a_restore_is_refused_once_the_driver_has_stepped() -> None:
    core = core_in(DriverState.AFTER_TOOL_RESULT)
    with pytest.raises(al.InvalidStateError, match="in state AFTER_TOOL_RESULT"):
        core.handle(DriverEvent.RESTORE)
    assert core.state is DriverState.AFTER_TOOL_RESULT


# -- the life of one call -------------------------------------------------------


def test_the_call_table_lists_exactly_these_moves() -> None:
    s = CallStatus
    assert {status: set(targets) for status, targets in CALL_TRANSITIONS.items()} == {
        s.PREPARED: {
            s.AWAITING_APPROVAL, s.RUNNING, s.ANSWERED, s.SKIPPED, s.CANCELLED, s.IN_DOUBT,
            s.RECONCILED,
        },
        s.AWAITING_APPROVAL: {
            s.APPROVAL_SHOWN, s.DECIDED, s.SKIPPED, s.CANCELLED, s.IN_DOUBT, s.RECONCILED
        },
        s.APPROVAL_SHOWN: {s.DECIDED, s.SKIPPED, s.CANCELLED, s.IN_DOUBT, s.RECONCILED},
        s.DECIDED: {s.PREPARED, s.DENIED, s.CANCELLED, s.IN_DOUBT, s.RECONCILED},
        s.RUNNING: {s.ANSWERED, s.BACKGROUND, s.DETACHED, s.CANCELLED},
        s.ANSWERED: set(),
        s.BACKGROUND: set(),
        s.DETACHED: set(),
        s.SKIPPED: set(),
        s.DENIED: set(),
        s.CANCELLED: set(),
        s.IN_DOUBT: set(),
        s.RECONCILED: set(),
    }  # fmt: skip


@pytest.mark.parametrize(("before", "after"), CALL_PAIRS)
def test_a_call_moves_only_as_listed(before: CallStatus, after: CallStatus) -> None:
    call = make_call(before)
    if after in CALL_TRANSITIONS[before]:
        call.move(after)
        assert call.status is after
        assert call.answered == (after in ANSWERED)
        return
    with pytest.raises(al.InvalidStateError) as raised:
        call.move(after)
    assert str(raised.value) == f"call call-1 cannot move from {before.value} to {after.value}"
    assert call.status is before


def test_an_answered_call_never_moves_again() -> None:
    for status in ANSWERED:
        assert CALL_TRANSITIONS[status] == frozenset()
        assert make_call(status).answered


def test_only_the_core_assigns_the_driver_state() -> None:
    """House habit: one method changes the state (``LoopCore.handle``)."""
    assigners: list[str] = []
    for path in sorted(Path(agentloop.loop.__file__).parent.glob("*.py")):
        tree = parse_source(path)
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                targets = node.targets if isinstance(node, ast.Assign) else []
                for target in targets:
                    if isinstance(target, ast.Attribute) and target.attr in ("state", "_state"):
                        assigners.append(f"{path.name}:{function.name}")
    assert assigners == ["_core.py:__init__", "_core.py:handle"]


def test_only_move_assigns_a_call_status() -> None:
    assigners: list[str] = []
    for path in sorted(Path(agentloop.loop.__file__).parent.glob("*.py")):
        for function in ast.walk(parse_source(path)):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                for target in node.targets if isinstance(node, ast.Assign) else []:
                    if isinstance(target, ast.Attribute) and target.attr == "status":
                        assigners.append(f"{path.name}:{function.name}")
    assert assigners == ["_state.py:move"]


@pytest.mark.parametrize("event", [DriverEvent.RETRY, DriverEvent.CONTINUE])
@pytest.mark.parametrize(
    "state",
    [DriverState.AWAITING_APPROVAL, DriverState.AFTER_TOOL_RESULT, DriverState.STEPPING],
)
def test_retry_and_continue_begin_a_step_only_from_idle(
    state: DriverState, event: DriverEvent
) -> None:
    core = core_in(state)
    with pytest.raises(al.InvalidStateError, match=f"event {event.value!r} in state {state}"):
        core.handle(event)
    assert core.state is state
    idle = core_in(DriverState.IDLE)
    assert idle.handle(event) is DriverState.STEPPING
