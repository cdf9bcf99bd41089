"""Tool rounds: start the calls of one model response, collect their results.

Every call gets exactly one result, appended in the model's call order;
approvals surface one by one while the round's other calls keep running.
"""

from __future__ import annotations

import time
from functools import partial

import attrs

from ..core._errors import InvalidStateError
from ..core._items import (
    FinishReason,
    ResultOutcome,
    ToolResultPart,
)
from ..tasks._protocol import TaskDone, TaskKind, TaskLaunch, TaskMovedToBackground
from ..tools._executor import ApprovalNeeded, PreparedCall, synthesized_result
from ..tools._permission_check import approval_summary, granted_permissions
from ..tools._tool import ToolContext
from ._driver_base import DriverBase
from ._events import (
    ApprovalRequired,
    ToolExecutionStarted,
)
from ._mutators import MutationPoint
from ._state import (
    LIMIT_KEY,
    CallStatus,
    DriverState,
    RoundCall,
    ToolRound,
    TurnState,
)
from ._steps import (
    AfterToolResult,
    ApprovalRequest,
    AwaitingInput,
    DecisionKind,
    Step,
)

__all__ = ["RoundRunner"]


class RoundRunner(DriverBase):
    """Runs tool rounds (internal; part of ``LoopDriver``)."""

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
                    await self._journal_results(tool_round)
            if not turn.is_cancelled and (fresh := _surface_new_approval(tool_round)) is not None:
                # Approvals surface one by one while the other calls keep running;
                # their results are collected when the round resumes.
                return fresh
            while any(call.status is CallStatus.RUNNING for call in tool_round.calls):
                update = await self._tasks.wait_for_turn(turn.turn_id)
                if update is None:
                    break
                self._on_turn_update(tool_round, update, tool_round.results)
                await self._journal_results(tool_round)
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
            request, self._permissions, approved=granted_permissions(call)
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
        if turn.cancellation is not None:
            call.cancellation = turn.cancellation.for_call()
        ctx = ToolContext(
            self.session_id,
            turn.turn_id,
            call.call.id,
            call.cancellation,
            self._resources,
            call.call.metadata,
        )
        if self._store is not None and not prepared.tool.spec.annotations.idempotent:
            # At most once: a restore answers a started call without a result as
            # in doubt instead of running it again.
            await self._store.record_call_started(self.session_id, call.call.id, call.call.name)
            call.journaled = True
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
            call.background = True
            self._move_to_background(call, results, "is running", ResultOutcome.BACKGROUND)

    async def _journal_results(self, tool_round: ToolRound) -> None:
        """Save the round once a call recorded as started has its result.

        A restore then keeps that result instead of answering the call as in
        doubt; calls still running are saved as not started (and answered in
        doubt if they were recorded as started).
        """
        if self._store is None:
            return
        finished = [
            call for call in tool_round.calls if call.journaled and call.status is CallStatus.DONE
        ]
        if not finished:
            return
        for call in finished:
            call.journaled = False
        await self._save(DriverState.AFTER_TOOL_RESULT)

    def _move_to_background(
        self,
        call: RoundCall,
        results: dict[int, ToolResultPart],
        running: str,
        outcome: ResultOutcome,
    ) -> None:
        """Answer ``call`` with a placeholder; its real result comes as a notification.

        The call's checkpoint is released: the turn's later interrupts no longer
        reach the tool (cancel it through the task manager's handle instead).
        """
        if call.cancellation is not None:
            call.cancellation.release()
        call.status = CallStatus.DONE
        self._detached.add(call.call.id)
        results[call.index] = synthesized_result(
            call.call.id,
            f"Tool {call.call.name} {running} in the background; the result will be "
            "delivered when it completes.",
            outcome,
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
            self._move_to_background(call, results, "is now running", ResultOutcome.DETACHED)
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
            approval_summary(needed),
            decision.id or f"approval:{call.call.id}",
            turn.turn_id,
            call.task_id,
            needed.permission.metadata,
            needed.pending,
            driver=self,
        )
        if self._observers:
            self._emit(
                ApprovalRequired(
                    call.call.id,
                    call.call.name,
                    needed.permission.kind,
                    decision.reason,
                    call.approval.summary,
                )
            )

    def _surface_approval(self, tool_round: ToolRound) -> ApprovalRequest | None:
        """A new approval first; else re-surface the first one still unanswered."""
        if (fresh := _surface_new_approval(tool_round)) is not None:
            return fresh
        return next((call.approval for call in tool_round.calls if call.undecided), None)

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


def _surface_new_approval(tool_round: ToolRound) -> ApprovalRequest | None:
    """The first approval not yet shown to the host (marked as shown), if any."""
    for call in tool_round.calls:
        if call.undecided and not call.surfaced:
            call.surfaced = True
            return call.approval
    return None
