"""The ``LoopDriver``: a step-driven state machine over model calls and tool rounds.

``next()`` is a dispatcher over an ordered tuple of ``_try_<phase>()``
methods; the first that returns a step wins (see ``docs/loop.md``):

1. finish a turn an interrupt cancelled while it waited on the host;
2. run (or deny) calls whose approvals were answered;
3. surface the next unsurfaced approval, else re-surface the first unresolved one;
4. continue a tool round with calls not yet started;
5. drain finished background results into the transcript;
6. after an ``AfterToolResult`` pause, fold interjected input in and call the model;
7. with input, start a new turn; without, return ``AwaitingInput``.

Only ``_set_state`` assigns ``self._state``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import attrs
import structlog

from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import (
    Item,
    ResultOutcome,
    Usage,
)
from ..model._config import PromptCacheRequest, SessionConfig
from ..tools._executor import synthesized_result
from ._checkpoint import Restored, RestoredTurn, restore_turn
from ._driver_base import DriverParts, _checked_input
from ._events import (
    ApprovalResolved,
    InputAccepted,
    RunFailed,
    TurnStarted,
    Warning,
)
from ._model_calls import ModelCaller
from ._mutators import MutationPoint
from ._state import (
    TRANSITIONS,
    CallStatus,
    DriverState,
    QueuedMessage,
    RoundCall,
    TurnState,
)
from ._steps import (
    AfterToolResult,
    ApprovalDecision,
    ApprovalRequest,
    AwaitingInput,
    DecisionKind,
    Finished,
    Step,
)

__all__ = ["LoopDriver", "LoopSnapshot"]

log = structlog.get_logger("agentloop")


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class LoopSnapshot:
    """A read-only copy of what the driver holds: transcript and queued input."""

    session_id: str
    transcript: tuple[Item, ...] = attrs.field(converter=_to_items)
    pending_input: tuple[Item, ...] = attrs.field(converter=_to_items)


class LoopDriver(ModelCaller):
    """Advances one session a step at a time; see the module docstring for the order."""

    def __init__(
        self, parts: DriverParts, transcript: Sequence[Item], pending: Sequence[Item]
    ) -> None:
        super().__init__(parts, transcript, pending)
        self._phases: tuple[Callable[[], Awaitable[Step | None]], ...] = (
            self._try_cancelled_turn,
            self._try_resolved_approvals,
            self._try_surface_approval,
            self._try_continue_round,
            self._try_drain_background,
            self._try_resume_after_pause,
            self._try_start_turn,
        )

    @classmethod
    def _restore(
        cls, parts: DriverParts, restored: Restored, started_calls: frozenset[str]
    ) -> LoopDriver:
        """A driver continuing from a parsed checkpoint (see ``Agent.resume``)."""
        driver = cls(parts, restored.transcript, restored.pending_input)
        driver._turn_counter = restored.turn_counter
        driver._next_turn_cache = restored.next_turn_cache
        driver._detached = set(restored.detached)
        driver._session_usage = restored.session_usage
        driver._steering = list(restored.steering)
        driver._follow_ups = list(restored.follow_ups)
        if restored.turn is not None:
            driver._turn = driver._restore_turn(restored.turn, started_calls)
        if driver._detached and driver._observers:
            driver._emit(
                Warning(
                    "restored with background calls "
                    f"{', '.join(sorted(driver._detached))} outstanding: their results arrive "
                    "only if this process's task manager still runs them"
                )
            )
        turn = driver._turn
        if (
            turn is not None
            and turn.round is not None
            and any(call.status is CallStatus.AWAITING_APPROVAL for call in turn.round.calls)
        ):
            driver._state = DriverState.AWAITING_APPROVAL
        elif turn is not None and (turn.paused or turn.round is not None):
            # A round to finish (calls never started, results not yet appended) is
            # a pause inside the turn: input submitted now lands before the next
            # model call, after the round's results, never in place of them.
            driver._state = DriverState.AFTER_TOOL_RESULT
        return driver

    def _restore_turn(self, restored: RestoredTurn, started_calls: frozenset[str]) -> TurnState:
        checkpoint = self._cancellation.checkpoint() if self._cancellation is not None else None
        turn, doubted = restore_turn(restored, checkpoint, started_calls, self)
        if self._observers:
            for call in doubted:
                self._emit(
                    Warning(
                        f"call {call.call.id} ({call.call.name}) started before the restore and "
                        "has no result; answered as in doubt instead of running it again"
                    )
                )
        return turn

    # -- public surface ------------------------------------------------------

    @property
    def state(self) -> DriverState:
        """The driver's current state."""
        return self._state

    @property
    def config(self) -> SessionConfig:
        """The session configuration."""
        return self._config

    @property
    def usage(self) -> Usage | None:
        """Usage summed over every model call of this driver."""
        return self._session_usage

    async def next(self) -> Step:
        """Advance by one step and return ``Finished`` or an interrupt to resolve."""
        self._begin_step()
        try:
            step = await self._step()
        except anyio.get_cancelled_exc_class():
            # The host cancelled the task awaiting next(): close the turn so the
            # transcript stays provider-valid, then let the cancellation go on.
            with anyio.CancelScope(shield=True):
                if self._turn is not None:
                    await self._finish_cancelled(self._turn, "host")
            self._set_state(DriverState.IDLE)
            raise
        except BaseException as error:
            self._failure = error
            self._set_state(DriverState.FAILED)
            if self._observers:
                self._emit(RunFailed(f"{type(error).__name__}: {error}"))
            raise
        self._set_state(self._state_after(step))
        if self._store is not None:
            await self._persist()
        return step

    async def run_until_blocked(self) -> Finished | AwaitingInput | ApprovalRequest:
        """Call ``next()`` through ``AfterToolResult`` pauses; return the first other step."""
        while True:
            step = await self.next()
            if not isinstance(step, AfterToolResult):
                return step

    def submit_input(self, items: Sequence[Item]) -> None:
        """Queue ``items`` for the next model call (a new turn, or after a pause)."""
        self._require_input_state("submit input")
        checked = _checked_input(items)
        self._pending_input.extend(checked)
        if self._observers:
            self._emit(InputAccepted(self.session_id, checked))

    def set_next_turn_cache(self, request: PromptCacheRequest | None) -> None:
        """Use ``request`` for the next model call only (then the session default again)."""
        self._require_input_state("set the next turn's cache request")
        if request is not None and not isinstance(request, PromptCacheRequest):
            raise InvalidInputError(
                f"set_next_turn_cache expects a PromptCacheRequest or None, got {request!r}"
            )
        self._next_turn_cache = request

    def steer(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message for the model at the next tool-call boundary.

        Callable at any time, even while ``next()`` runs. At the boundary the
        round's calls not yet started (or still awaiting approval) are answered
        "skipped: <label> sent a new message", and the message goes to the
        model in the continuation call. Queued messages survive a cancelled turn.
        """
        self._queue(self._steering, "steer", items, label)

    def follow_up(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message that starts a new turn when the current one finishes.

        Callable at any time, even while ``next()`` runs; a cancelled turn
        leaves it queued for the next turn that finishes.
        """
        self._queue(self._follow_ups, "follow_up", items, label)

    @property
    def queued_steering(self) -> tuple[QueuedMessage, ...]:
        """Steering messages not yet delivered, oldest first."""
        return tuple(self._steering)

    @property
    def queued_follow_ups(self) -> tuple[QueuedMessage, ...]:
        """Follow-up messages not yet started, oldest first."""
        return tuple(self._follow_ups)

    def clear_queues(self) -> tuple[QueuedMessage, ...]:
        """Drop every queued steering and follow-up message; return them."""
        dropped = (*self._steering, *self._follow_ups)
        self._steering.clear()
        self._follow_ups.clear()
        return dropped

    def resolve_approval(self, decision: ApprovalDecision) -> None:
        """Answer the one pending approval (raises if there are none or several)."""
        undecided = self._undecided_calls("resolve an approval")
        if len(undecided) > 1:
            ids = ", ".join(call.call.id for call in undecided)
            raise InvalidStateError(
                f"cannot resolve an approval: {len(undecided)} are pending ({ids}); "
                "use resolve_approval_for(call_id, decision)"
            )
        self.resolve_approval_for(undecided[0].call.id, decision)

    def resolve_approval_for(self, call_id: str, decision: ApprovalDecision) -> None:
        """Answer the approval for ``call_id``; ``next()`` then runs or denies the call."""
        if not isinstance(decision, ApprovalDecision):
            raise InvalidInputError(
                f"resolve_approval_for expects an ApprovalDecision, got {decision!r}; "
                "use ApprovalDecision.approve(), .approve_with(input) or .deny(reason)"
            )
        undecided = self._undecided_calls(f"resolve the approval for {call_id}")
        turn = self._turn
        assert turn is not None
        assert turn.round is not None
        call = turn.round.by_id(call_id)
        if call is None or call.status is not CallStatus.AWAITING_APPROVAL:
            pending = ", ".join(c.call.id for c in undecided)
            raise InvalidStateError(
                f"cannot resolve the approval for {call_id}: no approval is pending for it "
                f"(pending: {pending})"
            )
        if call.decision is not None:
            raise InvalidStateError(
                f"cannot resolve the approval for {call_id}: it was already answered "
                f"({call.decision.kind}); call next() to continue"
            )
        call.decision = decision
        if self._observers:
            self._emit(
                ApprovalResolved(
                    call_id, decision.approved, decision.kind is DecisionKind.APPROVE_WITH
                )
            )

    def snapshot(self) -> LoopSnapshot:
        """A copy of the transcript and the queued input."""
        return LoopSnapshot(self.session_id, self._transcript, self._pending_input)

    def checkpoint(self) -> dict[str, Any]:
        """The driver's whole state as a versioned, JSON-compatible document.

        Works between steps; ``Agent.resume(document)`` continues from it.
        Raises ``InvalidStateError`` while a step runs, after a failure, or
        while calls of the round still execute beside a pending approval.
        """
        if self._state in (DriverState.STEPPING, DriverState.FAILED):
            raise InvalidStateError(
                f"cannot checkpoint in state {self._state}: "
                + (
                    "a step is running (a model call streams or a tool executes); "
                    "checkpoint between steps"
                    if self._state is DriverState.STEPPING
                    else f"an earlier step raised {type(self._failure).__name__}: {self._failure}"
                )
            )
        turn = self._turn
        if turn is not None and turn.round is not None:
            running = [c.call.id for c in turn.round.calls if c.status is CallStatus.RUNNING]
            if running:
                raise InvalidStateError(
                    f"cannot checkpoint in state {self._state}: calls {', '.join(running)} are "
                    "still executing; answer the pending approval and call next(), then "
                    "checkpoint"
                )
        return self._capture(self._state)

    # -- state machine -------------------------------------------------------

    def _set_state(self, new: DriverState) -> None:
        if new not in TRANSITIONS[self._state]:
            raise InvalidStateError(f"driver cannot go from {self._state} to {new}")
        self._state = new

    def _begin_step(self) -> None:
        if self._state is DriverState.FAILED:
            raise InvalidStateError(
                f"cannot call next() in state FAILED: an earlier step raised "
                f"{type(self._failure).__name__}: {self._failure}; start or resume a new driver"
            )
        if self._state is DriverState.STEPPING:
            raise InvalidStateError(
                "cannot call next() in state STEPPING: another next() is still running; "
                "await it first"
            )
        self._set_state(DriverState.STEPPING)

    @staticmethod
    def _state_after(step: Step) -> DriverState:
        if isinstance(step, ApprovalRequest):
            return DriverState.AWAITING_APPROVAL
        if isinstance(step, AfterToolResult):
            return DriverState.AFTER_TOOL_RESULT
        return DriverState.IDLE

    def _require_input_state(self, operation: str) -> None:
        if self._state in (DriverState.IDLE, DriverState.AFTER_TOOL_RESULT):
            return
        if self._state is DriverState.AWAITING_APPROVAL:
            ids = ", ".join(call.call.id for call in self._undecided_or_empty())
            raise InvalidStateError(
                f"cannot {operation} in state AWAITING_APPROVAL: {ids or 'an approval'} is "
                "unresolved; approve() or deny() it first, then call next()"
            )
        raise InvalidStateError(
            f"cannot {operation} in state {self._state}: "
            + (
                "a step is running; wait for next() to return"
                if self._state is DriverState.STEPPING
                else f"an earlier step raised {type(self._failure).__name__}: {self._failure}"
            )
        )

    def _queue(
        self, queue: list[QueuedMessage], operation: str, items: Sequence[Item], label: str
    ) -> None:
        if self._state is DriverState.FAILED:
            raise InvalidStateError(
                f"cannot {operation} in state FAILED: an earlier step raised "
                f"{type(self._failure).__name__}: {self._failure}"
            )
        if not isinstance(label, str) or not label:
            raise InvalidInputError(f"{operation}: label must be a non-empty str, got {label!r}")
        checked = _checked_input(items, operation)
        if not checked:
            raise InvalidInputError(f"{operation} expects at least one Item, got none")
        queue.append(QueuedMessage(checked, label))

    def _undecided_or_empty(self) -> list[RoundCall]:
        turn = self._turn
        if turn is None or turn.round is None:
            return []
        return [call for call in turn.round.calls if call.undecided]

    def _undecided_calls(self, operation: str) -> list[RoundCall]:
        if self._state is not DriverState.AWAITING_APPROVAL:
            raise InvalidStateError(
                f"cannot {operation} in state {self._state}: no approval request is pending"
            )
        turn = self._turn
        assert turn is not None
        if turn.is_cancelled:
            raise InvalidStateError(
                f"cannot {operation}: turn {turn.turn_id} was cancelled; call next() to finish it"
            )
        undecided = self._undecided_or_empty()
        if not undecided:
            raise InvalidStateError(
                f"cannot {operation}: every pending approval is answered; call next()"
            )
        return undecided

    async def _step(self) -> Step:
        for phase in self._phases:
            step = await phase()
            if step is not None:
                return step
        raise AssertionError("the last phase always returns a step")  # pragma: no cover

    # -- phases --------------------------------------------------------------

    async def _try_cancelled_turn(self) -> Step | None:
        turn = self._turn
        if turn is None or not turn.is_cancelled:
            return None
        stage = "pause" if turn.paused else "approval"
        return await self._finish_cancelled(turn, stage)

    async def _try_resolved_approvals(self) -> Step | None:
        turn = self._turn
        if turn is None or turn.round is None:
            return None
        skipped = False
        if self._steering:
            # The host sent a new message instead of answering: skip the questions.
            for call in turn.round.calls:
                if call.undecided:
                    self._skip(call, turn.round.results)
                    skipped = True
        decided = [
            call
            for call in turn.round.calls
            if call.status is CallStatus.AWAITING_APPROVAL and call.decision is not None
        ]
        if not decided and not skipped:
            return None
        for call in decided:
            assert call.decision is not None
            if call.decision.approved:
                call.status = CallStatus.UNSTARTED
            else:
                call.status = CallStatus.DONE
                turn.round.results[call.index] = synthesized_result(
                    call.call.id, call.decision.reason or "approval denied", ResultOutcome.DENIED
                )
        return await self._advance_round(turn, turn.round, after_approval=True)

    async def _try_surface_approval(self) -> Step | None:
        turn = self._turn
        if turn is None or turn.round is None:
            return None
        return self._surface_approval(turn.round)

    async def _try_continue_round(self) -> Step | None:
        # A round no approval holds up: calls to start, calls still running,
        # or (after a restore) results not yet appended.
        turn = self._turn
        if turn is None or turn.round is None:
            return None
        return await self._advance_round(turn, turn.round, after_approval=False)

    async def _try_drain_background(self) -> Step | None:
        done = self._tasks.take_background_results()
        self._drained = bool(done)
        for update in done:
            self._append_result(update.result, background=True)
        return None

    async def _try_resume_after_pause(self) -> Step | None:
        turn = self._turn
        if turn is None or not turn.paused:
            return None
        turn.paused = False
        return await self._call_model(turn, MutationPoint.AFTER_TOOL_RESULT)

    async def _try_start_turn(self) -> Step:
        if not self._pending_input and not self._drained:
            return AwaitingInput(self.session_id, driver=self)
        self._turn_counter += 1
        turn = TurnState(
            f"turn-{self._turn_counter}",
            self._cancellation.checkpoint() if self._cancellation is not None else None,
        )
        self._turn = turn
        if self._observers:
            self._emit(TurnStarted(self.session_id, turn.turn_id))
        return await self._call_model(turn, MutationPoint.AFTER_TURN_ENDED)

    # -- persistence ---------------------------------------------------------

    async def _persist(self) -> None:
        """Save a checkpoint after a step (calls still running are saved as not started)."""
        await self._save(self._state)
