"""The step loop: performs what the core decides, one action at a time.

``StepRunner.run_step`` is the whole of a step: it asks the core
(:class:`~agentloop.loop._machine.LoopMachine`) for the step's first action,
performs each action through the model I/O and the tool I/O, and hands the
outcome back to the core, until the core hands the host a step. ``resolver``
is the driver the steps resolve through (passed, not held: no reference from
here back to the driver).

This is the step loop of a driver without a store: nothing is saved, claimed
or recorded, and nothing is checked to find that out. A driver with a store
gets :class:`~agentloop.loop._durable_steps.DurableStepRunner`, the same loop
with the durable layer's saves and claims at their points; a driver with a
cancellation handle gets :class:`GuardedStepRunner`, whose rounds run under
the turn's cancel scope (each chosen once, when the driver is made).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Awaitable

import anyio

from .._log import get_logger
from ..core._errors import IdleLoopWarning
from ..model._protocol import TurnRequest
from ..tasks._protocol import TurnUpdate
from ._actions import Action, CallModel, FinishCancelled, Hand, RecordDecisions, RunRound
from ._core import LoopCore, event_after
from ._driver_parts import CLEANUP_SECONDS, cancel_scope
from ._host_calls import begin_step
from ._machine import LoopMachine
from ._model_io import ModelIO, MutatorsCancelled
from ._mutators import LoopMutator
from ._persistence import Persistence, Unsaved
from ._questions import WITHDRAWN, Asked, surface_question
from ._sampling import answer_with_model
from ._state import CallStatus, DriverEvent, RoundCall, ToolRound, TurnState
from ._steps import (
    AfterToolResult,
    AwaitingInput,
    CallQuestion,
    ChildApprovalRequest,
    Resolver,
    Step,
)
from ._tool_io import ToolIO

__all__ = ["IDLE_STEPS_BEFORE_WARNING", "GuardedStepRunner", "StepRunner"]

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

    __slots__ = (
        "core",
        "idle_steps",
        "journal",
        "machine",
        "model_io",
        "mutators",
        "passed",
        "tools",
    )

    saves_steps = False
    """Whether every step is saved (then ``run()`` takes each pause as a step)."""

    def __init__(
        self,
        machine: LoopMachine,
        journal: Persistence | Unsaved,
        model_io: ModelIO,
        tools: ToolIO,
        mutators: tuple[LoopMutator, ...],
    ) -> None:
        self.machine = machine
        self.core: LoopCore = machine.core
        self.journal = journal  # the driver's ``save()`` and leases (refused without a store)
        self.model_io = model_io
        self.tools = tools
        self.mutators = mutators
        self.idle_steps = 0  # AwaitingInput steps in a row with nothing submitted
        self.passed = 0  # the pauses the last step went through (next_through_pauses)

    def next_step(self, resolver: Resolver) -> Awaitable[Step]:
        """``next()``: enter a step and run it."""
        begin_step(self.core, DriverEvent.STEP, "call next()")
        return self.run_step(None, resolver)

    def next_through_pauses(self, pauses: int, resolver: Resolver) -> Awaitable[Step]:
        """``next()``, going on through at most ``pauses`` ``AfterToolResult`` pauses in
        the same step; :attr:`passed` then says how many it went through (internal).

        For a host that answers every pause with ``next()`` and nothing else
        (``run()`` without hooks): between such a pause and that ``next()``
        nothing suspends, so nobody can see the pause or interject, and the
        result is the same as calling ``next()`` for each (the same state
        transitions, in the same order). A driver with a store takes every
        step (each pause is saved).
        """
        begin_step(self.core, DriverEvent.STEP, "call next()")
        return self.run_step(None, resolver, pauses)

    async def run_step(self, action: Action | None, resolver: Resolver, pauses: int = 0) -> Step:
        """The whole of a step: perform ``action`` (``None``: ``next()``, whose first action
        ``LoopMachine.begin`` decides) and each one the core answers with, until it hands
        the host a step (going on through at most ``pauses`` pauses)."""
        machine, core = self.machine, self.core
        self.passed = 0
        self.note_withdrawn()
        try:
            if action is None:
                action = machine.begin(resolver, self.tools)
            while True:
                # By identity, not isinstance: once per action of every step.
                if type(action) is CallModel:
                    turn = action.turn
                    if (done := await self._prepare_transcript(action)) is not None:
                        action = done
                        continue
                    request = machine.next_request(turn, self.tools)
                    if not isinstance(request, TurnRequest):
                        action = request  # the turn ends at a limit
                        continue
                    # The stream is read right here: a session waiting for its model holds
                    # one frame of this loop and one of the model I/O (and no earlier
                    # answer: none is bound to a name that outlives this line).
                    action = machine.model_answered(
                        turn, action.point, await self.model_io.stream(turn, request), resolver
                    )
                elif type(action) is RunRound:
                    action = await self._run_round(action, resolver)
                elif type(action) is Hand:
                    if self.passed < pauses and type(action.step) is AfterToolResult:
                        self.passed += 1
                        core.handle(DriverEvent.PAUSE)  # what returning the pause does
                        core.handle(DriverEvent.STEP)  # and what the next next() does
                        action = machine.begin(resolver, self.tools)
                        continue
                    step = action.step
                    break
                elif type(action) is RecordDecisions:
                    action = await self._record_decisions(action, resolver)
                else:
                    assert type(action) is FinishCancelled
                    step = await self.finish_cancelled(action)
                    break
        except BaseException as error:
            await self.step_raised(error)
            raise
        core.handle(event_after(step))
        self.count_idle(step)
        return step

    def note_withdrawn(self) -> None:
        """Report each question withdrawn since the last look (its call stopped waiting
        for it): an event, and a save that no longer holds it as pending."""
        for question in self.tools.questions.take_withdrawn():
            self.machine.observer.question_answered(question.call_id, question.id, WITHDRAWN)
            self.journal.note_answer()

    async def _prepare_transcript(self, action: CallModel) -> Action | None:
        """Deliver the input and run the mutators before a model call; the action that
        ends the turn instead, if any (``None``: make the request)."""
        turn, core = action.turn, self.core
        if action.fold_input and (core.steering or core.pending_input):
            core.deliver_steering()
            core.fold_pending_input()
        if (action.mutators or self.mutators) and not await self._mutate(action):
            return FinishCancelled(turn, "mutator")
        return self.machine.nothing_to_answer(turn)

    async def _mutate(self, action: CallModel) -> bool:
        """Run the call's mutators, then the agent's own; ``False``: the turn was cancelled."""
        core = self.core
        mutators = (*action.mutators, *self.mutators)
        changed = await self.model_io.run_mutators(
            action.turn, action.point, mutators, core.transcript
        )
        if isinstance(changed, MutatorsCancelled):
            return False
        if changed is not None:
            core.replace_transcript(changed)
        return True

    async def _record_decisions(self, action: RecordDecisions, resolver: Resolver) -> Action:
        """The host's answers on the round's calls (nothing to record without a store)."""
        return self.machine.after_decisions(action.turn, action.round, resolver)

    async def _run_round(self, action: RunRound, resolver: Resolver) -> Action:
        """Start every startable call, wait for the foreground ones; the core says what's
        next (results are appended in the model's call order)."""
        machine, turn, tool_round = self.machine, action.turn, action.round
        for call in tool_round.calls:
            if call.status is not CallStatus.PREPARED:
                continue
            if machine.skip_at_steering(call, tool_round):
                continue
            await self._start_call(action, call, resolver)
        if (approval := machine.new_approval(turn, tool_round)) is not None:
            # Approvals surface one by one while the other calls keep running;
            # their results are collected when the round resumes.
            return Hand(approval)
        if (
            tool_round.running()
            and (question := await self._collect(turn, tool_round, resolver)) is not None
        ):
            return Hand(question)  # the call waits for the answer, running on
        return machine.round_collected(turn, tool_round, resolver)

    async def _question(
        self, turn: TurnState, tool_round: ToolRound, resolver: Resolver
    ) -> CallQuestion | ChildApprovalRequest | None:
        """Answer the running calls' questions for the model; the first one for the host."""
        questions = self.tools.questions
        if questions.for_model_waiting():
            await answer_with_model(self.machine, self.model_io, turn, questions)
        question = surface_question(turn, tool_round, questions, resolver)
        if isinstance(question, CallQuestion):  # a child's approval is the child's own step
            self.machine.observer.question_asked(question)
        return question

    async def _start_call(self, action: RunRound, call: RoundCall, resolver: Resolver) -> None:
        """Prepare ``call`` and start it, unless the executor answered it or it waits for
        an approval."""
        machine, turn, tool_round = self.machine, action.turn, action.round
        prepared = machine.call_prepared(turn, call, tool_round, self.tools.prepare(call), resolver)
        if prepared is None:
            return
        machine.call_running(call)
        sole = len(tool_round.calls) == 1
        started = await self.tools.start(turn, call, prepared, sole=sole)
        machine.call_started(call, tool_round, started)

    async def _collect(
        self, turn: TurnState, tool_round: ToolRound, resolver: Resolver
    ) -> CallQuestion | ChildApprovalRequest | None:
        """Wait for the round's running calls, handing each update to the core; a question
        a running call asked is the step (the call waits for its answer, running on)."""
        questions = self.tools.questions
        while tool_round.running():
            if questions.asked and (question := await self._question(turn, tool_round, resolver)):
                return question
            update = await self._wait(turn)
            if update is None:
                return None
            if isinstance(update, Asked):  # a question came first: shown at the top
                continue
            self._update(tool_round, update)
            if questions.may_ask:
                questions.release(tool_round.is_running)
        return None

    def _wait(self, turn: TurnState) -> Awaitable[TurnUpdate | Asked | None]:
        """The next update of the turn's running calls."""
        return self.tools.wait(turn.turn_id)

    def _update(self, tool_round: ToolRound, update: TurnUpdate) -> None:
        """A running call finished or moved to the background: the core records it."""
        self.machine.turn_update(tool_round, update)

    async def finish_cancelled(self, action: FinishCancelled) -> Step:
        """Stop the cancelled turn's running calls (bounded, shielded); the core closes it."""
        machine, turn = self.machine, action.turn
        tool_round = turn.round
        if tool_round is not None:
            machine.append_results(turn, tool_round)
            if tool_round.running():
                with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                    await self._interrupt_calls(turn)
        self.tools.questions.release(_nothing_runs)  # no question outlives its turn
        self.note_withdrawn()
        return machine.close_cancelled(turn, action.stage, self.tools.interrupted)

    async def _interrupt_calls(self, turn: TurnState) -> None:
        """Tell the task manager the turn's running calls are interrupted."""
        await self.tools.tasks.on_turn_interrupted(turn.turn_id)

    async def step_raised(self, error: BaseException) -> None:
        """What a step that raised ``error`` leaves behind (the caller re-raises it)."""
        core = self.core
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
        warnings.warn(message, IdleLoopWarning, stacklevel=_host_level())
        log.warning(
            "idle loop",
            session_id=self.machine.session_id,
            awaiting_input=IDLE_STEPS_BEFORE_WARNING,
            hint=_IDLE_HINT,
        )
        self.machine.observer.warning(message)


class GuardedStepRunner(StepRunner):
    """The step loop of a driver with a cancellation handle: each round runs under its
    turn's cancel scope (an interrupt stops the calls starting and the waiting; the
    core then closes the round)."""

    __slots__ = ()

    async def _run_round(self, action: RunRound, resolver: Resolver) -> Action:
        with cancel_scope(action.turn):
            return await super()._run_round(action, resolver)
        return self.machine.round_collected(action.turn, action.round, resolver)


def _host_level() -> int:
    """The ``stacklevel`` that points a warning raised in :meth:`StepRunner.count_idle`
    at the host's call: the first frame outside ``agentloop.loop`` (the durable
    loop nests a frame or two more than the plain one)."""
    level, frame = 2, sys._getframe(2)  # 1: count_idle; 2: its caller
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        "agentloop.loop."
    ):
        level, frame = level + 1, frame.f_back
    return level
