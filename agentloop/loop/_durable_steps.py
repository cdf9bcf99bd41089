"""The step loop of a driver with a store: the durable layer at its points.

:class:`DurableStepRunner` is :class:`~agentloop.loop._step_runner.StepRunner`
with the store's saves, claims and recorded decisions where
``_persistence.py`` says they go; a driver gets it, or the plain loop, once,
when it is made (so a driver without a store makes no journal call, and a
driver with one makes no check for it):

- before a step that may call the model with queued input: that input;
- after every step: the step;
- the host's approval decisions, before they are acted on;
- a response with tool calls, before any of its calls starts;
- before a call starts: the results no save holds yet; then the claim of a
  non-idempotent call (a refused claim answers the call instead of running it);
- once a claimed call has its result: noted, and saved before anything else
  is waited for (another call, the running calls, the model, an interrupted
  turn's calls) or by the step's own save;
- after a step raised: the results no save holds yet, when a restore takes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from typing import Any

import anyio

from ..tasks._protocol import TurnUpdate
from ._actions import Action, CallModel, RecordDecisions, RunRound
from ._persistence import Persistence
from ._questions import Asked, claim_key
from ._state import RoundCall, ToolRound, TurnState
from ._step_runner import GuardedStepRunner, StepRunner
from ._steps import Resolver, Step

__all__ = ["DurableStepRunner", "GuardedDurableStepRunner", "step_runner_class"]


class DurableStepRunner(StepRunner):
    """The step loop of a driver with a store (see the module docstring)."""

    __slots__ = ()

    journal: Persistence  # a driver with a store has one (see step_runner_class)

    saves_steps = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tools.questions.holds = True  # answers wait for a save (answer_question)

    async def next_step(self, resolver: Resolver) -> Step:
        await self.journal.save_input(self.core)  # queued input is durable first
        return await super().next_step(resolver)

    def next_through_pauses(self, pauses: int, resolver: Resolver) -> Awaitable[Step]:
        self.passed = 0
        return self.next_step(resolver)  # every step is taken (and saved)

    async def run_step(self, action: Action | None, resolver: Resolver, pauses: int = 0) -> Step:
        step = await super().run_step(action, resolver, pauses)
        core, journal = self.core, self.journal
        try:
            await journal.save_step(core, step)
        except anyio.get_cancelled_exc_class():
            # Cancelled before the step's save started: a round's results no save
            # holds yet are saved all the same, by the step's save (shielded).
            if journal.results_unsaved:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await journal.save_step(core, step)
            raise
        self.tools.questions.hand_held()
        return step

    async def _prepare_transcript(self, action: CallModel) -> Action | None:
        done = await super()._prepare_transcript(action)
        if done is None:
            # A round's results before the model is waited for, and before the call is
            # counted: a restore from this save makes the same call, counted once.
            await self.journal.save_results(self.core)
        return done

    async def _record_decisions(self, action: RecordDecisions, resolver: Resolver) -> Action:
        await self.journal.record_decisions(action.round)
        return await super()._record_decisions(action, resolver)

    async def _run_round(self, action: RunRound, resolver: Resolver) -> Action:
        if action.fresh:
            await self.journal.save_response(self.core)
        return await super()._run_round(action, resolver)

    async def _start_call(self, action: RunRound, call: RoundCall, resolver: Resolver) -> None:
        """Save the results so far, claim the call, start it, note its result."""
        machine, journal, turn, tool_round = self.machine, self.journal, action.turn, action.round
        await journal.save_results(self.core)  # the results so far, before this call runs
        prepared = machine.call_prepared(turn, call, tool_round, self.tools.prepare(call), resolver)
        if prepared is not None:
            idempotent = prepared.tool.spec.annotations.idempotent
            refusal = await journal.claim(
                call, prepared.request, idempotent=idempotent, key=claim_key(call)
            )
            if refusal is not None:  # claimed before, or denied in the store: not run
                machine.finalize(call, tool_round, *refusal)
            else:
                machine.call_running(call)
                sole = len(tool_round.calls) == 1
                started = await self.tools.start(turn, call, prepared, sole=sole)
                machine.call_started(call, tool_round, started)
        journal.note_finished_calls(tool_round)

    async def _wait(self, turn: TurnState) -> TurnUpdate | Asked | None:
        await self.journal.save_results(self.core)  # the results so far, before waiting
        self.tools.questions.hand_held()  # that save holds that answered calls wait no more
        return await self.tools.wait(turn.turn_id)

    def _update(self, tool_round: ToolRound, update: TurnUpdate) -> None:
        super()._update(tool_round, update)
        self.journal.note_finished_calls(tool_round)

    async def _interrupt_calls(self, turn: TurnState) -> None:
        await self.journal.save_results(self.core)  # the results so far
        await super()._interrupt_calls(turn)

    async def step_raised(self, error: BaseException) -> None:
        journal = self.journal
        if journal.results_unsaved:  # what a save of their own would have held
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await journal.save_results_after_fault(self.core)
        await super().step_raised(error)


class GuardedDurableStepRunner(DurableStepRunner, GuardedStepRunner):
    """The durable step loop of a driver with a cancellation handle (the response is
    saved before the round's cancel scope is entered)."""

    __slots__ = ()


def step_runner_class(*, durable: bool, guarded: bool) -> type[StepRunner]:
    """The step loop for a driver, chosen once: with a store (``durable``) or not, with
    a cancellation handle (``guarded``) or not."""
    if durable:
        return GuardedDurableStepRunner if guarded else DurableStepRunner
    return GuardedStepRunner if guarded else StepRunner
