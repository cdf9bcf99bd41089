"""Consistency checks of a parsed checkpoint (fail closed: nothing half-restores)."""

from __future__ import annotations

from ..core._errors import CheckpointError
from ..core._transcript import find_violation, has_pending_input
from ._state import WAITING_FOR_APPROVAL, CallStatus, DriverState, Restored, RoundCall, ToolRound

__all__ = ["check_consistency"]


def _status_word(status: CallStatus) -> str:
    """How the document names an open call's status."""
    return "awaiting_approval" if status in WAITING_FOR_APPROVAL else "unstarted"


def check_consistency(restored: Restored) -> None:
    """Fail closed: every open call must belong to the active round and vice versa; a
    retry point needs a closed turn and a transcript the model can answer."""
    transcript = restored.transcript
    if restored.retry_point is not None:
        _check_retry_point(restored)
    violation = find_violation(transcript)
    open_calls: set[str] = set()
    if violation is not None:
        if violation.kind != "unanswered":
            raise CheckpointError(
                f"cannot restore a checkpoint: its transcript is invalid ({violation.message})"
            )
        open_calls = set(violation.call_ids)
    turn = restored.turn
    tool_round = turn.round if turn is not None else None
    if tool_round is None:
        if open_calls:
            raise CheckpointError(
                "cannot restore a checkpoint: calls "
                f"{', '.join(sorted(open_calls))} have no result and no active round owns them"
            )
        if restored.state is DriverState.AWAITING_RESOLUTION:
            raise CheckpointError(
                "cannot restore a checkpoint: its state is AWAITING_RESOLUTION but it holds "
                "no tool round with a call in doubt"
            )
        if restored.state in (DriverState.AWAITING_APPROVAL, DriverState.AWAITING_ANSWER):
            raise CheckpointError(
                f"cannot restore a checkpoint: its state is {restored.state} but it holds "
                "no tool round with a pending "
                + ("approval" if restored.state is DriverState.AWAITING_APPROVAL else "question")
            )
        return
    round_ids = [call.call.id for call in tool_round.calls]
    unmatched = open_calls - set(round_ids)
    if unmatched:
        raise CheckpointError(
            "cannot restore a checkpoint: calls "
            f"{', '.join(sorted(unmatched))} have no result and are not in the active round"
        )
    for position, call in enumerate(tool_round.calls):
        _check_call(call, position, open_calls, tool_round)
    _check_waiting(restored.state, tool_round)
    _check_resolution(restored.state, tool_round)


def _check_waiting(state: DriverState, tool_round: ToolRound) -> None:
    """A state that waits on the host needs a call of the round waiting on it."""
    if state is DriverState.AWAITING_APPROVAL and not any(
        call.status in WAITING_FOR_APPROVAL for call in tool_round.calls
    ):
        raise CheckpointError(
            "cannot restore a checkpoint: its state is AWAITING_APPROVAL but no call of the "
            "active round awaits approval"
        )
    if state is DriverState.AWAITING_ANSWER and not any(
        call.question is not None for call in tool_round.calls
    ):
        raise CheckpointError(
            "cannot restore a checkpoint: its state is AWAITING_ANSWER but no call of the "
            "active round waits on a question"
        )


def _check_resolution(state: DriverState, tool_round: ToolRound) -> None:
    """``AWAITING_RESOLUTION`` needs a call of the round in doubt for the host."""
    if state is DriverState.AWAITING_RESOLUTION and not any(
        call.doubt is not None for call in tool_round.calls
    ):
        raise CheckpointError(
            "cannot restore a checkpoint: its state is AWAITING_RESOLUTION but no call of "
            "the active round is in doubt for the host"
        )


def _check_retry_point(restored: Restored) -> None:
    """A retry point needs a closed turn and a transcript the model can answer."""
    if restored.turn is not None or restored.state is not DriverState.IDLE:
        raise CheckpointError(
            "cannot restore a checkpoint: it holds a retry point but also an open turn "
            f"(state {restored.state}); a failed turn is closed"
        )
    if not has_pending_input(restored.transcript):
        raise CheckpointError(
            "cannot restore a checkpoint: it holds a retry point but its transcript does "
            "not end in a user, tool or notification item for the model to answer"
        )


def _check_call(
    call: RoundCall, position: int, open_calls: set[str], tool_round: ToolRound
) -> None:
    call_id = call.call.id
    if call.index != position:
        raise CheckpointError(
            f"cannot restore a checkpoint: call {call_id} has index {call.index} at position "
            f"{position}"
        )
    answered = call_id not in open_calls
    pending_result = tool_round.results.get(call.index)
    if pending_result is not None and pending_result.call_id != call_id:
        raise CheckpointError(
            f"cannot restore a checkpoint: the stored result for call {call_id} answers "
            f"{pending_result.call_id}"
        )
    if call.answered:
        if answered == (pending_result is not None):
            raise CheckpointError(
                f"cannot restore a checkpoint: call {call_id} is done but has "
                + ("two results" if answered else "no result")
            )
        return
    if answered or pending_result is not None:
        raise CheckpointError(
            f"cannot restore a checkpoint: call {call_id} is {_status_word(call.status)} "
            "but already has a result"
        )
    question = call.question
    if question is not None and (
        question.call_id != call_id or call.status in WAITING_FOR_APPROVAL
    ):
        raise CheckpointError(
            f"cannot restore a checkpoint: the question {question.id!r} held by call {call_id} "
            f"was asked by {question.call_id} (status {_status_word(call.status)}); "
            "refusing to guess which call asked it"
        )
    if call.status in WAITING_FOR_APPROVAL and (
        call.approval is None or call.approval.call_id != call_id
    ):
        raise CheckpointError(
            f"cannot restore a checkpoint: the pending approval of call {call_id} does not "
            "match it; refusing to guess which call it approves"
        )
