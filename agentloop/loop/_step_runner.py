"""The step loop: performs what the core decides, one action at a time.

``StepRunner.perform`` is the whole of a step: it asks the core
(:class:`~agentloop.loop._machine.LoopMachine`) for the step's first action,
performs each action through the model I/O, the tool I/O and the durable
layer, and hands the outcome back to the core, until the core hands the host a
step. ``resolver`` is the driver the steps resolve through (passed, not held:
no reference from here back to the driver).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import cast

import anyio

from .._log import get_logger
from ..core._errors import IdleLoopWarning
from ..model._protocol import TurnRequest
from ..tasks._protocol import TurnUpdate
from ._actions import Action, CallModel, FinishCancelled, Hand, RecordDecisions, RunRound
from ._core import LoopCore, event_after
from ._effects import CLEANUP_SECONDS, cancel_scope
from ._host_calls import begin_step
from ._machine import LoopMachine
from ._model_io import ModelIO, MutatorsCancelled
from ._mutators import LoopMutator
from ._persistence import Persistence
from ._questions import ASKED, claim_key, surface_question
from ._sampling import answer_with_model
from ._state import CallStatus, DriverEvent, RoundCall, ToolRound, TurnState
from ._steps import AfterToolResult, AwaitingInput, CallQuestion, Resolver, Step
from ._tool_io import ToolIO

__all__ = ["IDLE_STEPS_BEFORE_WARNING", "StepRunner"]

log = get_logger()

IDLE_STEPS_BEFORE_WARNING = 5
"""How many ``AwaitingInput`` steps in a row, with no input submitted, make a warning."""

_IDLE_HINT = (
    "the driver is idle and next() returns AwaitingInput at once: submit input "
    "(step.submit(...) or driver.submit_input(...)) or end the host loop on AwaitingInput"
)


def _nothing_runs(call_id: str) -> bool:
    return False


class StepRunner:
    """One driver's step loop and the effects it performs (see the module docstring)."""

    __slots__ = ("core", "idle_steps", "journal", "machine", "model_io", "mutators", "tools")

    def __init__(
        self,
        machine: LoopMachine,
        journal: Persistence,
        model_io: ModelIO,
        tools: ToolIO,
        mutators: tuple[LoopMutator, ...],
    ) -> None:
        self.machine = machine
        self.core: LoopCore = machine.core
        self.journal = journal
        self.model_io = model_io
        self.tools = tools
        self.mutators = mutators
        self.idle_steps = 0  # AwaitingInput steps in a row with nothing submitted

    async def next_through_pauses(self, pauses: int, resolver: Resolver) -> tuple[Step, int]:
        """``next()``, going on through at most ``pauses`` ``AfterToolResult`` pauses in
        the same step; returns the step and how many pauses it went through (internal).

        For a host that answers every pause with ``next()`` and nothing else
        (``run()`` without hooks): between such a pause and that ``next()``
        nothing suspends, so nobody can see the pause or interject, and the
        result is the same as calling ``next()`` for each (the same state
        transitions, in the same order). A driver with a store takes every
        step (each pause is saved).
        """
        core = self.core
        begin_step(core, DriverEvent.STEP, "call next()")
        passed = 0
        try:
            step = await self.perform(None, resolver)
            while passed < pauses and isinstance(step, AfterToolResult):
                passed += 1
                core.handle(DriverEvent.PAUSE)  # what returning the pause does
                core.handle(DriverEvent.STEP)  # and what the next next() does
                del step  # not held while the next step runs (many waiting sessions)
                step = await self.perform(None, resolver)
        except BaseException as error:
            await self.step_raised(error)
            raise
        core.handle(event_after(step))
        self.count_idle(step)
        return step, passed

    async def run_step(self, action: Action | None, resolver: Resolver) -> Step:
        try:
            step = await self.perform(action, resolver)
        except BaseException as error:
            await self.step_raised(error)
            raise
        core, journal = self.core, self.journal
        core.handle(event_after(step))
        self.count_idle(step)
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

    async def perform(self, action: Action | None, resolver: Resolver) -> Step:
        """Perform ``action`` (``None``: the step's first, from ``LoopMachine.begin``) and
        each one the core answers with, until it hands the host a step."""
        machine, journal, tools = self.machine, self.journal, self.tools
        if action is None:
            action = machine.begin(resolver, tools)
        while True:
            kind = type(action)  # identity, not isinstance: once per action of every step
            if kind is CallModel:
                action = cast(CallModel, action)
                prepared = await self._prepare_model_call(action)
                if type(prepared) is not TurnRequest:
                    action = cast(Action, prepared)
                    continue
                # The stream is read right here: a session waiting for its model holds
                # one frame of this loop and one of the model I/O.
                answer = await self.model_io.stream(action.turn, prepared)
                action = machine.model_answered(action.turn, action.point, answer, resolver)
            elif kind is RunRound:
                action = await self._run_round(cast(RunRound, action), resolver)
            elif kind is Hand:
                return cast(Hand, action).step
            elif kind is RecordDecisions:
                decisions = cast(RecordDecisions, action)
                await journal.record_decisions(decisions.round)
                action = machine.after_decisions(decisions.turn, decisions.round, resolver)
            else:
                return await self.finish_cancelled(cast(FinishCancelled, action))

    async def _prepare_model_call(self, action: CallModel) -> TurnRequest | Action:
        """Deliver the input, run the mutators, save, and make the request (or the action
        that ends the turn instead)."""
        machine, core, turn = self.machine, self.core, action.turn
        if action.fold_input:
            core.deliver_steering()
            core.fold_pending_input()
        mutators = (*action.mutators, *self.mutators) if action.mutators else self.mutators
        if mutators:
            point = action.point
            changed = await self.model_io.run_mutators(turn, point, mutators, core.transcript)
            if isinstance(changed, MutatorsCancelled):
                return FinishCancelled(turn, "mutator")
            if changed is not None:
                core.replace_transcript(changed)
        if (done := machine.nothing_to_answer(turn)) is not None:
            return done
        # A round's results before the model is waited for, and before the call is
        # counted: a restore from this save makes the same call, counted once.
        await self.journal.save_results(core)
        return machine.next_request(turn, self.tools)

    async def _run_round(self, action: RunRound, resolver: Resolver) -> Action:
        """Start every startable call, wait for the foreground ones; the core says what's
        next (results are appended in the model's call order)."""
        machine, journal, core = self.machine, self.journal, self.core
        turn, tool_round, questions = action.turn, action.round, self.tools.questions
        if action.fresh:
            await journal.save_response(core)
        with cancel_scope(turn):
            for call in tool_round.calls:
                if call.status is not CallStatus.PREPARED:
                    continue
                if machine.skip_at_steering(call, tool_round):
                    continue
                await journal.save_results(core)  # the results so far, before this call runs
                await self._start_call(action, call, resolver)
                journal.note_finished_calls(tool_round)
            if (approval := machine.new_approval(turn, tool_round)) is not None:
                # Approvals surface one by one while the other calls keep running;
                # their results are collected when the round resumes.
                return Hand(approval)
            while tool_round.running():
                if questions.asked and (
                    question := await self._question(turn, tool_round, resolver)
                ):
                    return Hand(question)  # the call waits for the answer, running on
                await journal.save_results(core)  # the results so far, before waiting
                update = await self.tools.wait(turn.turn_id)
                if update is None:
                    break
                if update is not ASKED:
                    machine.turn_update(tool_round, cast(TurnUpdate, update))
                    if questions.may_ask:
                        questions.release(tool_round.is_running)
                    journal.note_finished_calls(tool_round)
        return machine.round_collected(turn, tool_round, resolver)

    async def _question(
        self, turn: TurnState, tool_round: ToolRound, resolver: Resolver
    ) -> CallQuestion | None:
        """Answer the running calls' questions for the model; the first one for the host."""
        questions = self.tools.questions
        if questions.for_model_waiting():
            await answer_with_model(self.machine, self.model_io, turn, questions)
        return surface_question(turn, tool_round, questions, resolver)

    async def _start_call(self, action: RunRound, call: RoundCall, resolver: Resolver) -> None:
        machine, turn, tool_round = self.machine, action.turn, action.round
        prepared = machine.call_prepared(turn, call, tool_round, self.tools.prepare(call), resolver)
        if prepared is None:
            return
        idempotent = prepared.tool.spec.annotations.idempotent
        refusal = await self.journal.claim(
            call, prepared.request, idempotent=idempotent, key=claim_key(call)
        )
        if refusal is not None:  # claimed before, or denied in the store: not run
            machine.finalize(call, tool_round, *refusal)
            return
        machine.call_running(call)
        sole = len(tool_round.calls) == 1
        started = await self.tools.start(turn, call, prepared, sole=sole)
        machine.call_started(call, tool_round, started)

    async def finish_cancelled(self, action: FinishCancelled) -> Step:
        """Stop the cancelled turn's running calls (bounded, shielded); the core closes it."""
        machine, turn = self.machine, action.turn
        tool_round = turn.round
        if tool_round is not None:
            machine.append_results(turn, tool_round)
            if tool_round.running():
                with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                    await self.journal.save_results(self.core)  # the results so far
                    await self.tools.tasks.on_turn_interrupted(turn.turn_id)
        self.tools.questions.release(_nothing_runs)  # no question outlives its turn
        return machine.close_cancelled(turn, action.stage, self.tools.interrupted)

    async def step_raised(self, error: BaseException) -> None:
        """What a step that raised ``error`` leaves behind (the caller re-raises it)."""
        core, journal = self.core, self.journal
        if journal.results_unsaved:  # what a save of their own would have held
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await journal.save_results_after_fault(core)
        if isinstance(error, anyio.get_cancelled_exc_class()):
            # The host cancelled the task awaiting next(): close the turn so the
            # transcript stays provider-valid, then let the cancellation go on.
            with anyio.CancelScope(shield=True):
                if core.turn is not None:
                    await self.finish_cancelled(FinishCancelled(core.turn, "host"))
            core.handle(DriverEvent.HOST_CANCEL)
            return
        core.failure = error
        core.handle(DriverEvent.FAIL)
        self.machine.observer.run_failed(error)

    def count_idle(self, step: Step) -> None:
        """Warn once when a host keeps calling ``next()`` on ``AwaitingInput`` (a spin)."""
        if not isinstance(step, AwaitingInput):
            self.idle_steps = 0
            return
        self.idle_steps += 1
        if self.idle_steps != IDLE_STEPS_BEFORE_WARNING:
            return
        message = (
            f"session {self.machine.session_id!r}: next() returned AwaitingInput "
            f"{IDLE_STEPS_BEFORE_WARNING} times in a row with no input submitted; {_IDLE_HINT}"
        )
        warnings.warn(message, IdleLoopWarning, stacklevel=4)
        log.warning(
            "idle loop",
            session_id=self.machine.session_id,
            awaiting_input=IDLE_STEPS_BEFORE_WARNING,
            hint=_IDLE_HINT,
        )
        self.machine.observer.warning(message)
