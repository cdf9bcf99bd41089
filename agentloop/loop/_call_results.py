"""The results the tool-call pipeline writes itself, one per final call status.

Each moves the call to its final status and returns its result, made by the
one ``core._synthesized_results.synthesized_result``.
"""

from __future__ import annotations

from ..core._items import ResultOutcome, ToolResultPart
from ..core._synthesized_results import synthesized_result
from ._state import WAITING_FOR_APPROVAL, CallStatus, RoundCall

__all__ = ["answer", "duplicate", "placeholder", "refused"]


def answer(call: RoundCall, status: CallStatus, detail: str | None = None) -> ToolResultPart:
    """Move ``call`` to SKIPPED, DENIED, CANCELLED or IN_DOUBT and write its result.

    ``detail``: who sent the new message (SKIPPED), the host's reason (DENIED).
    """
    call_id, name = call.call.id, call.call.name
    if status is CallStatus.SKIPPED:
        text, outcome = f"skipped: {detail} sent a new message", ResultOutcome.SKIPPED
    elif status is CallStatus.DENIED:
        text, outcome = detail or "approval denied", ResultOutcome.DENIED
    elif status is CallStatus.CANCELLED:
        waiting = "was approved" if call.status in WAITING_FOR_APPROVAL else "finished"
        text = f"cancelled: the turn was interrupted before this call {waiting}"
        outcome = ResultOutcome.CANCELLED
    elif status is CallStatus.IN_DOUBT:
        text = (
            f"in doubt: {name} started before the session was restored and its outcome is "
            "unknown; it was not run again. Check its effects before retrying."
        )
        outcome = ResultOutcome.IN_DOUBT
    else:
        raise ValueError(f"answer() writes no result for status {status.value}")
    call.move(status)
    return synthesized_result(call_id, text, outcome)


def placeholder(call: RoundCall, status: CallStatus) -> ToolResultPart:
    """Move ``call`` to BACKGROUND or DETACHED and write the placeholder result."""
    if status is CallStatus.BACKGROUND:
        running, outcome = "is running", ResultOutcome.BACKGROUND
    else:
        running, outcome = "is now running", ResultOutcome.DETACHED
    call.move(status)
    return synthesized_result(
        call.call.id,
        f"Tool {call.call.name} {running} in the background; the result will be "
        "delivered when it completes.",
        outcome,
        is_error=False,
    )


def refused(call: RoundCall, count: int, name: str, limit: int) -> ToolResultPart:
    """Answer ``call`` of a round that would break the tool-call limit ``name``."""
    call.move(CallStatus.ANSWERED)
    if name == "max_model_calls_per_turn":
        text = (
            f"not run: the turn reached its limit of {limit} model calls; tools were withheld "
            "for a final answer, so no tool runs"
        )
    elif name == "max_tool_calls_per_round":
        text = (
            f"not run: the model asked for {count} tool calls in one round, more than the "
            f"limit of {limit}; ask for fewer calls at a time"
        )
    else:
        scope = name.removeprefix("max_tool_calls_per_")
        text = (
            f"not run: {count} more tool calls would exceed the limit of {limit} tool calls "
            f"per {scope}; answer without tools"
        )
    return synthesized_result(call.call.id, text, ResultOutcome.LIMIT_REACHED)


def duplicate(call: RoundCall, provider_id: str) -> ToolResultPart:
    """Answer a call whose id repeated another call's id in the same model response."""
    call.move(CallStatus.ANSWERED)
    return synthesized_result(
        call.call.id,
        f"not run: this call repeated the id {provider_id!r} of another call in the same "
        "response; call ids must be unique, so it was given a new id and not run",
        ResultOutcome.INVALID_INPUT,
    )
