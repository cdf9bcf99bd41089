"""The ``LoopDriver``: one loop performing what the core decides.

The core (``_machine.py`` and ``_rounds.py`` over the state in ``_core.py``)
decides every step synchronously and answers each fact with an action
(``_actions.py``); the driver performs it through two effect modules, model
I/O (``_model_io.py``) and tool I/O (``_tool_io.py``), inside two layers set
when the driver is made: durability (``_persistence.py``: a store's saves,
claims and recorded decisions, or ``NoStore``) and observation
(``_observer.py``: the observers, or ``NOBODY``). See ``docs/loop.md`` for the
core's decision table. Only ``LoopCore.handle`` changes the state.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._log import get_logger
from ..core._errors import IdleLoopWarning, InvalidInputError, InvalidStateError
from ..core._items import Item, Usage
from ..model._config import PromptCacheRequest, SessionConfig
from ..model._protocol import TurnRequest
from ._actions import Action, CallModel, FinishCancelled, Hand, RecordDecisions, RunRound
from ._checkpoint import capture, check_checkpointable, restore_turn
from ._core import LoopCore, event_after
from ._effects import CLEANUP_SECONDS, DriverParts, cancel_scope, transcript_listener
from ._host_calls import (
    answer_approval,
    begin_step,
    input_items,
    queued_message,
    refuse_outside_idle,
    sole_undecided,
)
from ._machine import LoopMachine
from ._model_io import ModelIO, MutatorsCancelled
from ._mutators import LoopMutator, MutationPoint
from ._observer import observers_of
from ._persistence import journal_for
from ._state import (
    CallStatus,
    DriverEvent,
    DriverState,
    QueuedMessage,
    Restored,
    RetryPoint,
    RoundCall,
)
from ._steps import (
    AfterToolResult,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    Finished,
    Resolver,
    Step,
)
from ._tool_io import ToolIO

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
    """Advances one session a step at a time (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_core",
        "_idle_steps",
        "_journal",
        "_machine",
        "_model_io",
        "_mutators",
        "_tools",
    )

    def __init__(
        self, parts: DriverParts, transcript: Sequence[Item], pending: Sequence[Item]
    ) -> None:
        config = parts.config
        observer = observers_of(parts.observers)
        self._core = core = LoopCore(
            config, transcript, pending, transcript_listener(parts.transcript_observers)
        )
        self._machine = LoopMachine(
            core,
            config,
            observer,
            cancellation=parts.cancellation,
            model_name=parts.model_name,
            tasks_name=type(parts.task_manager).__name__,
        )
        self._journal = journal_for(parts.store, config, observer)
        self._model_io = ModelIO(
            parts.session, config.session_id, config.limits.request_timeout, observer
        )
        self._tools = ToolIO(parts)
        self._mutators = parts.mutators
        self._idle_steps = 0  # AwaitingInput steps in a row with nothing submitted

    @classmethod
    def _restore(
        cls, parts: DriverParts, restored: Restored, started_calls: frozenset[str]
    ) -> LoopDriver:
        """A driver continuing from a parsed checkpoint (see ``Agent.resume``)."""
        driver = cls(parts, restored.transcript, restored.pending_input)
        core, observer = driver._core, driver._machine.observer
        turn = restored.turn
        doubted = []
        if turn is not None:
            snapshot = parts.cancellation.snapshot() if parts.cancellation else None
            doubted = restore_turn(turn, snapshot, started_calls, driver)
        core.restore(restored, turn)
        for call in doubted:
            observer.warning(
                f"call {call.call.id} ({call.call.name}) started before the restore and "
                "has no result; answered as in doubt instead of running it again"
            )
        if core.detached:
            observer.warning(
                "restored with background calls "
                f"{', '.join(sorted(core.detached))} outstanding: their results arrive "
                "only if this process's task manager still runs them"
            )
        return driver

    # -- reading -------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session this driver advances."""
        return self._machine.session_id

    @property
    def state(self) -> DriverState:
        """The driver's current state."""
        return self._core.state

    @property
    def config(self) -> SessionConfig:
        """The session configuration."""
        return self._machine.config

    @property
    def usage(self) -> Usage | None:
        """Usage summed over every model call of this driver."""
        return self._core.session_usage

    @property
    def retry_point(self) -> RetryPoint | None:
        """Where the last turn ended because a model call failed (``retry()`` resumes
        there), or ``None``. ``retry_point.error.kind`` says what failed."""
        return self._core.retry_point

    @property
    def queued_steering(self) -> tuple[QueuedMessage, ...]:
        """Steering messages not yet delivered, oldest first."""
        return self._core.steering

    @property
    def queued_follow_ups(self) -> tuple[QueuedMessage, ...]:
        """Follow-up messages not yet started, oldest first."""
        return self._core.follow_ups

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
        return capture(self._core, self._core.state, self.config)

    # -- steps ---------------------------------------------------------------

    async def next(self) -> Step:
        """Advance by one step and return ``Finished`` or an interrupt to resolve."""
        await self._journal.save_input(self._core)  # queued input is durable first
        begin_step(self._core, DriverEvent.STEP, "call next()")
        return await self._run_step(None)

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
            refuse_outside_idle(core, "retry()")
            raise InvalidStateError(
                "cannot retry(): no model call failed since the last turn started; "
                "use continue_turn() to call the model on the transcript as it is, "
                "or submit input and call next()"
            )
        begin_step(core, DriverEvent.RETRY, "retry()")
        point = MutationPoint(core.retry_point.point)
        turn = self._machine.start_turn()
        return await self._run_step(CallModel(turn, point, False, tuple(mutators)))

    async def continue_turn(self) -> Step:
        """Call the model on the transcript as it is, in a new turn (seed 003's continue).

        The transcript must end in a user, tool or notification item; an
        assistant tail (or an empty transcript) is refused with
        ``InvalidStateError`` and nothing changes. Pending input stays pending.
        Use it for a driver rebuilt from a transcript whose last model call
        never answered.
        """
        refuse_outside_idle(self._core, "continue_turn()")
        point = MutationPoint(self._core.continue_point("continue_turn()"))
        begin_step(self._core, DriverEvent.CONTINUE, "continue_turn()")
        return await self._run_step(CallModel(self._machine.start_turn(), point, False))

    async def run_until_blocked(self) -> Finished | AwaitingInput | ApprovalRequest:
        """Call ``next()`` through ``AfterToolResult`` pauses; return the first other step."""
        while True:
            step = await self.next()
            if not isinstance(step, AfterToolResult):
                return step

    async def save(self) -> None:
        """Save the session to the agent's store now (retry after a ``SaveError``)."""
        await self._journal.save_now(self._core)

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
        if self._journal.saves_steps or pauses < 1:
            return await self.next(), 0
        core = self._core
        begin_step(core, DriverEvent.STEP, "call next()")
        passed = 0
        try:
            step = await self._perform(None)
            while passed < pauses and isinstance(step, AfterToolResult):
                passed += 1
                core.handle(DriverEvent.PAUSE)  # what returning the pause does
                core.handle(DriverEvent.STEP)  # and what the next next() does
                del step  # not held while the next step runs (many waiting sessions)
                step = await self._perform(None)
        except BaseException as error:
            await self._step_raised(error)
            raise
        core.handle(event_after(step))
        self._count_idle(step)
        return step, passed

    async def _run_step(self, action: Action | None) -> Step:
        try:
            step = await self._perform(action)
        except BaseException as error:
            await self._step_raised(error)
            raise
        core, journal = self._core, self._journal
        core.handle(event_after(step))
        self._count_idle(step)
        try:
            await journal.save_step(core, step)
        except anyio.get_cancelled_exc_class():
            # Cancelled before the step's save started: a round's results no save
            # holds yet are saved all the same, by the step's save (shielded).
            if journal.results_unsaved:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await journal.save_step(core, step)
            raise
        return step

    # -- the loop ------------------------------------------------------------

    async def _perform(self, action: Action | None) -> Step:
        """Perform ``action`` (``None``: the step's first, from ``LoopMachine.begin``) and
        each one the core answers with, until it hands the host a step."""
        machine, journal, tools = self._machine, self._journal, self._tools
        if action is None:
            action = machine.begin(self)
        while True:
            if isinstance(action, CallModel):
                prepared = await self._prepare_model_call(action)
                if not isinstance(prepared, TurnRequest):
                    action = prepared
                    continue
                # The stream is read right here: a session waiting for its model holds
                # one frame of this loop and one of the model I/O.
                answer = await self._model_io.stream(action.turn, prepared)
                action = machine.model_answered(action.turn, action.point, answer, self)
            elif isinstance(action, RunRound):
                action = await self._run_round(action)
            elif isinstance(action, Hand):
                return action.step
            elif isinstance(action, RecordDecisions):
                await journal.record_decisions(action.round)
                action = machine.after_decisions(action.turn, action.round, self)
            elif isinstance(action, FinishCancelled):
                return await self._finish_cancelled(action)
            else:
                action = machine.background_taken(tools.take_background(), self)

    async def _prepare_model_call(self, action: CallModel) -> TurnRequest | Action:
        """Deliver the input, run the mutators, save, and make the request (or the action
        that ends the turn instead)."""
        machine, core, turn = self._machine, self._core, action.turn
        if action.fold_input:
            core.deliver_steering()
            core.fold_pending_input()
        mutators = (*action.mutators, *self._mutators) if action.mutators else self._mutators
        if mutators:
            point = action.point
            changed = await self._model_io.run_mutators(turn, point, mutators, core.transcript)
            if isinstance(changed, MutatorsCancelled):
                return FinishCancelled(turn, "mutator")
            if changed is not None:
                core.replace_transcript(changed)
        if (done := machine.nothing_to_answer(turn)) is not None:
            return done
        # A round's results before the model is waited for, and before the call is
        # counted: a restore from this save makes the same call, counted once.
        await self._journal.save_results(core)
        return machine.next_request(turn, self._tools)

    async def _run_round(self, action: RunRound) -> Action:
        """Start every startable call, wait for the foreground ones; the core says what's
        next (results are appended in the model's call order)."""
        machine, journal, core = self._machine, self._journal, self._core
        turn, tool_round = action.turn, action.round
        if action.fresh:
            await journal.save_response(core)
        with cancel_scope(turn):
            for call in tool_round.calls:
                if call.status is not CallStatus.PREPARED:
                    continue
                if machine.skip_at_steering(call, tool_round):
                    continue
                await journal.save_results(core)  # the results so far, before this call runs
                await self._start_call(action, call)
                journal.note_finished_calls(tool_round)
            if (approval := machine.new_approval(turn, tool_round)) is not None:
                # Approvals surface one by one while the other calls keep running;
                # their results are collected when the round resumes.
                return Hand(approval)
            while tool_round.running():
                await journal.save_results(core)  # the results so far, before waiting
                update = await self._tools.wait(turn.turn_id)
                if update is None:
                    break
                machine.turn_update(tool_round, update)
                journal.note_finished_calls(tool_round)
        return machine.round_collected(turn, tool_round, self)

    async def _start_call(self, action: RunRound, call: RoundCall) -> None:
        machine, turn, tool_round = self._machine, action.turn, action.round
        prepared = machine.call_prepared(turn, call, tool_round, self._tools.prepare(call), self)
        if prepared is None:
            return
        idempotent = prepared.tool.spec.annotations.idempotent
        refusal = await self._journal.claim(call, prepared.request, idempotent=idempotent)
        if refusal is not None:  # claimed before, or denied in the store: not run
            machine.finalize(call, tool_round, *refusal)
            return
        machine.call_running(call)
        sole = len(tool_round.calls) == 1
        started = await self._tools.start(turn, call, prepared, sole=sole)
        machine.call_started(call, tool_round, started)

    async def _finish_cancelled(self, action: FinishCancelled) -> Step:
        """Stop the cancelled turn's running calls (bounded, shielded); the core closes it."""
        machine, turn = self._machine, action.turn
        tool_round = turn.round
        if tool_round is not None:
            machine.append_results(turn, tool_round)
            if tool_round.running():
                with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                    await self._journal.save_results(self._core)  # the results so far
                    await self._tools.tasks.on_turn_interrupted(turn.turn_id)
        return machine.close_cancelled(turn, action.stage, self._tools.interrupted)

    async def _step_raised(self, error: BaseException) -> None:
        """What a step that raised ``error`` leaves behind (the caller re-raises it)."""
        core, journal = self._core, self._journal
        if journal.results_unsaved:  # what a save of their own would have held
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await journal.save_results_after_fault(core)
        if isinstance(error, anyio.get_cancelled_exc_class()):
            # The host cancelled the task awaiting next(): close the turn so the
            # transcript stays provider-valid, then let the cancellation go on.
            with anyio.CancelScope(shield=True):
                if core.turn is not None:
                    await self._finish_cancelled(FinishCancelled(core.turn, "host"))
            core.handle(DriverEvent.HOST_CANCEL)
            return
        core.failure = error
        core.handle(DriverEvent.FAIL)
        self._machine.observer.run_failed(error)

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
        self._machine.observer.warning(message)

    # -- the host's input and answers ------------------------------------------

    def submit_input(self, items: str | Sequence[Item]) -> None:
        """Queue ``items`` for the next model call (a new turn, or after a pause).

        A string is one user message: ``submit_input("hi")`` is
        ``submit_input([Item.text(ItemKind.USER, "hi")])``.
        """
        checked = input_items(self._core, items)
        self._core.pending_input = (*self._core.pending_input, *checked)
        self._idle_steps = 0
        self._machine.observer.input_accepted(self.session_id, checked)

    def set_next_turn_cache(self, request: PromptCacheRequest | None) -> None:
        """Use ``request`` for the next model call only (then the session default again)."""
        self._core.require_state(
            "set the next turn's cache request", DriverState.IDLE, DriverState.AFTER_TOOL_RESULT
        )
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
        message = queued_message(self._core, "steer", items, label)
        self._core.steering = (*self._core.steering, message)

    def follow_up(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message that starts a new turn when the current one finishes.

        Callable at any time, even while ``next()`` runs; a cancelled turn
        leaves it queued for the next turn that finishes.
        """
        message = queued_message(self._core, "follow_up", items, label)
        self._core.follow_ups = (*self._core.follow_ups, message)

    def clear_queues(self) -> tuple[QueuedMessage, ...]:
        """Drop every queued steering and follow-up message; return them."""
        core = self._core
        dropped = (*core.steering, *core.follow_ups)
        core.steering = core.follow_ups = ()
        return dropped

    def answer_approval(self, decision: ApprovalAnswer) -> None:
        """Answer the one pending approval (raises if there are none or several)."""
        self.answer_approval_for(sole_undecided(self._core), decision)

    def answer_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Answer the approval for ``call_id``; ``next()`` then runs or denies the call."""
        answer_approval(self._core, call_id, decision, self._machine.observer)

    def resolve_approval(self, decision: ApprovalAnswer) -> None:
        """Deprecated name of :meth:`answer_approval` (kept for one release)."""
        _deprecated("resolve_approval", "answer_approval")
        self.answer_approval(decision)

    def resolve_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Deprecated name of :meth:`answer_approval_for` (kept for one release)."""
        _deprecated("resolve_approval_for", "answer_approval_for")
        self.answer_approval_for(call_id, decision)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"LoopDriver.{old} is deprecated; use LoopDriver.{new}", DeprecationWarning, stacklevel=3
    )


if TYPE_CHECKING:  # the interrupts resolve through the driver: it must stay a Resolver
    _RESOLVER: type[Resolver] = LoopDriver
