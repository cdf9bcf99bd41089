"""The core's decisions about a tool round: every call moves prepared ->
(awaiting approval) -> running -> answered (or skipped / denied / cancelled /
in doubt / background), gets exactly one result, and the results are appended
in the model's call order. Synchronous: the driver performs the calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs

from .._log import get_logger
from ..core._errors import InvalidStateError, ProviderError
from ..core._items import FinishReason, ToolResultPart
from ..model._session_config import SessionConfig
from ..tasks._protocol import TaskDetached, TaskKind, TaskLaunched, TaskResult
from ..tools._executor import PendingApproval, PreparedCall
from ..tools._permission_check import approval_summary
from ._actions import Action, CallModel, FinishCancelled, Hand
from ._call_results import answer, placeholder, refused
from ._child_usage import CHILD_USAGE_KEY, usage_of
from ._core import LoopCore
from ._events import ExecutedToolCall
from ._mutators import MutationPoint
from ._observer import Nobody
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
from ._steps import (
    AfterToolResult,
    AnswerKind,
    ApprovalRequest,
    AwaitingInput,
    CallQuestion,
    Finished,
    Resolver,
)

__all__ = ["RoundRules", "input_of", "shown_question"]

log = get_logger()

Interrupted = Callable[[str], ToolResultPart | None]
"""What the executor saw a running call's worker do when its turn was interrupted."""


class RoundRules:
    """The round half of :class:`~agentloop.loop._machine.LoopMachine` (its slots there)."""

    __slots__ = ("late",)

    late: list[ToolResultPart] | None
    """Results a task manager reported for calls already answered, appended (as
    notifications) once the round's own results are all in (made when needed)."""
    core: LoopCore
    observer: Nobody
    config: SessionConfig
    session_id: str
    tasks_name: str

    # -- one call ------------------------------------------------------------

    def call_prepared(
        self,
        turn: TurnState,
        call: RoundCall,
        tool_round: ToolRound,
        prepared: ToolResultPart | PendingApproval | PreparedCall,
        resolver: Resolver,
    ) -> PreparedCall | None:
        """What the executor's ``prepare`` said: the call to run (with the session's tool
        timeout), or ``None`` when it is answered or waits for an approval."""
        if isinstance(prepared, ToolResultPart):
            self.finalize(call, tool_round, prepared, CallStatus.ANSWERED)
            return None
        if isinstance(prepared, PendingApproval):
            self._await_approval(turn, call, prepared, resolver)
            return None
        timeout = self.config.limits.tool_timeout
        if prepared.timeout is None and timeout is not None:
            prepared = attrs.evolve(prepared, timeout=timeout)
        return prepared

    def call_running(self, call: RoundCall) -> None:
        """``call`` is about to start (claimed, if it had to be; the tool I/O tells the
        observers as it starts the task)."""
        call.move(CallStatus.RUNNING)
        call.started_at = time.monotonic()
        call.started_wall = time.time()

    def call_started(
        self, call: RoundCall, tool_round: ToolRound, started: TaskResult | TaskLaunched
    ) -> None:
        """The task manager started ``call`` (it may have finished already)."""
        call.task_id = started.task_id
        if isinstance(started, TaskResult):
            self.finalize(call, tool_round, started.result, CallStatus.ANSWERED)
        elif started.kind is TaskKind.BACKGROUND:
            self._to_background(call, tool_round, CallStatus.BACKGROUND)

    def finalize(
        self, call: RoundCall, tool_round: ToolRound, result: ToolResultPart, status: CallStatus
    ) -> None:
        """Record ``call``'s one result (appended in call order when the round ends)."""
        if call.status is not status:
            call.move(status)
        call.question = call.resumed = None  # a question it still waited on is moot
        tool_round.results[call.index] = result
        if result.metadata and CHILD_USAGE_KEY in result.metadata:
            self._count_child_usage(result.metadata[CHILD_USAGE_KEY])

    def _count_child_usage(self, fields: Any) -> None:
        """Add a child agent's usage (a result's ``CHILD_USAGE_KEY``) to the turn's and the
        session's totals, so the parent's limits count it."""
        usage = usage_of(fields)
        core = self.core
        if usage is not None and core.turn is not None:
            core.turn.add_usage(usage)
            core.add_session_usage(usage)

    def skip_at_steering(self, call: RoundCall, tool_round: ToolRound) -> bool:
        """Answer ``call`` "skipped" if a steering message waits (the tool-call boundary)."""
        if not self.core.steering:
            return False
        call.decision = None
        result = answer(call, CallStatus.SKIPPED, self.core.steering[0].label)
        self.finalize(call, tool_round, result, CallStatus.SKIPPED)
        return True

    def _to_background(self, call: RoundCall, tool_round: ToolRound, status: CallStatus) -> None:
        """Answer ``call`` with a placeholder; its real result comes as a notification.

        The call's checkpoint is released: the turn's later interrupts no longer
        reach the tool (cancel it through the task manager's handle instead).
        """
        if call.cancellation is not None:
            call.cancellation.release()
        self.core.add_detached(call.call.id)
        self.finalize(call, tool_round, placeholder(call, status), status)

    def turn_update(self, tool_round: ToolRound, update: TaskResult | TaskDetached) -> None:
        """A running call of the round finished, or moved to the background."""
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
                task_manager=self.tasks_name,
                call_id=update.result.call_id,
            )
            if self.late is None:
                self.late = []
            self.late.append(update.result)
            return
        self.finalize(call, tool_round, update.result, CallStatus.ANSWERED)

    # -- approvals -----------------------------------------------------------

    def _await_approval(
        self, turn: TurnState, call: RoundCall, needed: PendingApproval, resolver: Resolver
    ) -> None:
        call.move(CallStatus.AWAITING_APPROVAL)
        call.decision = None
        decision, kind = needed.decision, needed.permission.kind
        call.approval = ApprovalRequest(
            call.call.id,
            call.call.name,
            call.call.input,
            kind,
            decision.reason,
            approval_summary(needed),
            decision.id or f"approval:{call.call.id}",
            turn.turn_id,
            call.task_id,
            needed.permission.metadata,
            needed.pending,
            driver=resolver,
        )
        approval = call.approval
        self.observer.approval_requested(
            call.call.id, call.call.name, kind, decision.reason, approval.summary
        )

    def new_approval(self, turn: TurnState, tool_round: ToolRound) -> ApprovalRequest | None:
        """The first approval not yet shown to the host (marked as shown), unless the turn
        was cancelled: approvals surface one by one while the other calls keep running."""
        if turn.is_cancelled:
            return None
        return _surface_new_approval(tool_round)

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
        if self.core.steering:
            # The host sent a new message instead of answering: skip the questions.
            for call in tool_round.calls:
                if call.undecided:
                    skipped = self.skip_at_steering(call, tool_round)
        decided = [call for call in tool_round.calls if call.status is CallStatus.DECIDED]
        for call in decided:
            assert call.decision is not None
            if call.decision.approved:
                call.move(CallStatus.PREPARED)
            else:
                result = answer(call, CallStatus.DENIED, call.decision.reason)
                self.finalize(call, tool_round, result, CallStatus.DENIED)
        return bool(decided) or skipped

    # -- the round's end -----------------------------------------------------

    def round_collected(self, turn: TurnState, tool_round: ToolRound, resolver: Resolver) -> Action:
        """Every call started and every foreground one answered (or the turn cancelled):
        append the results in call order and say what comes next."""
        self.append_results(turn, tool_round)
        if turn.is_cancelled:
            return FinishCancelled(turn, "tool")
        if tool_round.running():
            raise InvalidStateError(
                f"task manager {self.tasks_name} reported no running tasks for "
                f"{turn.turn_id} while calls were still running"
            )
        if (step := self.surface_approval(tool_round)) is not None:
            return Hand(step)
        turn.round = None
        if self.late:
            self._append_late()
        if tool_round.all_background():
            # Nothing ran in the foreground: the turn waits for background
            # results (drained by a later next()) or for new input.
            self.core.turn = None
            return Hand(
                AwaitingInput(
                    self.session_id,
                    "tool calls are running in the background; call next() once they finish "
                    "(their results start a new turn) or submit input",
                    driver=resolver,
                )
            )
        if tool_round.asked_host:  # the host already spoke this round: no pause
            return CallModel(turn, MutationPoint.AFTER_TOOL_RESULT)
        turn.phase = TurnPhase.PAUSED
        transcript_len = len(self.core.transcript)
        return Hand(AfterToolResult(self.session_id, turn.turn_id, transcript_len, driver=resolver))

    def refuse(self, turn: TurnState, tool_round: ToolRound, limit: tuple[str, int]) -> Finished:
        """Answer every call of a round over a tool-call limit and end the turn."""
        name, value = limit
        for call in tool_round.calls:
            result = refused(call, len(tool_round.calls), name, value)
            self._record(turn, call, result)
            self.append_result(result)
        turn.round = None
        return self.finish(turn, FinishReason.LIMIT_REACHED, {LIMIT_KEY: name})

    def append_results(self, turn: TurnState, tool_round: ToolRound) -> None:
        """Append the round's results so far, in call order."""
        results, observer, core = tool_round.results, self.observer, self.core
        for index in sorted(results):
            call = tool_round.calls[index]
            result = results[index]
            # The record's finish time is the result item's time (one clock read).
            at = self._record(turn, call, result)
            observer.tool_answered(call.call.id, call.call.name, call.started_at, result)
            core.append_result(result, at=at)
        results.clear()

    def _record(self, turn: TurnState, call: RoundCall, result: ToolResultPart) -> float | None:
        """Add ``call`` and its result to the turn's ``tool_calls``; the finish time."""
        finished = time.time() if call.started_wall is not None else None
        duration = time.monotonic() - call.started_at if call.started_at is not None else None
        turn.tool_calls.append(
            ExecutedToolCall(
                call_id=call.call.id,
                tool_name=call.call.name,
                input=input_of(call),
                result=result,
                started_at=call.started_wall,
                finished_at=finished,
                duration=duration,
            )
        )
        self.core.session_tool_calls += 1
        return finished

    def append_result(
        self, result: ToolResultPart, *, background: bool = False, at: float | None = None
    ) -> None:
        """Append ``result`` (a background call's real result becomes a notification),
        stamped ``at`` (default: now)."""
        self.observer.tool_result(result)
        self.core.append_result(result, background=background, at=at)

    def _append_late(self) -> None:
        late, self.late = self.late or [], None
        for result in late:
            self.append_result(result, background=True)

    # -- turn endings --------------------------------------------------------

    def finish(
        self,
        turn: TurnState,
        reason: FinishReason,
        metadata: Any = None,
        error: ProviderError | None = None,
    ) -> Finished:
        """End ``turn`` with ``reason``."""
        result = self.core.finish_turn(turn, reason, metadata, error)
        self.observer.turn_finished(result, self.session_id, not self.core.pending_input)
        return Finished(result)

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
        self.core.retry_point = RetryPoint(turn.turn_id, point, error)
        metadata = {**(metadata or {}), ERROR_KIND_KEY: error.kind.value}
        return self.finish(turn, FinishReason.ERROR, metadata, error)

    def close_cancelled(self, turn: TurnState, stage: str, interrupted: Interrupted) -> Finished:
        """Answer every open call of the cancelled ``turn`` (its running calls were told to
        stop), close it with an interrupted item and end it."""
        tool_round = turn.round
        if tool_round is not None:
            for call in tool_round.calls:
                if not call.answered:
                    result = _interrupted(call, interrupted)
                    self._record(turn, call, result)
                    self.append_result(result)
            turn.round = None
            if self.late:
                self._append_late()
        self.core.append(interrupted_assistant_item(stage, time.time()))
        turn.phase = TurnPhase.ACTIVE
        return self.finish(turn, FinishReason.CANCELLED, interrupted_turn_metadata(stage))


def _interrupted(call: RoundCall, interrupted: Interrupted) -> ToolResultPart:
    """An open call's result at a cancel: what the executor saw its worker thread do
    (the real result, or in doubt), else "cancelled"."""
    if call.status is CallStatus.RUNNING:
        settled = interrupted(call.call.id)
        if settled is not None:
            call.move(CallStatus.ANSWERED)
            return settled
    if call.doubt is not None:  # it may have run before the restore: not "cancelled"
        call.doubt = None
        return answer(call, CallStatus.IN_DOUBT)
    return answer(call, CallStatus.CANCELLED)


def shown_question(tool_round: ToolRound) -> CallQuestion | None:
    """The question shown to the host and not answered yet, if any."""
    for call in tool_round.calls:
        if call.question is not None:
            return call.question
    return None


def input_of(call: RoundCall) -> Any:
    """The input ``call`` runs with: the host's edit, else the model's."""
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
