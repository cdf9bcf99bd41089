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
from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import Item, Usage
from ..model._session_config import PromptCacheRequest, SessionConfig
from ..tools._questions import QuestionAnswer
from ._checkpoint import answer_in_doubt, capture, check_checkpointable, restore_turn
from ._core import LoopCore
from ._driver_parts import DriverParts, transcript_listener
from ._durable_steps import step_runner_class
from ._host_calls import (
    answer_approval,
    input_items,
    queued_message,
    sole_undecided,
)
from ._in_doubt import apply_resolution, in_doubt_step, resolve_in_doubt
from ._machine import LoopMachine
from ._model_io import model_io_for
from ._mutators import LoopMutator
from ._nested import pending_child_approval
from ._observer import observers_of
from ._persistence import Persistence, Unsaved
from ._questions import answer_question
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
    ApprovalAnswer,
    Blocked,
    Resolver,
    Step,
)
from ._tool_io import tool_io_for

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


class LoopDriver:
    """Advances one session a step at a time (see the module docstring)."""

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
        self._refuse_released("checkpoint()")
        check_checkpointable(self._core)
        return capture(self._core, self._core.state, self.config)

    # -- steps ---------------------------------------------------------------

    async def next(self) -> Step:
        """Advance by one step and return ``Finished`` or an interrupt to resolve."""
        self._refuse_released("next()")
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
        self._refuse_released("retry()")
        return await self._runner.run_step(self._machine.retry(mutators), self)

    async def continue_turn(self) -> Step:
        """Call the model on the transcript as it is, in a new turn (seed 003's continue).

        The transcript must end in a user, tool or notification item; an
        assistant tail (or an empty transcript) is refused with
        ``InvalidStateError`` and nothing changes. Pending input stays pending.
        Use it for a driver rebuilt from a transcript whose last model call
        never answered.
        """
        self._refuse_released("continue_turn()")
        return await self._runner.run_step(self._machine.continue_turn(), self)

    async def run_until_blocked(self) -> Blocked:
        """Call ``next()`` through ``AfterToolResult`` pauses; return the first other step."""
        while True:
            step = await self.next()
            if not isinstance(step, AfterToolResult):
                return step

    async def save(self) -> None:
        """Save the session to the agent's store now (retry after a ``SaveError``)."""
        self._refuse_released("save()")
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
        core = self._core
        if core.state is DriverState.STEPPING:
            raise InvalidStateError(
                f"cannot release() session {self.session_id!r}'s driver in state STEPPING: "
                "a step is still running; await it (or cancel the task awaiting next()) "
                "first"
            )
        self._released = True
        tools = self._runner.tools
        if core.turn is not None:
            await tools.tasks.on_turn_interrupted(core.turn.turn_id)
        # A question asked from another task than its call's (an MCP server's request
        # mid-call) ends too, answered "cancel" only now that its call was stopped.
        tools.questions.release(_nothing_runs)
        log.debug("driver released", session_id=self.session_id)

    def _refuse_released(self, operation: str) -> None:
        if self._released:
            raise InvalidStateError(
                f"cannot {operation} on session {self.session_id!r}'s driver: it was "
                "released (release()), its running calls cancelled; resume the session "
                "from the store (Agent.resume) for a driver that goes on"
            )

    # -- the host's input and answers ------------------------------------------

    def submit_input(self, items: str | Sequence[Item]) -> None:
        """Queue ``items`` for the next model call (a new turn, or after a pause).

        A string is one user message: ``submit_input("hi")`` is
        ``submit_input([Item.text(ItemKind.USER, "hi")])``.
        """
        self._refuse_released("submit_input()")
        checked = input_items(self._core, items)
        self._core.pending_input = (*self._core.pending_input, *checked)
        self._runner.idle_steps = 0
        self._machine.observer.input_accepted(self.session_id, checked)

    def set_next_turn_cache(self, request: PromptCacheRequest | None) -> None:
        """Use ``request`` for the next model call only (then the session default again)."""
        self._refuse_released("set_next_turn_cache()")
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
        self._refuse_released("steer()")
        message = queued_message(self._core, "steer", items, label)
        self._core.steering = (*self._core.steering, message)

    def follow_up(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message that starts a new turn when the current one finishes.

        Callable at any time, even while ``next()`` runs; a cancelled turn
        leaves it queued for the next turn that finishes.
        """
        self._refuse_released("follow_up()")
        message = queued_message(self._core, "follow_up", items, label)
        self._core.follow_ups = (*self._core.follow_ups, message)

    def clear_queues(self) -> tuple[QueuedMessage, ...]:
        """Drop every queued steering and follow-up message; return them."""
        self._refuse_released("clear_queues()")
        core = self._core
        dropped = (*core.steering, *core.follow_ups)
        core.steering = core.follow_ups = ()
        return dropped

    def answer_approval(self, decision: ApprovalAnswer) -> None:
        """Answer the one pending approval (raises if there are none or several)."""
        self._refuse_released("answer_approval()")
        self.answer_approval_for(sole_undecided(self._core), decision)

    def answer_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Answer the approval for ``call_id``; ``next()`` then runs or denies the call.
        A child agent's approval shown as a ``ChildApprovalRequest`` is answered too."""
        self._refuse_released("answer_approval_for()")
        if (child := pending_child_approval(self._core, call_id, self)) is not None:
            child.answer(decision)
            return
        answer_approval(self._core, call_id, decision, self._machine.observer)

    def answer_question_for(self, question_id: str, answer: QuestionAnswer) -> None:
        """Answer the pending ``CallQuestion`` ``question_id`` (its call gets ``answer`` at
        once and runs on); raises, changing nothing, for another question or an answer
        that does not match the question's schema."""
        self._refuse_released("answer_question_for()")
        runner = self._runner
        call_id = answer_question(self._core, runner.tools.questions, question_id, answer)
        self._machine.observer.question_answered(call_id, question_id, answer.action.value)
        runner.journal.note_answer()

    def resolve_in_doubt_for(self, call_id: str, how: str, value: Any) -> None:
        """Resolve the pending ``CallInDoubt`` of ``call_id`` (``how``: ``settle`` with its
        result, ``fail`` with a reason, ``run_again``); raises, changing nothing, for a
        call not in doubt (or resolved already) or a value that does not fit."""
        self._refuse_released("resolve_in_doubt_for()")
        call, tool_round, result = resolve_in_doubt(self._core, call_id, how, value, None)
        assert call.doubt is not None
        apply_resolution(call, call.doubt, result)
        if result is not None:
            self._machine.finalize(call, tool_round, result, CallStatus.ANSWERED)
            self._runner.journal.note_resolved()
        log.info("call in doubt resolved", call_id=call_id, resolution=how)


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
        await _settle(driver, turn, doubted, started_calls, ask=parts.ask_in_doubt)
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


async def _settle(
    driver: LoopDriver,
    turn: TurnState,
    doubted: list[RoundCall],
    started_calls: frozenset[str],
    *,
    ask: bool,
) -> None:
    """Answer each call ``doubted`` left in doubt: its tool's reconcile, else (``ask``: the
    agent opted in) a ``CallInDoubt`` for the host, else in doubt."""
    machine, tools = driver._machine, driver._runner.tools
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
                turn, call, driver.session_id, key_session, started_calls, driver
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
