"""One run of a session as a DBOS workflow: the driver loop, retries, durable approvals.

A session is a chain of runs, one per input: run ``n`` (registered as
:data:`SESSION_WORKFLOW`, id ``<session_id>#<n>``) waits for run ``n - 1``
and reads its result (a recorded DBOS step), resumes the driver from the
checkpoint in it, submits its input and calls ``next()`` until the turn
finishes; its own result carries the checkpoint the next run continues from.
On recovery DBOS runs it again from the top; every model call, tool call,
sleep and approval answer comes back from DBOS's record, so the driver takes
the same path and no recorded call is repeated.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, assert_never

from dbos import DBOS

from ..._log import get_logger
from ...core._items import Item
from ...loop._converter import structure, unstructure
from ...loop._driver import LoopDriver
from ...loop._steps import (
    AfterToolResult,
    AnswerKind,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    Finished,
    Step,
)
from ...model._session_config import SessionConfig
from ._agent import DurableAgent, registered_agent, run_workflow_id
from ._results import ApprovalOutcome, ApprovalStatus, DurableApproval, DurableError

__all__ = ["APPROVAL_EVENT", "MAX_STEPS", "SESSION_WORKFLOW", "approval_topic", "session_run"]

_log = get_logger()

SESSION_WORKFLOW = "agentloop.session"
"""The DBOS workflow name of a session run (for ``EnqueueOptions.workflow_name``)."""
APPROVAL_EVENT = "agentloop.approval"
"""The workflow event that holds the approval it waits for (``None`` when none)."""
MAX_STEPS = 10_000
"""A run that takes more ``next()`` steps than this fails (a runaway loop)."""


def approval_topic(call_id: str) -> str:
    """The DBOS message topic an approval for ``call_id`` is sent on."""
    return f"agentloop.approval:{call_id}"


@DBOS.workflow(name=SESSION_WORKFLOW)
async def session_run(
    agent_name: str, session_id: str, run: int, input_items: list[Any]
) -> dict[str, Any]:
    """Run number ``run`` of ``session_id``: answer ``input_items`` after the previous runs."""
    durable = registered_agent(agent_name, DBOS.workflow_id)
    approvals: list[ApprovalOutcome] = []

    async def child_approval(request: ApprovalRequest) -> None:
        """A child agent's approval (it runs inline): waited for like the agent's own."""
        approvals.append(await _wait_for_approval(request, durable.approval_timeout))

    agent = durable.wrapped(child_approval)
    checkpoint = await _previous_checkpoint(session_id, run)
    if checkpoint is None:
        driver = await agent.start(SessionConfig(session_id))
    else:
        driver = await agent.resume(checkpoint)
    driver.submit_input([structure(item, Item) for item in input_items])
    document = await _run_turn(driver, durable, approvals)
    return {"session_id": session_id, "run": run, **document, "checkpoint": driver.checkpoint()}


async def _previous_checkpoint(session_id: str, run: int) -> Mapping[str, Any] | None:
    if run == 1:
        return None
    previous = run_workflow_id(session_id, run - 1)
    try:
        # A recorded step: a replay reads the same checkpoint; waits while that run runs.
        document = await DBOS.get_result_async(previous)
    except Exception as error:
        raise DurableError(
            f"cannot run workflow {DBOS.workflow_id}: the session's previous run {previous} "
            f"failed ({type(error).__name__}: {error}); the session cannot continue from it"
        ) from error
    checkpoint = document.get("checkpoint") if isinstance(document, Mapping) else None
    if not isinstance(checkpoint, Mapping):
        raise DurableError(
            f"cannot run workflow {DBOS.workflow_id}: the result of {previous} holds no "
            f"agentloop checkpoint (found {type(document).__name__}); is it a session run?"
        )
    return checkpoint


async def _run_turn(
    driver: LoopDriver, durable: DurableAgent, approvals: list[ApprovalOutcome]
) -> dict[str, Any]:
    retries = 0
    step: Step = await driver.next()
    for _ in range(MAX_STEPS):
        if isinstance(step, Finished):
            result = step.result
            policy = durable.retry
            if policy is not None and policy.allows(result.error, retries):
                await DBOS.sleep_async(policy.delay(retries))  # durable: a replay skips it
                retries += 1
                _log.info("turn retried", workflow_id=DBOS.workflow_id, retry=retries)
                step = await driver.retry()
                continue
            return {
                "finish_reason": result.finish_reason.value,
                "error": None if result.error is None else unstructure(result.error),
                "retries": retries,
                "approvals": [unstructure(outcome) for outcome in approvals],
            }
        if isinstance(step, ApprovalRequest):
            approvals.append(await _wait_for_approval(step, durable.approval_timeout))
        elif isinstance(step, AwaitingInput):
            raise DurableError(
                f"workflow {DBOS.workflow_id}: the driver awaits input before the turn "
                f"finished ({step.reason})"
            )
        elif isinstance(step, CallQuestion):  # never: its SimpleTaskManager refuses asks
            raise DurableError(
                f"workflow {DBOS.workflow_id}: tool call {step.call_id} ({step.tool_name}) "
                "asked a question; DBOS workflows cannot answer questions of running calls"
            )
        elif isinstance(step, CallInDoubt):
            raise DurableError(
                f"workflow {DBOS.workflow_id}: tool call {step.call_id} ({step.tool_name}) "
                "is in doubt and the agent asks the host (ask_in_doubt); DBOS workflows "
                "cannot ask: build the workflow's agent without ask_in_doubt() and give "
                "the tool a reconcile, or resolve it in a host (Agent.resume)"
            )
        elif not isinstance(step, AfterToolResult):
            assert_never(step)
        step = await driver.next()
    raise DurableError(f"workflow {DBOS.workflow_id}: no finish after {MAX_STEPS} steps")


async def _deadline(seconds: float) -> float:
    return time.time() + seconds


async def _wait_for_approval(request: ApprovalRequest, seconds: float) -> ApprovalOutcome:
    deadline: float = await DBOS.run_step_async(
        {"name": "agentloop.approval_deadline"}, _deadline, seconds
    )
    pending = DurableApproval(
        call_id=request.call_id,
        tool_name=request.tool_name,
        input=request.input,
        summary=request.summary,
        deadline=deadline,
    )
    await DBOS.set_event_async(APPROVAL_EVENT, json.dumps(unstructure(pending)))
    # DBOS records the message (or the timeout): a replay takes the same branch.
    message = await DBOS.recv_async(
        approval_topic(request.call_id), timeout_seconds=max(0.0, deadline - time.time())
    )
    await DBOS.set_event_async(APPROVAL_EVENT, None)
    outcome = _decide(request, message, deadline)
    _log.info(
        "approval ended",
        workflow_id=DBOS.workflow_id,
        call_id=request.call_id,
        status=outcome.status.value,
    )
    return outcome


def _decide(request: ApprovalRequest, message: Any, deadline: float) -> ApprovalOutcome:
    def outcome(status: ApprovalStatus, reason: str | None = None) -> ApprovalOutcome:
        return ApprovalOutcome(
            call_id=request.call_id,
            tool_name=request.tool_name,
            status=status,
            deadline=deadline,
            reason=reason,
        )

    if message is None:
        when = datetime.fromtimestamp(deadline, UTC).isoformat(timespec="seconds")
        reason = f"approval expired: no decision before {when}"
        request.deny(reason)
        return outcome(ApprovalStatus.EXPIRED, reason)
    try:
        decision: ApprovalAnswer = structure(json.loads(message), ApprovalAnswer)
    except Exception as error:  # a malformed answer is a denial: fail closed
        reason = f"approval denied: unreadable decision ({type(error).__name__})"
        request.deny(reason)
        return outcome(ApprovalStatus.DENIED, reason)
    if decision.kind is AnswerKind.APPROVE:
        request.approve()
        return outcome(ApprovalStatus.APPROVED)
    if decision.kind is AnswerKind.APPROVE_WITH:
        request.approve_with(decision.input)
        return outcome(ApprovalStatus.APPROVED_WITH)
    request.deny(decision.reason)
    return outcome(ApprovalStatus.DENIED, decision.reason)
