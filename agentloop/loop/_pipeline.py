"""The tool-call pipeline: every call of a round moves prepared -> (awaiting
approval) -> running -> answered (or skipped / denied / cancelled / in doubt /
background) through one ``prepare`` / ``execute`` / ``finalize`` path.

Every call gets exactly one result, appended in the model's call order;
approvals surface one by one while the round's other calls keep running.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import attrs

from .._log import get_logger
from ..core._errors import InvalidStateError, ProviderError
from ..core._items import FinishReason, ToolResultPart
from ..tasks._protocol import TaskDetached, TaskFinished, TaskKind, TaskLaunch
from ..tools._executor import PendingApproval, PreparedCall, interrupted_result
from ..tools._permission_check import approval_summary, granted_permissions
from ..tools._tool import ToolContext
from ._core import LoopCore
from ._effects import CLEANUP_SECONDS, Effects
from ._events import (
    AgentEnded,
    ApprovalRequested,
    ExecutedToolCall,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolResultReceived,
    TurnFinished,
)
from ._mutators import MutationPoint
from ._persistence import Persistence
from ._results import answer, placeholder, refused
from ._state import (
    ERROR_KIND_KEY,
    LIMIT_KEY,
    CallStatus,
    RetryPoint,
    RoundCall,
    ToolRound,
    TurnPhase,
    TurnState,
    interrupted_assistant_item,
    interrupted_turn_metadata,
)
from ._steps import AfterToolResult, AnswerKind, ApprovalRequest, AwaitingInput, Finished, Step

__all__ = ["ToolPipeline"]

CallModel = Callable[[TurnState, MutationPoint], Awaitable[Step]]


log = get_logger()


class ToolPipeline:
    """Runs tool rounds and ends turns (every open call gets its one result)."""

    __slots__ = (
        "_core",
        "_driver",
        "_executor",
        "_fx",
        "_late",
        "_permissions",
        "_persistence",
        "_resources",
        "_tasks",
    )

    def __init__(
        self, core: LoopCore, effects: Effects, persistence: Persistence, driver: Any
    ) -> None:
        self._core = core
        self._fx = effects
        self._persistence = persistence
        # Weak: the driver owns this pipeline (a strong reference back would make every
        # session a reference cycle that only the garbage collector frees).
        self._driver: Callable[[], Any] = weakref.ref(driver)
        parts = effects.parts
        self._executor = parts.executor
        self._tasks = parts.task_manager
        self._permissions = parts.permissions
        self._resources = parts.resources
        self._late: list[ToolResultPart] | None = None
        """Results a task manager reported for calls already answered, appended (as
        notifications) once the round's own results are all in (made when needed)."""

    # -- a round -------------------------------------------------------------

    async def advance(self, turn: TurnState, tool_round: ToolRound) -> Step:
        """Start every startable call, wait for the foreground ones, then decide what's next.

        Results are appended in the model's call order, whatever order they
        finished in.
        """
        if turn.cancellation is None:  # no scope to enter
            if (fresh := await self._start_prepared(turn, tool_round)) is not None:
                return fresh
            await self._collect(turn, tool_round)
        else:
            with turn.cancellation.scope():
                if (fresh := await self._start_prepared(turn, tool_round)) is not None:
                    return fresh
                await self._collect(turn, tool_round)
        self._append_results(turn, tool_round)
        if turn.is_cancelled:
            return await self.finish_cancelled(turn, "tool")
        if tool_round.running():
            raise InvalidStateError(
                f"task manager {type(self._tasks).__name__} reported no running tasks for "
                f"{turn.turn_id} while calls were still running"
            )
        if (step := self.surface_approval(tool_round)) is not None:
            return step
        return await self._after_round(turn, tool_round)

    async def _start_prepared(self, turn: TurnState, tool_round: ToolRound) -> Step | None:
        """Start (or skip, at a steering message) each prepared call; a new approval stops."""
        for call in tool_round.calls:
            if call.status is not CallStatus.PREPARED:
                continue
            if self._core.steering:  # the tool-call boundary a steering message waits for
                self._skip(call, tool_round)
            else:
                if self._persistence.enabled:  # the results so far, before this call runs
                    await self._persistence.save_results(self._core)
                await self._prepare_and_execute(turn, call, tool_round)
                if self._persistence.enabled:
                    self._persistence.note_finished_calls(tool_round)
        if not turn.is_cancelled and (fresh := _surface_new_approval(tool_round)) is not None:
            # Approvals surface one by one while the other calls keep running;
            # their results are collected when the round resumes.
            return fresh
        return None

    async def _collect(self, turn: TurnState, tool_round: ToolRound) -> None:
        """Wait for the round's foreground calls still running."""
        while tool_round.running():
            if self._persistence.enabled:  # the results so far, before waiting for more
                await self._persistence.save_results(self._core)
            update = await self._tasks.wait_for_turn(turn.turn_id)
            if update is None:
                break
            self._on_turn_update(tool_round, update)
            if self._persistence.enabled:
                self._persistence.note_finished_calls(tool_round)

    async def _after_round(self, turn: TurnState, tool_round: ToolRound) -> Step:
        turn.round = None
        if self._late:
            self._append_late()
        if tool_round.all_background():
            # Nothing ran in the foreground: the turn waits for background
            # results (drained by a later next()) or for new input.
            self._core.turn = None
            return AwaitingInput(
                self._fx.session_id,
                "tool calls are running in the background; call next() once they finish "
                "(their results start a new turn) or submit input",
                driver=self._driver(),
            )
        if tool_round.asked_host:  # the host already spoke this round: no pause
            driver = self._driver()
            assert driver is not None, "the driver is gone"
            call_model: CallModel = driver._model.call_model  # not held: no reference cycle
            return await call_model(turn, MutationPoint.AFTER_TOOL_RESULT)
        turn.phase = TurnPhase.PAUSED
        return AfterToolResult(
            self._fx.session_id, turn.turn_id, len(self._core.transcript), driver=self._driver()
        )

    # -- one call: prepare, execute, finalize --------------------------------

    async def _prepare_and_execute(
        self, turn: TurnState, call: RoundCall, tool_round: ToolRound
    ) -> None:
        decision = call.decision
        request = call.request
        if decision is not None and decision.kind is AnswerKind.APPROVE_WITH:
            request = attrs.evolve(request, input=decision.input)
        prepared = self._executor.prepare(
            request, self._permissions, approved=granted_permissions(call)
        )
        if isinstance(prepared, ToolResultPart):
            self._finalize(call, tool_round, prepared, CallStatus.ANSWERED)
        elif isinstance(prepared, PendingApproval):
            self._await_approval(turn, call, prepared)
        else:
            await self._execute(turn, call, prepared, tool_round)

    async def _execute(
        self, turn: TurnState, call: RoundCall, prepared: PreparedCall, tool_round: ToolRound
    ) -> None:
        if prepared.timeout is None and self._fx.config.limits.tool_timeout is not None:
            prepared = attrs.evolve(prepared, timeout=self._fx.config.limits.tool_timeout)
        if turn.cancellation is not None:
            call.cancellation = turn.cancellation.for_call()
        ctx = ToolContext(
            self._fx.session_id,
            turn.turn_id,
            call.call.id,
            call.cancellation,
            self._resources,
            call.call.metadata,
        )
        if self._persistence.enabled:
            idempotent = prepared.tool.spec.annotations.idempotent
            refusal = await self._persistence.claim(call, prepared.request, idempotent=idempotent)
            if refusal is not None:  # claimed before, or denied in the store: not run
                self._finalize(call, tool_round, *refusal)
                return
        call.move(CallStatus.RUNNING)
        call.started_at = time.monotonic()
        call.started_wall = time.time()
        if self._fx.observed:
            self._fx.emit(ToolExecutionStarted(call.call.id, call.call.name, call.task_id))
        launch = TaskLaunch(
            prepared.request,
            partial(self._executor.invoke, prepared, ctx),
            call.task_id,
            sole=len(tool_round.calls) == 1,
        )
        started = await self._tasks.start_task(launch, turn.turn_id)
        call.task_id = started.task_id
        if isinstance(started, TaskFinished):
            self._finalize(call, tool_round, started.result, CallStatus.ANSWERED)
        elif started.kind is TaskKind.BACKGROUND:
            self._to_background(call, tool_round, CallStatus.BACKGROUND)

    def _finalize(
        self, call: RoundCall, tool_round: ToolRound, result: ToolResultPart, status: CallStatus
    ) -> None:
        """Record ``call``'s one result (appended in call order when the round ends)."""
        if call.status is not status:
            call.move(status)
        tool_round.results[call.index] = result

    def _to_background(self, call: RoundCall, tool_round: ToolRound, status: CallStatus) -> None:
        """Answer ``call`` with a placeholder; its real result comes as a notification.

        The call's checkpoint is released: the turn's later interrupts no longer
        reach the tool (cancel it through the task manager's handle instead).
        """
        if call.cancellation is not None:
            call.cancellation.release()
        self._core.add_detached(call.call.id)
        self._finalize(call, tool_round, placeholder(call, status), status)

    def _skip(self, call: RoundCall, tool_round: ToolRound) -> None:
        call.decision = None
        result = answer(call, CallStatus.SKIPPED, self._core.steering[0].label)
        self._finalize(call, tool_round, result, CallStatus.SKIPPED)

    def _on_turn_update(self, tool_round: ToolRound, update: TaskFinished | TaskDetached) -> None:
        if isinstance(update, TaskDetached):
            call = tool_round.by_id(update.task.call_id)
            if call is not None and call.status is CallStatus.RUNNING:
                self._to_background(call, tool_round, CallStatus.DETACHED)
            return
        call = tool_round.by_id(update.result.call_id)
        if call is None or call.status is not CallStatus.RUNNING:
            # A result for a call already answered (or not of this round): a notification,
            # but only after the round's results (nothing may come between the calls
            # and their results).
            log.warning(
                "task manager reported a result for a call that is not running",
                task_manager=type(self._tasks).__name__,
                call_id=update.result.call_id,
            )
            if self._late is None:
                self._late = []
            self._late.append(update.result)
            return
        self._finalize(call, tool_round, update.result, CallStatus.ANSWERED)

    def _append_late(self) -> None:
        late, self._late = self._late or [], None
        for result in late:
            self.append_result(result, background=True)

    # -- approvals -----------------------------------------------------------

    def _await_approval(self, turn: TurnState, call: RoundCall, needed: PendingApproval) -> None:
        call.move(CallStatus.AWAITING_APPROVAL)
        call.decision = None
        decision = needed.decision
        call.approval = ApprovalRequest(
            call.call.id,
            call.call.name,
            call.call.input,
            needed.permission.kind,
            decision.reason,
            approval_summary(needed),
            decision.id or f"approval:{call.call.id}",
            turn.turn_id,
            call.task_id,
            needed.permission.metadata,
            needed.pending,
            driver=self._driver(),
        )
        if self._fx.observed:
            self._fx.emit(
                ApprovalRequested(
                    call.call.id,
                    call.call.name,
                    needed.permission.kind,
                    decision.reason,
                    call.approval.summary,
                )
            )

    def surface_approval(self, tool_round: ToolRound) -> ApprovalRequest | None:
        """A new approval first; else re-surface the first one still unanswered."""
        if (fresh := _surface_new_approval(tool_round)) is not None:
            return fresh
        for call in tool_round.calls:
            if call.undecided:
                return call.approval
        return None

    def apply_decisions(self, tool_round: ToolRound) -> bool:
        """Skip unanswered approvals at a steering message; run or deny answered ones.

        Returns whether any call moved (the round then continues).
        """
        skipped = False
        if self._core.steering:
            # The host sent a new message instead of answering: skip the questions.
            for call in tool_round.calls:
                if call.undecided:
                    self._skip(call, tool_round)
                    skipped = True
        decided = [call for call in tool_round.calls if call.status is CallStatus.DECIDED]
        for call in decided:
            assert call.decision is not None
            if call.decision.approved:
                call.move(CallStatus.PREPARED)
            else:
                result = answer(call, CallStatus.DENIED, call.decision.reason)
                self._finalize(call, tool_round, result, CallStatus.DENIED)
        return bool(decided) or skipped

    def refuse(self, turn: TurnState, tool_round: ToolRound, limit: tuple[str, int]) -> Step:
        """Answer every call of a round over a tool-call limit and end the turn."""
        name, value = limit
        for call in tool_round.calls:
            result = refused(call, len(tool_round.calls), name, value)
            self._record(turn, call, result)
            self.append_result(result)
        turn.round = None
        return self.finish(turn, FinishReason.LIMIT_REACHED, {LIMIT_KEY: name})

    # -- results and turn endings --------------------------------------------

    def _append_results(self, turn: TurnState, tool_round: ToolRound) -> None:
        results = tool_round.results
        for index in sorted(results):
            call = tool_round.calls[index]
            result = results[index]
            if self._fx.observed and call.started_at is not None:
                elapsed = time.monotonic() - call.started_at
                self._fx.emit(
                    ToolExecutionFinished(
                        call.call.id, call.call.name, elapsed, result.is_error, result
                    )
                )
            # The record's finish time is the result item's time (one clock read).
            self.append_result(result, at=self._record(turn, call, result))
        results.clear()

    def _record(self, turn: TurnState, call: RoundCall, result: ToolResultPart) -> float | None:
        """Add ``call`` and its result to the turn's ``tool_calls``; the finish time."""
        finished = time.time() if call.started_wall is not None else None
        duration = time.monotonic() - call.started_at if call.started_at is not None else None
        turn.tool_calls.append(
            ExecutedToolCall(
                call_id=call.call.id,
                tool_name=call.call.name,
                input=_input_of(call),
                result=result,
                started_at=call.started_wall,
                finished_at=finished,
                duration=duration,
            )
        )
        self._core.session_tool_calls += 1
        return finished

    def append_result(
        self, result: ToolResultPart, *, background: bool = False, at: float | None = None
    ) -> None:
        """Append ``result`` (a background call's real result becomes a notification),
        stamped ``at`` (default: now)."""
        if self._fx.observed:
            self._fx.emit(ToolResultReceived(result))
        self._core.append_result(result, background=background, at=at)

    def finish(
        self,
        turn: TurnState,
        reason: FinishReason,
        metadata: Any = None,
        error: ProviderError | None = None,
    ) -> Finished:
        """End ``turn`` with ``reason``."""
        result = self._core.finish_turn(turn, reason, metadata, error)
        if self._fx.observed:
            self._fx.emit(TurnFinished(result))
            if not self._core.pending_input:
                self._fx.emit(AgentEnded(self._fx.session_id, turn.turn_id, reason))
        return Finished(result)

    def _interrupted(self, call: RoundCall) -> ToolResultPart:
        """An open call's result at a cancel: what the executor saw its worker thread do
        (the real result, or in doubt), else "cancelled"."""
        if call.status is CallStatus.RUNNING:
            settled = interrupted_result(self._executor, call.call.id)
            if settled is not None:
                call.move(CallStatus.ANSWERED)
                return settled
        return answer(call, CallStatus.CANCELLED)

    def finish_failed(
        self,
        turn: TurnState,
        error: ProviderError,
        point: str,
        metadata: dict[str, object] | None = None,
    ) -> Finished:
        """End ``turn`` because a model call failed; ``retry()`` can issue it again.

        No call is open when the model is called, so the transcript is valid as it is.
        """
        turn.round = None
        turn.phase = TurnPhase.ACTIVE
        self._core.retry_point = RetryPoint(turn.turn_id, point, error)
        return self.finish(
            turn, FinishReason.ERROR, {**(metadata or {}), ERROR_KIND_KEY: error.kind.value}, error
        )

    async def finish_cancelled(self, turn: TurnState, stage: str) -> Finished:
        """Answer every open call of the turn, close it with an interrupted item."""
        tool_round = turn.round
        if tool_round is not None:
            self._append_results(turn, tool_round)
            if tool_round.running():
                with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                    if self._persistence.enabled:  # the results so far, before waiting
                        await self._persistence.save_results(self._core)
                    await self._tasks.on_turn_interrupted(turn.turn_id)
            for call in tool_round.calls:
                if not call.answered:
                    result = self._interrupted(call)
                    self._record(turn, call, result)
                    self.append_result(result)
            turn.round = None
            if self._late:
                self._append_late()
        item = interrupted_assistant_item(stage, time.time())
        self._core.append(item)
        turn.phase = TurnPhase.ACTIVE
        return self.finish(turn, FinishReason.CANCELLED, interrupted_turn_metadata(stage))


def _input_of(call: RoundCall) -> Any:
    decision = call.decision
    if decision is not None and decision.kind is AnswerKind.APPROVE_WITH:
        return decision.input
    return call.request.input


def _surface_new_approval(tool_round: ToolRound) -> ApprovalRequest | None:
    """The first approval not yet shown to the host (marked as shown), if any."""
    for call in tool_round.calls:
        if call.status is CallStatus.AWAITING_APPROVAL:
            call.move(CallStatus.APPROVAL_SHOWN)
            return call.approval
    return None
