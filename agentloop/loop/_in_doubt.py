"""Calls in doubt the host resolves (``CallInDoubt``), when the agent opted in.

A restore finds a call that started before it and left no result; its tool's
``reconcile`` could not tell what it came to (it has none, or it returned
``None``). Without the opt-in the call is answered ``in_doubt`` at once; with
it (``AgentBuilder.ask_in_doubt()``) the call keeps no result and carries a
:class:`~agentloop.loop._steps.CallInDoubt` (``RoundCall.doubt``): the driver
rests in ``AWAITING_RESOLUTION`` and ``next()`` returns the first unresolved
one until every call in doubt of the round is resolved. The host settles it
(its result), fails it (an error result with a reason) or runs it again: the
rerun takes a claim of its own (``<call_id>#again-<n>``), so a kill during it
leaves the call in doubt again, never run a third time unasked.

The doubt is written into the checkpoint with its call, and the store's record
of the call's claim outlives it too: a restore while the host has not resolved
it asks again (the tool's ``reconcile`` is tried again first).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import ResultOutcome, ToolResultPart
from ..core._synthesized_results import synthesized_result
from ..tools._outputs import OutputProblem, stored_result
from ..tools._tool import idempotency_key
from ._core import LoopCore
from ._state import CallStatus, DriverState, RoundCall, ToolRound, TurnState
from ._steps import CallInDoubt, Resolver

__all__ = [
    "RESOLUTIONS",
    "again_key",
    "apply_resolution",
    "in_doubt_step",
    "resolve_in_doubt",
    "shown_doubt",
]

RESOLUTIONS = ("settle", "fail", "run_again")
"""How a host may resolve a call in doubt (``CallInDoubt``'s methods)."""

_AGAIN = "#again-"


def in_doubt_step(
    turn: TurnState,
    call: RoundCall,
    session_id: str,
    key_session_id: str | None,
    started_calls: Iterable[str],
    resolver: Resolver,
) -> CallInDoubt:
    """The step asking the host about ``call`` (its reruns counted from the claims)."""
    prefix = f"{call.call.id}{_AGAIN}"
    reruns = sum(1 for key in started_calls if key.startswith(prefix))
    return CallInDoubt(
        call.call.id,
        call.call.name,
        call.call.input,
        turn.turn_id,
        idempotency_key(key_session_id or session_id, call.call.id),
        "it started before the session was restored and left no result, and its tool "
        "could not tell what it came to (no reconcile, or reconcile returned None)",
        reruns,
        driver=resolver,
    )


def again_key(step: CallInDoubt) -> str:
    """The claim a rerun the host chose takes (one per rerun)."""
    return f"{step.call_id}{_AGAIN}{step.reruns + 1}"


def shown_doubt(tool_round: ToolRound) -> CallInDoubt | None:
    """The first call of the round in doubt that the host has not resolved."""
    for call in tool_round.calls:
        if call.doubt is not None:
            return call.doubt
    return None


def resolve_in_doubt(
    core: LoopCore, call_id: str, how: str, value: Any, limit: int | None
) -> tuple[RoundCall, ToolRound, ToolResultPart | None]:
    """Check the host's resolution of ``call_id`` and return the call, its round and the
    result to record (``None`` for ``run_again``: the call is marked to run again).
    Raises, changing nothing, when that call is not in doubt or the value does not fit."""
    where = f"resolve the call in doubt {call_id!r} ({how})"
    if how not in RESOLUTIONS:
        raise InvalidInputError(
            f"cannot {where}: {how!r} is not a resolution; expected one of "
            f"{', '.join(RESOLUTIONS)} (CallInDoubt.settle, fail or run_again)"
        )
    call, tool_round = _doubted_call(core, call_id, where)
    if how == "run_again":
        return call, tool_round, None
    if how == "fail":
        return call, tool_round, _failure(call_id, value, where)
    if value is None:
        raise InvalidInputError(
            f"cannot {where}: settle() needs the call's result (what the tool would have "
            "returned), got None; use fail(reason) if the call did not do its work"
        )
    try:
        return call, tool_round, stored_result(call_id, value, limit)
    except OutputProblem as problem:
        raise InvalidInputError(
            f"cannot {where}: the result is not a tool result ({problem}); pass what the "
            "tool would have returned (a str, a JSON value, parts or a ToolOutput)"
        ) from None


def apply_resolution(call: RoundCall, step: CallInDoubt, result: ToolResultPart | None) -> None:
    """Mark ``call`` resolved: ``result`` is recorded by the caller, or it runs again."""
    call.doubt = None
    if result is None:
        call.rerun = again_key(step)


def _failure(call_id: str, reason: Any, where: str) -> ToolResultPart:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInputError(
            f"cannot {where}: fail() needs a reason for the model, a non-empty str; got {reason!r}"
        )
    return synthesized_result(call_id, f"failed: {reason}", ResultOutcome.FAILED)


def _doubted_call(core: LoopCore, call_id: str, where: str) -> tuple[RoundCall, ToolRound]:
    if core.state is not DriverState.AWAITING_RESOLUTION:
        raise InvalidStateError(
            f"cannot {where} in state {core.state}: no call in doubt waits for the host; "
            "resolve a CallInDoubt step returned by next()"
        )
    turn = core.turn
    assert turn is not None
    assert turn.round is not None
    call = turn.round.by_id(call_id)
    if call is None or call.doubt is None:
        waiting = [c.call.id for c in turn.round.calls if c.doubt is not None]
        state = (
            "it is not in this round"
            if call is None
            else "it was resolved already"
            if call.status is not CallStatus.PREPARED or call.rerun is not None
            else "it is not in doubt"
        )
        raise InvalidStateError(
            f"cannot {where}: {state} (in doubt: {', '.join(waiting) or 'none'}); "
            + ("call next() to go on" if not waiting else "resolve those")
        )
    return call, turn.round
