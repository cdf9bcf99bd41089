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

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

import anyio
import attrs
import structlog

from ..core._cancellation import CancellationHandle
from ..core._delta import Delta
from ..core._errors import InvalidInputError, InvalidStateError, MutatorError, ProviderError
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    ResultOutcome,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..core._transcript import TranscriptView, find_violation, has_pending_input
from ..model._config import PromptCacheRequest, QueueMode, SessionConfig
from ..model._protocol import ModelEvent, ModelSession, ModelTurnResult, TurnRequest
from ..permissions._requests import PermissionChecker
from ..store._protocol import SessionStore
from ..tasks._protocol import TaskDone, TaskKind, TaskLaunch, TaskManager, TaskMovedToBackground
from ..tools._executor import ApprovalNeeded, PreparedCall, ToolExecutor, synthesized_result
from ..tools._tool import ToolContext, ToolRequest
from ._checkpoint import Restored, RestoredTurn, capture
from ._events import (
    AgentEvent,
    ApprovalRequired,
    ApprovalResolved,
    ContentDelta,
    InputAccepted,
    LoopObserver,
    MutationFinished,
    MutationStarted,
    RunFailed,
    ToolCallRequested,
    ToolCatalogChanged,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolResultReceived,
    TranscriptObserver,
    TurnFinished,
    TurnResult,
    TurnStarted,
    UsageUpdated,
    Warning,
)
from ._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor
from ._state import (
    LIMIT_KEY,
    NO_MODEL_CALL_KEY,
    TRANSITIONS,
    CallStatus,
    DriverState,
    QueuedMessage,
    RoundCall,
    ToolRound,
    TurnState,
    interrupted_assistant_item,
    interrupted_metadata,
    tool_result_item,
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

_CLEANUP_SECONDS = 5.0


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class LoopSnapshot:
    """A read-only copy of what the driver holds: transcript and queued input."""

    session_id: str
    transcript: tuple[Item, ...] = attrs.field(converter=_to_items)
    pending_input: tuple[Item, ...] = attrs.field(converter=_to_items)


@attrs.frozen
class DriverParts:
    """Everything an ``Agent`` hands a new driver (internal)."""

    config: SessionConfig
    session: ModelSession
    executor: ToolExecutor
    task_manager: TaskManager
    permissions: PermissionChecker
    resources: Any
    cancellation: CancellationHandle | None
    mutators: tuple[LoopMutator, ...]
    observers: tuple[LoopObserver, ...]
    transcript_observers: tuple[TranscriptObserver, ...]
    store: SessionStore | None = None


class LoopDriver:
    """Advances one session a step at a time; see the module docstring for the order."""

    def __init__(self, parts: DriverParts, transcript: Sequence[Item], pending: Sequence[Item]):
        self._config = parts.config
        self._session = parts.session
        self._executor = parts.executor
        self._tasks = parts.task_manager
        self._permissions = parts.permissions
        self._resources = parts.resources
        self._cancellation = parts.cancellation
        self._mutators = parts.mutators
        self._observers = parts.observers
        self._transcript_observers = parts.transcript_observers
        self._store = parts.store
        self._transcript: list[Item] = list(transcript)
        self._call_ids: set[str] = _call_ids(self._transcript)
        self._pending_input: list[Item] = list(pending)
        self._steering: list[QueuedMessage] = []
        self._follow_ups: list[QueuedMessage] = []
        self._turn: TurnState | None = None
        self._turn_counter = 0
        self._next_turn_cache: PromptCacheRequest | None = None
        self._detached: set[str] = set()
        self._session_usage: Usage | None = None
        self._drained = False
        self._state = DriverState.IDLE
        self._failure: BaseException | None = None
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
        elif turn is not None and turn.paused:
            driver._state = DriverState.AFTER_TOOL_RESULT
        return driver

    def _restore_turn(self, restored: RestoredTurn, started_calls: frozenset[str]) -> TurnState:
        turn = TurnState(
            restored.turn_id,
            self._cancellation.checkpoint() if self._cancellation is not None else None,
            model_calls=restored.model_calls,
            usage=restored.usage,
            round=restored.round,
            paused=restored.paused,
            interrupted=restored.interrupted,
        )
        if turn.round is None:
            return turn
        for call in turn.round.calls:
            if call.approval is not None:
                call.approval = attrs.evolve(call.approval, driver=self)
            if call.status is CallStatus.DONE or call.call.id not in started_calls:
                continue
            # At most once: it started before the restart and left no result.
            call.status = CallStatus.DONE
            call.decision = None
            turn.round.results[call.index] = synthesized_result(
                call.call.id,
                f"in doubt: {call.call.name} started before the session was restored and its "
                "outcome is unknown; it was not run again. Check its effects before retrying.",
                ResultOutcome.IN_DOUBT,
            )
            if self._observers:
                self._emit(
                    Warning(
                        f"call {call.call.id} ({call.call.name}) started before the restore and "
                        "has no result; answered as in doubt instead of running it again"
                    )
                )
        return turn

    # -- public surface ------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session this driver advances."""
        return self._config.session_id

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
        restored_turn: RestoredTurn | None = None
        if turn is not None:
            if turn.round is not None and (
                running := [c.call.id for c in turn.round.calls if c.status is CallStatus.RUNNING]
            ):
                raise InvalidStateError(
                    f"cannot checkpoint in state {self._state}: calls {', '.join(running)} are "
                    "still executing; answer the pending approval and call next(), then "
                    "checkpoint"
                )
            restored_turn = RestoredTurn(
                turn_id=turn.turn_id,
                model_calls=turn.model_calls,
                usage=turn.usage,
                paused=turn.paused,
                interrupted=turn.is_cancelled,
                round=turn.round,
            )
        return capture(
            config=self._config,
            state=self._state,
            transcript=self._transcript,
            pending_input=self._pending_input,
            turn_counter=self._turn_counter,
            next_turn_cache=self._next_turn_cache,
            detached=self._detached,
            session_usage=self._session_usage,
            turn=restored_turn,
        )

    # -- state machine -----------------------------------------------------------------

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

    # -- phases ------------------------------------------------------------------------

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

    # -- model calls ---------------------------------------------------------------------

    async def _call_model(self, turn: TurnState, point: MutationPoint) -> Step:
        if self._steering:
            self._pending_input.extend(self._take(self._steering, self._config.steering_mode))
        self._fold_pending_input()
        if self._mutators and (step := await self._run_mutators(turn, point)) is not None:
            return step
        if not has_pending_input(self._transcript):
            # Nothing for the model to answer (e.g. a mutator removed the new
            # input): finish instead of sending an assistant-prefill request.
            reason = (
                "the transcript is empty"
                if not self._transcript
                else f"the transcript ends with a {self._transcript[-1].kind.value} item, "
                "so there is nothing for the model to answer; submit input first"
            )
            if self._observers:
                self._emit(Warning(f"{turn.turn_id}: no model call: {reason}"))
            return self._finish_turn(turn, FinishReason.COMPLETED, (), {NO_MODEL_CALL_KEY: reason})
        if (limit := self._limit_reached(turn)) is not None:
            return self._finish_turn(turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: limit})
        turn.model_calls += 1
        if self._observers:
            for change in self._executor.drain_catalog_events():
                self._emit(
                    ToolCatalogChanged(change.source, change.added, change.removed, change.changed)
                )
        else:
            self._executor.drain_catalog_events()
        cache = self._next_turn_cache or self._config.cache
        self._next_turn_cache = None
        request = TurnRequest(
            self.session_id,
            turn.turn_id,
            TranscriptView(self._transcript),
            tuple(self._executor.specs()),
            cache,
            self._config.metadata,
        )
        outcome = await self._stream_model(turn, request)
        if outcome is None:
            return await self._finish_cancelled(turn, "model")
        if isinstance(outcome, str):
            return self._finish_turn(turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: outcome})
        result, usage = outcome
        turn.add_usage(usage)
        if usage is not None:
            self._session_usage = (
                usage if self._session_usage is None else self._session_usage + usage
            )
        now = time.time()
        output = tuple(
            _stamp_output(item, usage, result.finish_reason, now) for item in result.output_items
        )
        calls = [call for item in output for call in item.tool_calls()]
        self._check_call_ids(calls)
        for item in output:
            self._append(item)
        if not calls:
            if self._steering:  # a message arrived while the model answered: continue
                return await self._call_model(turn, MutationPoint.AFTER_TURN_ENDED)
            return self._finish_turn(turn, result.finish_reason, output, result.metadata)
        turn.round = ToolRound(
            [
                RoundCall(
                    index,
                    call,
                    ToolRequest(
                        call.id, call.name, call.input, self.session_id, turn.turn_id, call.metadata
                    ),
                )
                for index, call in enumerate(calls)
            ]
        )
        max_calls = self._config.limits.max_tool_calls_per_round
        if max_calls is not None and len(calls) > max_calls:
            return self._refuse_round(turn, turn.round, max_calls)
        return await self._advance_round(turn, turn.round, after_approval=False)

    async def _stream_model(
        self, turn: TurnState, request: TurnRequest
    ) -> tuple[ModelTurnResult, Usage | None] | str | None:
        """The model's result and usage; ``None`` if cancelled; a limit name on timeout."""
        timeout = self._config.limits.request_timeout
        with self._cancel_scope(turn):
            try:
                with anyio.fail_after(timeout) if timeout is not None else nullcontext():
                    return await self._consume(turn, request)
            except TimeoutError:
                return "request_timeout"
        return None

    async def _consume(
        self, turn: TurnState, request: TurnRequest
    ) -> tuple[ModelTurnResult, Usage | None]:
        stream = await self._session.begin_turn(request, turn.cancellation)
        streamed_usage: Usage | None = None
        announced: set[str] = set()
        result: ModelTurnResult | None = None
        try:
            async for event in stream:
                if isinstance(event, ModelTurnResult):
                    result = event
                    break
                streamed_usage = self._on_model_event(event, announced) or streamed_usage
        except BaseException:
            await _close(stream, shielded=True)
            raise
        await _close(stream, shielded=False)
        if result is None:
            raise ProviderError(
                "model stream ended without a ModelTurnResult: every model turn must end "
                "with one (check the adapter)"
            )
        if self._observers:
            for item in result.output_items:
                for call in item.tool_calls():
                    if call.id not in announced:
                        self._emit(ToolCallRequested(call))
        return result, result.usage if result.usage is not None else streamed_usage

    def _on_model_event(self, event: ModelEvent, announced: set[str]) -> Usage | None:
        if isinstance(event, Delta):
            if self._observers:
                self._emit(ContentDelta(event))
            return None
        if isinstance(event, Usage):
            if self._observers:
                self._emit(UsageUpdated(event))
            return event
        if isinstance(event, ToolCallPart):
            announced.add(event.id)
            if self._observers:
                self._emit(ToolCallRequested(event))
            return None
        raise ProviderError(
            f"model stream yielded {type(event).__name__}; expected a Delta, ToolCallPart, "
            "Usage or ModelTurnResult"
        )

    def _check_call_ids(self, calls: list[ToolCallPart]) -> None:
        seen: set[str] = set()
        for call in calls:
            if not call.id:
                raise ProviderError(f"model returned a call of {call.name!r} with an empty id")
            if call.id in self._call_ids or call.id in seen:
                raise ProviderError(
                    f"model returned tool call id {call.id!r}, which is already used in this "
                    "transcript; call ids must be unique"
                )
            seen.add(call.id)

    def _limit_reached(self, turn: TurnState) -> str | None:
        limits = self._config.limits
        if limits.max_model_calls_per_turn is not None and (
            turn.model_calls >= limits.max_model_calls_per_turn
        ):
            return "max_model_calls_per_turn"
        checks = (
            ("turn", turn.usage, limits.max_input_tokens_per_turn,
             limits.max_output_tokens_per_turn, limits.max_total_tokens_per_turn,
             limits.max_cost_per_turn),
            ("session", self._session_usage, limits.max_input_tokens_per_session,
             limits.max_output_tokens_per_session, limits.max_total_tokens_per_session,
             limits.max_cost_per_session),
        )  # fmt: skip
        for scope, usage, max_input, max_output, max_total, max_cost in checks:
            if usage is None:
                continue
            if max_input is not None and usage.input_tokens >= max_input:
                return f"max_input_tokens_per_{scope}"
            if max_output is not None and usage.output_tokens >= max_output:
                return f"max_output_tokens_per_{scope}"
            if max_total is not None and usage.total_tokens >= max_total:
                return f"max_total_tokens_per_{scope}"
            if max_cost is not None and (usage.cost or 0.0) >= max_cost:
                return f"max_cost_per_{scope}"
        return None

    # -- mutators ------------------------------------------------------------------------

    async def _run_mutators(self, turn: TurnState, point: MutationPoint) -> Step | None:
        cursor = TranscriptCursor(self._transcript)
        ctx = MutationContext(self.session_id, turn.turn_id, point, turn.cancellation, self._emit)
        with self._cancel_scope(turn):
            for mutator in self._mutators:
                name = str(getattr(mutator, "name", type(mutator).__name__))
                if self._observers:
                    self._emit(MutationStarted(self.session_id, turn.turn_id, name, point.value))
                before = cursor.items
                was_dirty = cursor.dirty
                try:
                    await mutator.mutate(cursor, ctx)
                except MutatorError:
                    raise
                except Exception as error:
                    raise MutatorError(
                        f"mutator {name!r} failed at {point.value}: {type(error).__name__}: {error}"
                    ) from error
                if self._observers:
                    dirty = cursor.items is not before or (cursor.dirty and not was_dirty)
                    self._emit(
                        MutationFinished(self.session_id, turn.turn_id, name, point.value, dirty)
                    )
            if cursor.dirty:
                violation = find_violation(cursor.items)
                if violation is not None:
                    raise MutatorError(
                        f"mutator pass at {point.value} broke the transcript: {violation.message}"
                    )
                self._transcript = list(cursor.items)
                self._call_ids = _call_ids(self._transcript)
            return None
        # Cancelled: the pass is discarded as a whole.
        return await self._finish_cancelled(turn, "mutator")

    # -- tool rounds ---------------------------------------------------------------------

    async def _advance_round(
        self,
        turn: TurnState,
        tool_round: ToolRound,
        *,
        after_approval: bool,
    ) -> Step:
        """Start every startable call, wait for the foreground ones, then decide what's next.

        Results are appended in the model's call order, whatever order they
        finished in.
        """
        with self._cancel_scope(turn):
            for call in tool_round.calls:
                if call.status is not CallStatus.UNSTARTED:
                    continue
                if self._steering:  # the tool-call boundary a steering message waits for
                    self._skip(call, tool_round.results)
                else:
                    await self._start_call(turn, call, tool_round.results)
            if not turn.is_cancelled and (fresh := _surface_new_approval(tool_round)) is not None:
                # Approvals surface one by one while the other calls keep running;
                # their results are collected when the round resumes.
                return fresh
            while any(call.status is CallStatus.RUNNING for call in tool_round.calls):
                update = await self._tasks.wait_for_turn(turn.turn_id)
                if update is None:
                    break
                self._on_turn_update(tool_round, update, tool_round.results)
        self._append_results(tool_round)
        if turn.is_cancelled:
            return await self._finish_cancelled(turn, "tool")
        if any(call.status is CallStatus.RUNNING for call in tool_round.calls):
            raise InvalidStateError(
                f"task manager {type(self._tasks).__name__} reported no running tasks for "
                f"{turn.turn_id} while calls were still running"
            )
        if (step := self._surface_approval(tool_round)) is not None:
            return step
        turn.round = None
        if all(call.background for call in tool_round.calls):
            # Nothing ran in the foreground: the turn waits for background
            # results (drained by a later next()) or for new input.
            self._turn = None
            return AwaitingInput(
                self.session_id,
                "tool calls are running in the background; call next() once they finish "
                "(their results start a new turn) or submit input",
                driver=self,
            )
        if after_approval:
            return await self._call_model(turn, MutationPoint.AFTER_TOOL_RESULT)
        turn.paused = True
        return AfterToolResult(self.session_id, turn.turn_id, len(self._transcript), driver=self)

    async def _start_call(
        self, turn: TurnState, call: RoundCall, results: dict[int, ToolResultPart]
    ) -> None:
        decision = call.decision
        request = call.request
        if decision is not None and decision.kind is DecisionKind.APPROVE_WITH:
            request = attrs.evolve(request, input=decision.input)
        prepared = self._executor.prepare(
            request, self._permissions, approved=decision is not None and decision.approved
        )
        if isinstance(prepared, ToolResultPart):
            call.status = CallStatus.DONE
            results[call.index] = prepared
            return
        if isinstance(prepared, ApprovalNeeded):
            self._queue_approval(turn, call, prepared)
            return
        await self._launch(turn, call, prepared, results)

    async def _launch(
        self,
        turn: TurnState,
        call: RoundCall,
        prepared: PreparedCall,
        results: dict[int, ToolResultPart],
    ) -> None:
        if prepared.timeout is None and self._config.limits.tool_timeout is not None:
            prepared = attrs.evolve(prepared, timeout=self._config.limits.tool_timeout)
        ctx = ToolContext(
            self.session_id,
            turn.turn_id,
            call.call.id,
            turn.cancellation,
            self._resources,
            call.call.metadata,
        )
        if self._store is not None and not prepared.tool.spec.annotations.idempotent:
            # At most once: a restore answers a started call without a result as
            # in doubt instead of running it again.
            await self._store.record_call_started(self.session_id, call.call.id, call.call.name)
        call.status = CallStatus.RUNNING
        call.started_at = time.monotonic()
        if self._observers:
            self._emit(ToolExecutionStarted(call.call.id, call.call.name, call.task_id))
        started = await self._tasks.start_task(
            TaskLaunch(
                prepared.request, partial(self._executor.invoke, prepared, ctx), call.task_id
            ),
            turn.turn_id,
        )
        call.task_id = started.task_id
        if isinstance(started, TaskDone):
            call.status = CallStatus.DONE
            results[call.index] = started.result
        elif started.kind is TaskKind.BACKGROUND:
            call.status = CallStatus.DONE
            call.background = True
            self._detached.add(call.call.id)
            results[call.index] = synthesized_result(
                call.call.id,
                f"Tool {call.call.name} is running in the background; the result will be "
                "delivered when it completes.",
                ResultOutcome.BACKGROUND,
                is_error=False,
            )

    def _on_turn_update(
        self,
        tool_round: ToolRound,
        update: TaskDone | TaskMovedToBackground,
        results: dict[int, ToolResultPart],
    ) -> None:
        if isinstance(update, TaskMovedToBackground):
            call = tool_round.by_id(update.call_id)
            if call is None or call.status is not CallStatus.RUNNING:
                return
            call.status = CallStatus.DONE
            self._detached.add(call.call.id)
            results[call.index] = synthesized_result(
                call.call.id,
                f"Tool {call.call.name} is now running in the background; the result will be "
                "delivered when it completes.",
                ResultOutcome.DETACHED,
                is_error=False,
            )
            return
        call = tool_round.by_id(update.result.call_id)
        if call is None or call.status is not CallStatus.RUNNING:
            # A late result for a call already answered: deliver it as a notification.
            self._append_result(update.result, background=True)
            return
        call.status = CallStatus.DONE
        results[call.index] = update.result

    def _queue_approval(self, turn: TurnState, call: RoundCall, needed: ApprovalNeeded) -> None:
        call.status = CallStatus.AWAITING_APPROVAL
        call.decision = None
        call.surfaced = False
        decision = needed.decision
        call.approval = ApprovalRequest(
            call.call.id,
            call.call.name,
            call.call.input,
            needed.permission.kind,
            decision.reason,
            decision.summary,
            decision.id or f"approval:{call.call.id}",
            turn.turn_id,
            call.task_id,
            needed.permission.metadata,
            driver=self,
        )
        if self._observers:
            self._emit(
                ApprovalRequired(
                    call.call.id,
                    call.call.name,
                    needed.permission.kind,
                    decision.reason,
                    decision.summary,
                )
            )

    def _surface_approval(self, tool_round: ToolRound) -> ApprovalRequest | None:
        """A new approval first; else re-surface the first one still unanswered."""
        if (fresh := _surface_new_approval(tool_round)) is not None:
            return fresh
        return next((call.approval for call in tool_round.calls if call.undecided), None)

    def _skip(self, call: RoundCall, results: dict[int, ToolResultPart]) -> None:
        call.status = CallStatus.DONE
        call.decision = None
        results[call.index] = synthesized_result(
            call.call.id,
            f"skipped: {self._steering[0].label} sent a new message",
            ResultOutcome.SKIPPED,
        )

    @staticmethod
    def _take(queue: list[QueuedMessage], mode: QueueMode) -> list[Item]:
        taken = queue[:] if mode is QueueMode.ALL else queue[:1]
        del queue[: len(taken)]
        return [item for message in taken for item in message.items]

    def _refuse_round(self, turn: TurnState, tool_round: ToolRound, limit: int) -> Step:
        count = len(tool_round.calls)
        for call in tool_round.calls:
            call.status = CallStatus.DONE
            self._append_result(
                synthesized_result(
                    call.call.id,
                    f"not run: the model asked for {count} tool calls in one round, more than "
                    f"the limit of {limit}; ask for fewer calls at a time",
                    ResultOutcome.LIMIT_REACHED,
                )
            )
        turn.round = None
        return self._finish_turn(
            turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: "max_tool_calls_per_round"}
        )

    # -- turn endings --------------------------------------------------------------------

    def _finish_turn(
        self,
        turn: TurnState,
        reason: FinishReason,
        items: Sequence[Item],
        metadata: Any = None,
    ) -> Finished:
        result = TurnResult(turn.turn_id, reason, items, turn.usage, metadata or {})
        self._turn = None
        if reason is not FinishReason.CANCELLED and self._follow_ups:
            # The next next() starts the follow-up as a new turn.
            self._pending_input.extend(self._take(self._follow_ups, self._config.follow_up_mode))
        if self._observers:
            self._emit(TurnFinished(result))
        return Finished(result)

    async def _finish_cancelled(self, turn: TurnState, stage: str) -> Finished:
        """Answer every open call of the turn, close it with an interrupted item."""
        tool_round = turn.round
        if tool_round is not None:
            self._append_results(tool_round)
            if any(call.status is CallStatus.RUNNING for call in tool_round.calls):
                with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
                    await self._tasks.on_turn_interrupted(turn.turn_id)
            for call in tool_round.calls:
                if call.status is CallStatus.DONE:
                    continue
                waiting = call.status is CallStatus.AWAITING_APPROVAL
                call.status = CallStatus.DONE
                self._append_result(
                    synthesized_result(
                        call.call.id,
                        "cancelled: the turn was interrupted before this call "
                        + ("was approved" if waiting else "finished"),
                        ResultOutcome.CANCELLED,
                    )
                )
            turn.round = None
        item = interrupted_assistant_item(stage, time.time())
        self._append(item)
        turn.paused = False
        return self._finish_turn(turn, FinishReason.CANCELLED, (item,), interrupted_metadata(stage))

    # -- transcript ----------------------------------------------------------------------

    def _fold_pending_input(self) -> None:
        pending, self._pending_input = self._pending_input, []
        now = time.time()
        for item in pending:
            self._append(
                item if item.created_at is not None else attrs.evolve(item, created_at=now)
            )

    def _append(self, item: Item) -> None:
        """The one place items enter the transcript."""
        self._transcript.append(item)
        for part in item.parts:
            if isinstance(part, ToolCallPart):
                self._call_ids.add(part.id)
        for observer in self._transcript_observers:
            try:
                observer.on_item_appended(item)
            except Exception:
                log.exception("transcript observer raised", observer=type(observer).__name__)

    def _append_results(self, tool_round: ToolRound) -> None:
        results = tool_round.results
        for index in sorted(results):
            call = tool_round.calls[index]
            result = results[index]
            if self._observers and call.started_at is not None:
                self._emit(
                    ToolExecutionFinished(
                        call.call.id,
                        call.call.name,
                        time.monotonic() - call.started_at,
                        result.is_error,
                    )
                )
            self._append_result(result)
        results.clear()

    def _append_result(self, result: ToolResultPart, *, background: bool = False) -> None:
        """Append ``result``; a background call's real result becomes a notification."""
        if self._observers:
            self._emit(ToolResultReceived(result))
        now = time.time()
        if (background or result.call_id in self._detached) and not _is_placeholder(result):
            self._detached.discard(result.call_id)
            label = "failed" if result.is_error else "completed"
            text = f"Background tool call {result.call_id} {label}: {_brief(result.output)}"
            self._append(Item(ItemKind.NOTIFICATION, (TextPart(text),), created_at=now))
            return
        self._append(tool_result_item(result, now))

    # -- plumbing --------------------------------------------------------------------

    async def _persist(self) -> None:
        """Save a checkpoint after a step; a step with calls still running is skipped."""
        assert self._store is not None
        turn = self._turn
        if (
            turn is not None
            and turn.round is not None
            and any(call.status is CallStatus.RUNNING for call in turn.round.calls)
        ):
            log.debug("checkpoint skipped: calls still running", session_id=self.session_id)
            return
        try:
            await self._store.save_checkpoint(self.session_id, self.checkpoint())
        except Exception as error:
            # The step happened; losing it to a storage fault would be worse.
            # The next step saves again.
            log.exception("saving the checkpoint failed", session_id=self.session_id)
            if self._observers:
                self._emit(Warning(f"checkpoint not saved: {type(error).__name__}: {error}"))

    def _cancel_scope(self, turn: TurnState) -> AbstractContextManager[Any]:
        if turn.cancellation is None:
            return nullcontext()
        return turn.cancellation.scope()

    def _emit(self, event: AgentEvent) -> None:
        for observer in self._observers:
            try:
                observer.handle_event(event)
            except Exception:
                log.exception("observer raised", observer=type(observer).__name__)


def _surface_new_approval(tool_round: ToolRound) -> ApprovalRequest | None:
    """The first approval not yet shown to the host (marked as shown), if any."""
    for call in tool_round.calls:
        if call.undecided and not call.surfaced:
            call.surfaced = True
            return call.approval
    return None


def _is_placeholder(result: ToolResultPart) -> bool:
    from ..core._items import result_outcome

    return result_outcome(result) in (ResultOutcome.BACKGROUND, ResultOutcome.DETACHED)


def _brief(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list) and output and not isinstance(output[0], dict | list | str):
        return f"[{len(output)} parts]"
    import json

    return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)


def _stamp_output(item: Item, usage: Usage | None, reason: FinishReason, now: float) -> Item:
    if item.kind is ItemKind.ASSISTANT and (item.usage is None or item.finish_reason is None):
        return attrs.evolve(
            item,
            usage=item.usage if item.usage is not None else usage,
            finish_reason=item.finish_reason or reason,
            created_at=item.created_at if item.created_at is not None else now,
        )
    if item.created_at is None:
        return attrs.evolve(item, created_at=now)
    return item


def _call_ids(items: Sequence[Item]) -> set[str]:
    return {call.id for item in items for call in item.tool_calls()}


def _checked_input(items: Sequence[Item], operation: str = "submit_input") -> tuple[Item, ...]:
    if isinstance(items, Item):
        raise InvalidInputError(
            f"{operation} expects a sequence of Items, got a single Item; wrap it in a list"
        )
    checked = tuple(items)
    for position, item in enumerate(checked):
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"{operation} expects Items; element {position} is {type(item).__name__}"
            )
        if any(isinstance(part, ToolCallPart | ToolResultPart) for part in item.parts):
            raise InvalidInputError(
                f"{operation}: element {position} holds a tool_call or tool_result part; "
                "only the driver writes those"
            )
    return checked


async def _close(stream: AsyncIterator[ModelEvent], *, shielded: bool) -> None:
    """Close the model's stream (and its HTTP response); bounded and shielded on errors."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    if not shielded:
        await aclose()
        return
    with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
        await aclose()
