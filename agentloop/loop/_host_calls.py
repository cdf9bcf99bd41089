"""What the host's calls on a driver are checked against, and what they change.

Synchronous functions over the core: each refuses a call the state does not
allow with an ``InvalidStateError`` naming the operation, the state, what is
unresolved and the fix (and changes nothing), or an ``InvalidInputError``
naming what was expected and what was found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import Item, ItemKind
from ._core import LoopCore, checked_input
from ._observer import Nobody
from ._state import WAITING_FOR_APPROVAL, CallStatus, DriverEvent, DriverState, QueuedMessage
from ._steps import AnswerKind, ApprovalAnswer

__all__ = [
    "answer_approval",
    "begin_step",
    "input_items",
    "queued_message",
    "refuse_outside_idle",
    "refuse_release_while_stepping",
    "refuse_released",
    "sole_undecided",
]


def begin_step(core: LoopCore, event: DriverEvent, operation: str) -> None:
    """Enter a step (``operation`` names the call), unless FAILED or a step runs."""
    if core.state is DriverState.FAILED:
        raise InvalidStateError(
            f"cannot {operation} in state FAILED: an earlier step raised "
            f"{type(core.failure).__name__}: {core.failure}; start or resume a new driver"
        )
    if core.state is DriverState.STEPPING:
        raise InvalidStateError(
            f"cannot {operation} in state STEPPING: another step is still running; await it first"
        )
    core.handle(event)


def refuse_outside_idle(core: LoopCore, operation: str) -> None:
    """Refuse ``operation`` (``retry()``, ``continue_turn()``) unless the driver is IDLE."""
    if core.state is DriverState.AFTER_TOOL_RESULT:
        turn_id = core.turn.turn_id if core.turn is not None else "the turn"
        raise InvalidStateError(
            f"cannot {operation} in state AFTER_TOOL_RESULT: {turn_id} is paused after a "
            "tool round and calls the model on the next next(); call next() instead"
        )
    core.require_state(operation, DriverState.IDLE)


def refuse_released(session_id: str, operation: str) -> NoReturn:
    """Raise for ``operation`` on a released driver (``release()``: every use but reading)."""
    raise InvalidStateError(
        f"cannot {operation} on session {session_id!r}'s driver: it was "
        "released (release()), its running calls cancelled; resume the session "
        "from the store (Agent.resume) for a driver that goes on"
    )


def refuse_release_while_stepping(core: LoopCore, session_id: str) -> None:
    """``release()`` is refused while a step runs (cancel the task awaiting ``next()``)."""
    if core.state is DriverState.STEPPING:
        raise InvalidStateError(
            f"cannot release() session {session_id!r}'s driver in state STEPPING: "
            "a step is still running; await it (or cancel the task awaiting next()) "
            "first"
        )


def input_items(core: LoopCore, items: str | Sequence[Item]) -> tuple[Item, ...]:
    """``submit_input``'s argument as checked Items (a string is one user message)."""
    core.require_state("submit input", DriverState.IDLE, DriverState.AFTER_TOOL_RESULT)
    if isinstance(items, str):
        if not items:
            raise InvalidInputError(
                "submit_input: the message is an empty string; give some text or a list of Items"
            )
        return (Item.text(ItemKind.USER, items),)
    if not isinstance(items, Item) and (
        isinstance(items, bytes | bytearray) or not hasattr(items, "__iter__")
    ):
        raise InvalidInputError(
            "submit_input expects a str (one user message) or a sequence of Items, "
            f"got {type(items).__name__}"
        )
    return checked_input(items)


def queued_message(
    core: LoopCore, operation: str, items: Sequence[Item], label: str
) -> QueuedMessage:
    """``items`` checked as a message to queue (``operation`` names the call)."""
    if core.state is DriverState.FAILED:
        raise InvalidStateError(
            f"cannot {operation} in state FAILED: an earlier step raised "
            f"{type(core.failure).__name__}: {core.failure}"
        )
    if not isinstance(label, str) or not label:
        raise InvalidInputError(f"{operation}: label must be a non-empty str, got {label!r}")
    checked = checked_input(items, operation)
    if not checked:
        raise InvalidInputError(f"{operation} expects at least one Item, got none")
    return QueuedMessage(checked, label)


def _undecided(core: LoopCore, operation: str) -> list[str]:
    """The ids of the calls waiting for an answer (raises when answering is not allowed)."""
    if core.state is not DriverState.AWAITING_APPROVAL:
        raise InvalidStateError(
            f"cannot {operation} in state {core.state}: no approval request is pending"
        )
    turn = core.turn
    assert turn is not None
    if turn.is_cancelled:
        raise InvalidStateError(
            f"cannot {operation}: turn {turn.turn_id} was cancelled; call next() to finish it"
        )
    undecided = [call.call.id for call in core.undecided_calls()]
    if not undecided:
        raise InvalidStateError(
            f"cannot {operation}: every pending approval is answered; call next()"
        )
    return undecided


def sole_undecided(core: LoopCore) -> str:
    """The call id of the one pending approval (raises if there are none or several)."""
    undecided = _undecided(core, "answer an approval")
    if len(undecided) > 1:
        raise InvalidStateError(
            f"cannot answer an approval: {len(undecided)} are pending ({', '.join(undecided)}); "
            "use answer_approval_for(call_id, decision)"
        )
    return undecided[0]


def answer_approval(
    core: LoopCore, call_id: str, decision: ApprovalAnswer, observer: Nobody
) -> None:
    """Record the host's ``decision`` on ``call_id``; the next step runs or denies it."""
    if not isinstance(decision, ApprovalAnswer):
        raise InvalidInputError(
            f"answer_approval_for expects an ApprovalAnswer, got {decision!r}; "
            "use ApprovalAnswer.approve(), .approve_with(input) or .deny(reason)"
        )
    undecided = _undecided(core, f"answer the approval for {call_id}")
    turn = core.turn
    assert turn is not None
    assert turn.round is not None
    call = turn.round.by_id(call_id)
    if call is None or call.status not in WAITING_FOR_APPROVAL:
        raise InvalidStateError(
            f"cannot answer the approval for {call_id}: no approval is pending for it "
            f"(pending: {', '.join(undecided)})"
        )
    if call.status is CallStatus.DECIDED:
        assert call.decision is not None
        raise InvalidStateError(
            f"cannot answer the approval for {call_id}: it was already answered "
            f"({call.decision.kind}); call next() to continue"
        )
    call.decision = decision
    call.move(CallStatus.DECIDED)
    edited = decision.kind is AnswerKind.APPROVE_WITH
    observer.approval_answered(call_id, decision.approved, edited)
