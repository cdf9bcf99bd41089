"""The ``LoopDriver``: one loop performing what the core decides.

The core (``_machine.py`` and ``_rounds.py`` over the state in ``_core.py``)
decides every step synchronously and answers each fact with an action
(``_actions.py``); the driver performs it through two effect modules, model
I/O (``_model_io.py``) and tool I/O (``_tool_io.py``), with two layers set
when the driver is made: durability (``_durable_steps.py``: the step loop with
a store's saves, claims and recorded decisions, or the plain one without a
store) and observation (``_observer.py``: the observers, or ``NOBODY``). See
``docs/loop.md`` for the core's decision table. Only ``LoopCore.handle``
changes the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._log import get_logger
from ..core._items import Item, Usage
from ..model._session_config import SessionConfig
from ._checkpoint import answer_in_doubt, capture, check_checkpointable, restore_turn
from ._core import LoopCore
from ._driver_inputs import DriverInputs
from ._driver_parts import DriverParts, transcript_listener
from ._durable_steps import step_runner_class
from ._host_calls import refuse_release_while_stepping, refuse_released
from ._in_doubt import in_doubt_step
from ._machine import LoopMachine
from ._model_io import model_io_for
from ._mutators import LoopMutator
from ._observer import observers_of
from ._persistence import Persistence, Unsaved
from ._state import (
    CallStatus,
    DriverState,
    QueuedMessage,
    Restored,
    RetryPoint,
    RoundCall,
    TurnState,
)
from ._steps import (
    AfterToolResult,
    Blocked,
    Resolver,
    Step,
)
from ._tool_io import ToolIO, tool_io_for

__all__ = ["LoopDriver", "LoopSnapshot", "restore_driver"]

log = get_logger()


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class LoopSnapshot:
    """A read-only copy of what the driver holds: transcript and queued input."""

    session_id: str
    transcript: tuple[Item, ...] = attrs.field(converter=_to_items)
    pending_input: tuple[Item, ...] = attrs.field(converter=_to_items)


class LoopDriver(DriverInputs):
    """Advances one session a step at a time (see the module docstring); the host's input
    and answers between steps come from :class:`DriverInputs` (``_driver_inputs.py``)."""

    __slots__ = ("__weakref__", "_core", "_machine", "_released", "_runner")

    def __init__(
        self, parts: DriverParts, transcript: Sequence[Item], pending: Sequence[Item]
    ) -> None:
        config = parts.config
        observer = observers_of(parts.observers)
        self._released = False
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
        model_io = model_io_for(
            parts.session,
            config.session_id,
            config.limits.request_timeout,
            observer,
            parts.cancellation,
        )
        runner = step_runner_class(
            durable=parts.store is not None, guarded=parts.cancellation is not None
        )
        self._runner = runner(
            self._machine,
            Persistence(parts.store, config, observer)
            if parts.store is not None
            else Unsaved(config.session_id),
            model_io,
            tool_io_for(parts, observer),
            parts.mutators,
        )

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
        """A copy of the transcript and the queued input, to read or show.

        Not restorable: :meth:`checkpoint` is the whole state ``Agent.resume`` takes."""
        return LoopSnapshot(self.session_id, self._core.transcript, self._core.pending_input)

    def checkpoint(self) -> dict[str, Any]:
        """The driver's whole state as a versioned, JSON-compatible document.

        Works between steps; ``Agent.resume(document)`` continues from it.
        Raises ``InvalidStateError`` while a step runs, after the driver
        FAILED, or while calls of the round still execute beside a pending
        approval. A turn that failed (``FinishReason.ERROR``) is checkpointed
        with its retry point.
        """
        if self._released:
            refuse_released(self.session_id, "checkpoint()")
        check_checkpointable(self._core)
        return capture(self._core, self._core.state, self.config)

    # -- steps ---------------------------------------------------------------

    async def next(self) -> Step:
        """Advance by one step and return ``Finished`` or an interrupt to resolve."""
        if self._released:
            refuse_released(self.session_id, "next()")
        return await self._runner.next_step(self)

    async def retry(self, *, mutators: Sequence[LoopMutator] = ()) -> Step:
        """Issue the failed model call again, with the transcript as it is.

        Allowed after a turn finished with ``FinishReason.ERROR`` (see
        :attr:`retry_point`) and nothing started since; starts a new turn that
        calls the model on the same transcript. Mutators run first, at the
        failed call's mutation point: ``mutators`` (this retry only, e.g. a
        compactor after a ``CONTEXT_OVERFLOW``), then the agent's own. Pending
        input and queued messages stay queued. Returns the step like ``next()``.
        """
        if self._released:
            refuse_released(self.session_id, "retry()")
        return await self._runner.run_step(self._machine.retry(mutators), self)

    async def continue_turn(self) -> Step:
        """Call the model on the transcript as it is, in a new turn (seed 003's continue).

        The transcript must end in a user, tool or notification item; an
        assistant tail (or an empty transcript) is refused with
        ``InvalidStateError`` and nothing changes. Pending input stays pending.
        Use it for a driver rebuilt from a transcript whose last model call
        never answered.
        """
        if self._released:
            refuse_released(self.session_id, "continue_turn()")
        return await self._runner.run_step(self._machine.continue_turn(), self)

    async def run_until_blocked(self) -> Blocked:
        """Call ``next()`` through ``AfterToolResult`` pauses; return the first other step."""
        while True:
            step = await self.next()
            if not isinstance(step, AfterToolResult):
                return step

    async def save(self) -> None:
        """Save the session to the agent's store now (retry after a ``SaveError``)."""
        if self._released:
            refuse_released(self.session_id, "save()")
        await self._runner.journal.save_now(self._core)

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called: the driver refuses every further use."""
        return self._released

    async def release(self) -> None:
        """The host drops this driver (its session saved): stop what it still runs.

        Cancels the current turn's running calls (e.g. a call waiting in
        ``ToolContext.ask`` for the answer to a ``CallQuestion``) and waits
        until they end, recording nothing: no result, no save, no event. The
        stored session stays the truth: a driver resumed from it asks the
        question again (a call with resume data goes on from the answer) or
        answers the call in doubt. Background calls go on. Afterwards every
        operation but reading raises ``InvalidStateError``; releasing again
        does nothing. Refused while a step runs (cancel the task awaiting
        ``next()`` first).
        """
        if self._released:
            return
        refuse_release_while_stepping(self._core, self.session_id)
        self._released = True
        tools = self._runner.tools
        if self._core.turn is not None:
            await tools.tasks.on_turn_interrupted(self._core.turn.turn_id)
        # A question asked from another task than its call's (an MCP server's request
        # mid-call) ends too, answered "cancel" only now that its call was stopped.
        tools.questions.release(_nothing_runs)
        log.debug("driver released", session_id=self.session_id)


async def restore_driver(
    parts: DriverParts, restored: Restored, started_calls: frozenset[str]
) -> LoopDriver:
    """A driver continuing from a parsed checkpoint (see ``Agent.resume``): a call
    that started before it and left no result is settled by its tool's
    ``reconcile`` if it can, else answered in doubt (never run again)."""
    driver = LoopDriver(parts, restored.transcript, restored.pending_input)
    core, observer = driver._core, driver._machine.observer
    turn = restored.turn
    doubted = []
    if turn is not None:
        snapshot = parts.cancellation.snapshot() if parts.cancellation else None
        doubted = restore_turn(turn, snapshot, started_calls, driver)
    if doubted:  # settled before the state is restored from the calls' statuses
        assert turn is not None
        await settle_restored(
            driver._machine,
            driver._runner.tools,
            turn,
            doubted,
            started_calls,
            driver,
            ask=parts.ask_in_doubt,
        )
    core.restore(restored, turn)
    if core.detached:
        observer.warning(
            "restored with background calls "
            f"{', '.join(sorted(core.detached))} outstanding: their results arrive "
            "only if this process's task manager still runs them"
        )
    return driver


def _nothing_runs(call_id: str) -> bool:
    return False


async def settle_restored(
    machine: LoopMachine,
    tools: ToolIO,
    turn: TurnState,
    doubted: list[RoundCall],
    started_calls: frozenset[str],
    resolver: Resolver,
    *,
    ask: bool,
) -> None:
    """Answer each call ``doubted`` left in doubt: its tool's reconcile, else (``ask``: the
    agent opted in) a ``CallInDoubt`` for the host, else in doubt."""
    tool_round = turn.round
    assert tool_round is not None
    for call in doubted:
        settled = await tools.reconcile(turn, call)
        if settled is not None:
            machine.finalize(call, tool_round, settled, CallStatus.RECONCILED)
            outcome = "settled by its tool's reconcile"
        elif ask:
            # It was claimed, so approved before it started (a save may have written it
            # as awaiting approval): it waits for the host's resolution, not started.
            if call.status is not CallStatus.PREPARED:
                if call.status is not CallStatus.DECIDED:
                    call.move(CallStatus.DECIDED)
                call.move(CallStatus.PREPARED)
            key_session = tools.key_session(call.call.id)
            call.doubt = in_doubt_step(
                turn, call, machine.session_id, key_session, started_calls, resolver
            )
            outcome = "the host is asked what it came to (CallInDoubt)"
        else:
            answer_in_doubt(turn, call)
            outcome = "answered as in doubt instead of running it again"
        machine.observer.warning(
            f"call {call.call.id} ({call.call.name}) started before the restore and "
            f"has no result; {outcome}"
        )


if TYPE_CHECKING:  # the interrupts resolve through the driver: it must stay a Resolver
    _RESOLVER: type[Resolver] = LoopDriver
