"""The ``LoopDriver``: a thin async shell around the synchronous ``LoopCore``.

The core (``_core.py``) holds the state and the transition table; the shell
performs the effects: the model call (``_model_calls.py``), the tool-call
pipeline (``_pipeline.py``), store saves (``_persistence.py``) and observer
events (``_effects.py``). ``next()`` is a dispatcher over an ordered tuple of
``_try_<phase>()`` methods; the first that returns a step wins (see
``docs/loop.md``):

1. finish a turn an interrupt cancelled while it waited on the host;
2. run (or deny) calls whose approvals were answered;
3. surface the next unsurfaced approval, else re-surface the first unresolved one;
4. continue a tool round with calls not yet started;
5. drain finished background results into the transcript; then, after an
   ``AfterToolResult`` pause, call the model; else with input (or drained
   results) start a new turn; without, return ``AwaitingInput``.

Only ``LoopCore.handle`` changes the state.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._log import get_logger
from ..core._errors import IdleLoopWarning, InvalidInputError, InvalidStateError
from ..core._items import Item, ItemKind, Usage
from ..model._config import PromptCacheRequest, SessionConfig
from ._checkpoint import capture, check_checkpointable, restore_turn
from ._core import LoopCore, checked_input, event_after
from ._effects import DriverParts, Effects
from ._events import ApprovalAnswered, InputAccepted, LoopWarning, RunFailed, TurnStarted
from ._model_calls import ModelCaller, ready
from ._mutators import LoopMutator, MutationPoint
from ._persistence import Persistence
from ._pipeline import ToolPipeline
from ._state import (
    WAITING_FOR_APPROVAL,
    CallStatus,
    DriverEvent,
    DriverState,
    QueuedMessage,
    Restored,
    RetryPoint,
    RoundCall,
    TurnPhase,
)
from ._steps import (
    AfterToolResult,
    AnswerKind,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    Finished,
    Resolver,
    Step,
)

__all__ = ["LoopDriver", "LoopSnapshot"]

log = get_logger()

IDLE_STEPS_BEFORE_WARNING = 5
"""How many ``AwaitingInput`` steps in a row, with no input submitted, make a warning."""

_IDLE_HINT = (
    "the driver is idle and next() returns AwaitingInput at once: submit input "
    "(step.submit(...) or driver.submit_input(...)) or end the host loop on AwaitingInput"
)


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class LoopSnapshot:
    """A read-only copy of what the driver holds: transcript and queued input."""

    session_id: str
    transcript: tuple[Item, ...] = attrs.field(converter=_to_items)
    pending_input: tuple[Item, ...] = attrs.field(converter=_to_items)


class LoopDriver:
    """Advances one session a step at a time; see the module docstring for the order."""

    __slots__ = (
        "__weakref__",
        "_cancellation",
        "_config",
        "_core",
        "_fx",
        "_idle_steps",
        "_model",
        "_persistence",
        "_pipeline",
        "_tasks",
    )

    def __init__(
        self, parts: DriverParts, transcript: Sequence[Item], pending: Sequence[Item]
    ) -> None:
        self._fx = Effects(parts)
        self._config = parts.config
        self._tasks = parts.task_manager
        self._cancellation = parts.cancellation
        self._core = LoopCore(parts.config, transcript, pending, self._fx.on_append())
        self._persistence = Persistence(parts.store, self._fx)
        self._pipeline = ToolPipeline(self._core, self._fx, self._persistence, self)
        self._model = ModelCaller(self._core, self._fx, self._persistence, self._pipeline)
        self._idle_steps = 0  # AwaitingInput steps in a row with nothing submitted

    @classmethod
    def _restore(
        cls, parts: DriverParts, restored: Restored, started_calls: frozenset[str]
    ) -> LoopDriver:
        """A driver continuing from a parsed checkpoint (see ``Agent.resume``)."""
        driver = cls(parts, restored.transcript, restored.pending_input)
        turn = restored.turn
        doubted: list[RoundCall] = []
        if turn is not None:
            snapshot = driver._cancellation.snapshot() if driver._cancellation else None
            doubted = restore_turn(turn, snapshot, started_calls, driver)
        driver._core.restore(restored, turn)
        for call in doubted:
            driver._warn(
                f"call {call.call.id} ({call.call.name}) started before the restore and "
                "has no result; answered as in doubt instead of running it again"
            )
        if driver._core.detached:
            driver._warn(
                "restored with background calls "
                f"{', '.join(sorted(driver._core.detached))} outstanding: their results arrive "
                "only if this process's task manager still runs them"
            )
        return driver

    def _warn(self, message: str) -> None:
        if self._fx.observed:
            self._fx.emit(LoopWarning(message))

    # -- public surface ------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session this driver advances."""
        return self._config.session_id

    @property
    def state(self) -> DriverState:
        """The driver's current state."""
        return self._core.state

    @property
    def config(self) -> SessionConfig:
        """The session configuration."""
        return self._config

    @property
    def usage(self) -> Usage | None:
        """Usage summed over every model call of this driver."""
        return self._core.session_usage

    async def next(self) -> Step:
        """Advance by one step and return ``Finished`` or an interrupt to resolve."""
        if self._persistence.enabled:
            await self._persistence.save_input(self._core)  # queued input is durable first
        self._begin_step(DriverEvent.STEP, "call next()")
        return await self._run_step(self._step)

    async def _next_through_pauses(self, pauses: int) -> tuple[Step, int]:
        """``next()``, going on through at most ``pauses`` ``AfterToolResult`` pauses in
        the same step; returns the step and how many pauses it went through (internal).

        For a host that answers every pause with ``next()`` and nothing else
        (``run()`` without hooks): between such a pause and that ``next()``
        nothing suspends, so nobody can see the pause or interject, and the
        result is the same as calling ``next()`` for each (the same state
        transitions, in the same order). A driver with a store takes every
        step (each pause is saved).
        """
        if self._persistence.enabled or pauses < 1:
            return await self.next(), 0
        self._begin_step(DriverEvent.STEP, "call next()")
        passed = 0
        # _run_step's work, inline: one coroutine frame less per suspended step.
        try:
            step = await self._step()
            while passed < pauses and isinstance(step, AfterToolResult):
                passed += 1
                self._core.handle(DriverEvent.PAUSE)  # what returning the pause does
                self._core.handle(DriverEvent.STEP)  # and what the next next() does
                del step  # not held while the next step runs (many waiting sessions)
                step = await self._step()
        except BaseException as error:
            await self._step_raised(error)
            raise
        self._core.handle(event_after(step))
        self._count_idle(step)
        return step, passed

    async def retry(self, *, mutators: Sequence[LoopMutator] = ()) -> Step:
        """Issue the failed model call again, with the transcript as it is.

        Allowed after a turn finished with ``FinishReason.ERROR`` (see
        :attr:`retry_point`) and nothing started since; starts a new turn that
        calls the model on the same transcript. Mutators run first, at the
        failed call's mutation point: ``mutators`` (this retry only, e.g. a
        compactor after a ``CONTEXT_OVERFLOW``), then the agent's own. Pending
        input and queued messages stay queued. Returns the step like ``next()``.
        """
        core = self._core
        for position, mutator in enumerate(mutators):
            if not callable(getattr(mutator, "mutate", None)):
                raise InvalidInputError(
                    f"retry(): mutators[{position}] is a {type(mutator).__name__}, not a "
                    "LoopMutator (it needs an async mutate(cursor, ctx) method)"
                )
        if core.retry_point is None:
            self._refuse_outside_idle("retry()")
            raise InvalidStateError(
                "cannot retry(): no model call failed since the last turn started; "
                "use continue_turn() to call the model on the transcript as it is, "
                "or submit input and call next()"
            )
        self._begin_step(DriverEvent.RETRY, "retry()")
        point = MutationPoint(core.retry_point.point)
        return await self._run_step(lambda: self._start_model_turn(point, tuple(mutators)))

    async def continue_turn(self) -> Step:
        """Call the model on the transcript as it is, in a new turn (seed 003's continue).

        The transcript must end in a user, tool or notification item; an
        assistant tail (or an empty transcript) is refused with
        ``InvalidStateError`` and nothing changes. Pending input stays pending.
        Use it for a driver rebuilt from a transcript whose last model call
        never answered.
        """
        self._refuse_outside_idle("continue_turn()")
        point = MutationPoint(self._core.continue_point("continue_turn()"))
        self._begin_step(DriverEvent.CONTINUE, "continue_turn()")
        return await self._run_step(lambda: self._start_model_turn(point))

    @property
    def retry_point(self) -> RetryPoint | None:
        """Where the last turn ended because a model call failed (``retry()`` resumes
        there), or ``None``. ``retry_point.error.kind`` says what failed."""
        return self._core.retry_point

    async def _start_model_turn(
        self, point: MutationPoint, mutators: tuple[LoopMutator, ...] = ()
    ) -> Step:
        turn = self._core.start_turn(self._cancellation.snapshot() if self._cancellation else None)
        if self._fx.observed:
            self._fx.emit(TurnStarted(self.session_id, turn.turn_id))
        return await self._model.call_model(turn, point, fold_input=False, extra_mutators=mutators)

    def _refuse_outside_idle(self, operation: str) -> None:
        core = self._core
        if core.state is DriverState.AFTER_TOOL_RESULT:
            turn_id = core.turn.turn_id if core.turn is not None else "the turn"
            raise InvalidStateError(
                f"cannot {operation} in state AFTER_TOOL_RESULT: {turn_id} is paused after a "
                "tool round and calls the model on the next next(); call next() instead"
            )
        core.require_state(operation, DriverState.IDLE)

    async def _run_step(self, body: Callable[..., Awaitable[Step]], *args: Any) -> Step:
        try:
            step = await body(*args)
        except BaseException as error:
            await self._step_raised(error)
            raise
        self._core.handle(event_after(step))
        self._count_idle(step)
        if self._persistence.enabled:
            try:
                await self._persistence.save_step(self._core, step)
            except anyio.get_cancelled_exc_class():
                # Cancelled before the step's save started: a round's results no save
                # holds yet are saved all the same, by the step's save (shielded).
                if self._persistence.results_unsaved:
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await self._persistence.save_step(self._core, step)
                raise
        return step

    def _count_idle(self, step: Step) -> None:
        """Warn once when a host keeps calling ``next()`` on ``AwaitingInput`` (a spin)."""
        if not isinstance(step, AwaitingInput):
            self._idle_steps = 0
            return
        self._idle_steps += 1
        if self._idle_steps != IDLE_STEPS_BEFORE_WARNING:
            return
        message = (
            f"session {self.session_id!r}: next() returned AwaitingInput "
            f"{IDLE_STEPS_BEFORE_WARNING} times in a row with no input submitted; {_IDLE_HINT}"
        )
        warnings.warn(message, IdleLoopWarning, stacklevel=4)
        log.warning(
            "idle loop",
            session_id=self.session_id,
            awaiting_input=IDLE_STEPS_BEFORE_WARNING,
            hint=_IDLE_HINT,
        )
        self._warn(message)

    async def _step_raised(self, error: BaseException) -> None:
        """What a step that raised ``error`` leaves behind (the caller re-raises it)."""
        if self._persistence.results_unsaved:  # what a save of their own would have held
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self._persistence.save_results_after_fault(self._core)
        if isinstance(error, anyio.get_cancelled_exc_class()):
            # The host cancelled the task awaiting next(): close the turn so the
            # transcript stays provider-valid, then let the cancellation go on.
            with anyio.CancelScope(shield=True):
                if self._core.turn is not None:
                    await self._pipeline.finish_cancelled(self._core.turn, "host")
            self._core.handle(DriverEvent.HOST_CANCEL)
            return
        self._core.failure = error
        self._core.handle(DriverEvent.FAIL)
        if self._fx.observed:
            self._fx.emit(RunFailed(f"{type(error).__name__}: {error}"))

    async def save(self) -> None:
        """Save the session to the agent's store now (retry after a ``SaveError``)."""
        await self._persistence.save_now(self._core)

    async def run_until_blocked(self) -> Finished | AwaitingInput | ApprovalRequest:
        """Call ``next()`` through ``AfterToolResult`` pauses; return the first other step."""
        while True:
            step = await self.next()
            if not isinstance(step, AfterToolResult):
                return step

    def submit_input(self, items: str | Sequence[Item]) -> None:
        """Queue ``items`` for the next model call (a new turn, or after a pause).

        A string is one user message: ``submit_input("hi")`` is
        ``submit_input([Item.text(ItemKind.USER, "hi")])``.
        """
        self._require_input_state("submit input")
        if isinstance(items, str):
            if not items:
                raise InvalidInputError(
                    "submit_input: the message is an empty string; give some text or a list "
                    "of Items"
                )
            items = (Item.text(ItemKind.USER, items),)
        elif not isinstance(items, Item) and (
            isinstance(items, bytes | bytearray) or not hasattr(items, "__iter__")
        ):
            raise InvalidInputError(
                "submit_input expects a str (one user message) or a sequence of Items, "
                f"got {type(items).__name__}"
            )
        checked = checked_input(items)
        self._core.pending_input = (*self._core.pending_input, *checked)
        self._idle_steps = 0
        if self._fx.observed:
            self._fx.emit(InputAccepted(self.session_id, checked))

    def set_next_turn_cache(self, request: PromptCacheRequest | None) -> None:
        """Use ``request`` for the next model call only (then the session default again)."""
        self._require_input_state("set the next turn's cache request")
        if request is not None and not isinstance(request, PromptCacheRequest):
            raise InvalidInputError(
                f"set_next_turn_cache expects a PromptCacheRequest or None, got {request!r}"
            )
        self._core.next_turn_cache = request

    def steer(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message for the model at the next tool-call boundary.

        Callable at any time, even while ``next()`` runs. At the boundary the
        round's calls not yet started (or still awaiting approval) are answered
        "skipped: <label> sent a new message", and the message goes to the
        model in the continuation call. Queued messages survive a cancelled turn.
        """
        message = self._queued("steer", items, label)
        self._core.steering = (*self._core.steering, message)

    def follow_up(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message that starts a new turn when the current one finishes.

        Callable at any time, even while ``next()`` runs; a cancelled turn
        leaves it queued for the next turn that finishes.
        """
        message = self._queued("follow_up", items, label)
        self._core.follow_ups = (*self._core.follow_ups, message)

    @property
    def queued_steering(self) -> tuple[QueuedMessage, ...]:
        """Steering messages not yet delivered, oldest first."""
        return self._core.steering

    @property
    def queued_follow_ups(self) -> tuple[QueuedMessage, ...]:
        """Follow-up messages not yet started, oldest first."""
        return self._core.follow_ups

    def clear_queues(self) -> tuple[QueuedMessage, ...]:
        """Drop every queued steering and follow-up message; return them."""
        core = self._core
        dropped = (*core.steering, *core.follow_ups)
        core.steering = core.follow_ups = ()
        return dropped

    def resolve_approval(self, decision: ApprovalAnswer) -> None:
        """Deprecated name of :meth:`answer_approval` (kept for one release)."""
        _deprecated("resolve_approval", "answer_approval")
        self.answer_approval(decision)

    def resolve_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Deprecated name of :meth:`answer_approval_for` (kept for one release)."""
        _deprecated("resolve_approval_for", "answer_approval_for")
        self.answer_approval_for(call_id, decision)

    def answer_approval(self, decision: ApprovalAnswer) -> None:
        """Answer the one pending approval (raises if there are none or several)."""
        undecided = self._undecided_calls("answer an approval")
        if len(undecided) > 1:
            ids = ", ".join(call.call.id for call in undecided)
            raise InvalidStateError(
                f"cannot answer an approval: {len(undecided)} are pending ({ids}); "
                "use answer_approval_for(call_id, decision)"
            )
        self.answer_approval_for(undecided[0].call.id, decision)

    def answer_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Answer the approval for ``call_id``; ``next()`` then runs or denies the call."""
        if not isinstance(decision, ApprovalAnswer):
            raise InvalidInputError(
                f"answer_approval_for expects an ApprovalAnswer, got {decision!r}; "
                "use ApprovalAnswer.approve(), .approve_with(input) or .deny(reason)"
            )
        undecided = self._undecided_calls(f"answer the approval for {call_id}")
        turn = self._core.turn
        assert turn is not None
        assert turn.round is not None
        call = turn.round.by_id(call_id)
        if call is None or call.status not in WAITING_FOR_APPROVAL:
            pending = ", ".join(c.call.id for c in undecided)
            raise InvalidStateError(
                f"cannot answer the approval for {call_id}: no approval is pending for it "
                f"(pending: {pending})"
            )
        if call.status is CallStatus.DECIDED:
            assert call.decision is not None
            raise InvalidStateError(
                f"cannot answer the approval for {call_id}: it was already answered "
                f"({call.decision.kind}); call next() to continue"
            )
        call.decision = decision
        call.move(CallStatus.DECIDED)
        if self._fx.observed:
            self._fx.emit(
                ApprovalAnswered(
                    call_id, decision.approved, decision.kind is AnswerKind.APPROVE_WITH
                )
            )

    def snapshot(self) -> LoopSnapshot:
        """A copy of the transcript and the queued input."""
        return LoopSnapshot(self.session_id, self._core.transcript, self._core.pending_input)

    def checkpoint(self) -> dict[str, Any]:
        """The driver's whole state as a versioned, JSON-compatible document.

        Works between steps; ``Agent.resume(document)`` continues from it.
        Raises ``InvalidStateError`` while a step runs, after the driver
        FAILED, or while calls of the round still execute beside a pending
        approval. A turn that failed (``FinishReason.ERROR``) is checkpointed
        with its retry point.
        """
        check_checkpointable(self._core)
        return capture(self._core, self._core.state, self._config)

    # -- state checks ------------------------------------------------------

    def _begin_step(self, event: DriverEvent, operation: str) -> None:
        core = self._core
        if core.state is DriverState.FAILED:
            raise InvalidStateError(
                f"cannot {operation} in state FAILED: an earlier step raised "
                f"{type(core.failure).__name__}: {core.failure}; start or resume a new driver"
            )
        if core.state is DriverState.STEPPING:
            raise InvalidStateError(
                f"cannot {operation} in state STEPPING: another step is still running; "
                "await it first"
            )
        core.handle(event)

    def _require_input_state(self, operation: str) -> None:
        self._core.require_state(operation, DriverState.IDLE, DriverState.AFTER_TOOL_RESULT)

    def _queued(self, operation: str, items: Sequence[Item], label: str) -> QueuedMessage:
        """``items`` checked as a message to queue (``operation`` names the call)."""
        core = self._core
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

    def _undecided_calls(self, operation: str) -> list[RoundCall]:
        core = self._core
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
        undecided = core.undecided_calls()
        if not undecided:
            raise InvalidStateError(
                f"cannot {operation}: every pending approval is answered; call next()"
            )
        return undecided

    def _step(self) -> Awaitable[Step]:
        turn = self._core.turn
        if turn is None or (turn.round is None and not turn.is_cancelled):
            # The first four phases have nothing to do without a round or an
            # interrupt (and no coroutine of its own: one frame less to resume).
            return self._try_call_model()
        return self._step_through_phases()

    async def _step_through_phases(self) -> Step:
        for phase in _PHASES:
            step = await phase(self)
            if step is not None:
                return step
        raise AssertionError("the last phase always returns a step")  # pragma: no cover

    # -- phases --------------------------------------------------------------

    async def _try_cancelled_turn(self) -> Step | None:
        turn = self._core.turn
        if turn is None or not turn.is_cancelled:
            return None
        stage = "pause" if turn.phase is TurnPhase.PAUSED else "approval"
        return await self._pipeline.finish_cancelled(turn, stage)

    async def _try_resolved_approvals(self) -> Step | None:
        turn = self._core.turn
        if turn is None or turn.round is None:
            return None
        await self._persistence.record_decisions(turn.round)
        if not self._pipeline.apply_decisions(turn.round):
            return None
        return await self._pipeline.advance(turn, turn.round)

    async def _try_surface_approval(self) -> Step | None:
        turn = self._core.turn
        if turn is None or turn.round is None:
            return None
        return self._pipeline.surface_approval(turn.round)

    async def _try_continue_round(self) -> Step | None:
        # A round no approval holds up: calls to start, calls still running,
        # or (after a restore) results not yet appended.
        turn = self._core.turn
        if turn is None or turn.round is None:
            return None
        return await self._pipeline.advance(turn, turn.round)

    def _try_call_model(self) -> Awaitable[Step]:
        """Drain background results; resume a paused turn, or start one, or wait for input.

        Returns what to await (no coroutine of its own: one frame less per step).
        """
        done = self._tasks.take_background_results()
        for update in done:
            self._pipeline.append_result(update.result, background=True)
        core = self._core
        turn = core.turn
        if turn is not None and turn.phase is TurnPhase.PAUSED:
            turn.phase = TurnPhase.ACTIVE
            return self._model.call_model(turn, MutationPoint.AFTER_TOOL_RESULT)
        if not core.pending_input and not done:
            if core.retry_point is not None:
                error = core.retry_point.error
                return ready(
                    AwaitingInput(
                        self.session_id,
                        f"{core.retry_point.turn_id} ended because a model call failed "
                        f"({error.kind.value}: {error}); call retry() or submit input",
                        driver=self,
                    )
                )
            return ready(AwaitingInput(self.session_id, driver=self))
        turn = core.start_turn(self._cancellation.snapshot() if self._cancellation else None)
        if self._fx.observed:
            self._fx.emit(TurnStarted(self.session_id, turn.turn_id))
        return self._model.call_model(turn, MutationPoint.AFTER_TURN_ENDED)


_PHASES: tuple[Callable[[LoopDriver], Awaitable[Step | None]], ...] = (
    LoopDriver._try_cancelled_turn,
    LoopDriver._try_resolved_approvals,
    LoopDriver._try_surface_approval,
    LoopDriver._try_continue_round,
    LoopDriver._try_call_model,
)
"""A step's phases in order (see the module docstring); the first that returns a step ends it."""


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"LoopDriver.{old} is deprecated; use LoopDriver.{new}", DeprecationWarning, stacklevel=3
    )


if TYPE_CHECKING:  # the interrupts resolve through the driver: it must stay a Resolver
    _RESOLVER: type[Resolver] = LoopDriver
