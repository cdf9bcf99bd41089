"""A session as a DBOS workflow: the driver loop, durable approvals, the host API.

The workflow (registered as :data:`SESSION_WORKFLOW`) builds the agent's
driver with a :class:`DurableModel` and :class:`DurableToolSource` s and calls
``next()`` until the turn finishes. On recovery DBOS runs it again from the
top; every model call, tool call and approval answer comes back from DBOS's
record, so the driver takes the same path and no recorded call is repeated.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import anyio
import attrs
from dbos import DBOS, DBOSClient, DBOSConfig, EnqueueOptions, SetWorkflowID

from ..._log import get_logger
from ..._serde import structure, unstructure
from ...core._errors import AgentLoopError, InvalidInputError
from ...core._items import FinishReason, Item
from ...loop._agent import Agent
from ...loop._session_store import SessionStore
from ...loop._steps import (
    AfterToolResult,
    AnswerKind,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    Finished,
)
from ...model._config import SessionConfig
from ...tasks._simple import SimpleTaskManager
from ._steps import DurableModel, DurableToolSource

__all__ = [
    "APPROVAL_EVENT",
    "SESSION_WORKFLOW",
    "ApprovalOutcome",
    "ApprovalStatus",
    "DurableAgent",
    "DurableError",
    "DurableRunResult",
    "PendingApproval",
    "approval_topic",
    "approve",
    "dbos_config",
    "enqueue_session",
    "pending_approval",
    "start_session",
    "wait_result",
]

_log = get_logger()

SESSION_WORKFLOW = "agentloop.session"
"""The DBOS workflow name of a session run (for ``EnqueueOptions.workflow_name``)."""
APPROVAL_EVENT = "agentloop.approval"
"""The workflow event that holds the approval it waits for (``None`` when none)."""
MAX_STEPS = 10_000
"""A run that takes more ``next()`` steps than this fails (a runaway loop)."""


class DurableError(AgentLoopError):
    """Raised when a durable run cannot start or end as asked.

    An unknown agent name, a run that failed inside DBOS, or a wait that
    timed out; the message names the workflow and what was found.
    """


class ApprovalStatus(StrEnum):
    """How an approval the workflow waited for ended."""

    APPROVED = "approved"
    APPROVED_WITH = "approved_with"
    DENIED = "denied"
    EXPIRED = "expired"
    """No decision arrived before the stored deadline: denied, fail-closed."""


@attrs.frozen(kw_only=True)
class ApprovalOutcome:
    """One approval of a durable run and how it ended; ``deadline`` is UTC epoch seconds."""

    call_id: str
    tool_name: str
    status: ApprovalStatus
    deadline: float
    reason: str | None = None


@attrs.frozen(kw_only=True)
class PendingApproval:
    """The approval a workflow waits for now (its ``APPROVAL_EVENT``)."""

    call_id: str
    tool_name: str
    input: Any
    summary: str
    deadline: float


@attrs.frozen(kw_only=True)
class DurableRunResult:
    """How a durable run ended: the turn's finish reason, the transcript, the approvals."""

    workflow_id: str
    session_id: str
    finish_reason: FinishReason
    transcript: tuple[Item, ...]
    approvals: tuple[ApprovalOutcome, ...] = ()


_AGENTS: dict[str, DurableAgent] = {}


class DurableAgent:
    """An :class:`Agent` registered under ``name`` so DBOS workflows can run it.

    Construct one in every worker process before ``DBOS.launch()`` (recovery
    looks the agent up by name). ``claims`` is a ``SessionStore`` in which
    non-idempotent tools are claimed inside their step (the in-doubt rule);
    ``approval_timeout`` (seconds) is how long an approval waits before it
    expires, denied. The agent's own ``store`` is not used by the workflow:
    DBOS records the run. A custom ``tool_executor`` is refused (only tool
    sources can be wrapped), and so is a task manager other than
    ``SimpleTaskManager`` (tool calls must run in order, one step each).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        name: str,
        claims: SessionStore | None = None,
        approval_timeout: float = 86_400.0,
    ) -> None:
        if not isinstance(agent, Agent):
            raise InvalidInputError(f"DurableAgent expects an Agent, got {type(agent).__name__}")
        if agent.tool_executor is not None:
            raise InvalidInputError(
                "DurableAgent cannot wrap an agent with a custom tool_executor: its tools "
                "would not run as DBOS steps; give the tools as tool sources instead"
            )
        if agent.task_manager is not None and not isinstance(agent.task_manager, SimpleTaskManager):
            raise InvalidInputError(
                "DurableAgent cannot wrap an agent with a custom task_manager "
                f"({type(agent.task_manager).__name__}): concurrent tool calls would make the "
                "order of DBOS steps depend on timing; leave the default SimpleTaskManager"
            )
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"DurableAgent name must be a non-empty str, got {name!r}")
        if not isinstance(approval_timeout, (int, float)) or not approval_timeout > 0:
            raise InvalidInputError(
                f"DurableAgent approval_timeout must be positive seconds, got {approval_timeout!r}"
            )
        self.agent = agent
        self.name = name
        self.claims = claims
        self.approval_timeout = float(approval_timeout)
        _AGENTS[name] = self

    def agent_for_run(self, transcript: Sequence[Item], items: Sequence[Item]) -> Agent:
        """The agent with its model and tool sources wrapped as DBOS steps."""
        return attrs.evolve(
            self.agent,
            model=DurableModel(self.agent.model),
            tool_sources=tuple(
                DurableToolSource(source, self.claims) for source in self.agent.tool_sources
            ),
            store=None,
            transcript=tuple(transcript) or self.agent.transcript,
            input=tuple(items),
        )


def dbos_config(
    name: str, system_database_url: str, *, executor_id: str, application_version: str
) -> DBOSConfig:
    """A DBOS config for a worker: ``executor_id`` and ``application_version`` are required.

    Every live worker process needs its own ``executor_id`` (two with the
    default id take each other's workflows and run steps twice), and a
    restarted worker must reuse its id to recover its workflows. Pin
    ``application_version``: the default is a hash of the code, and
    recovery only picks up workflows of the same version.
    """
    required = (("executor_id", executor_id), ("application_version", application_version))
    for label, value in required:
        if not isinstance(value, str) or not value:
            raise InvalidInputError(f"dbos_config: {label} must be a non-empty str, got {value!r}")
    return {
        "name": name,
        "system_database_url": system_database_url,
        "executor_id": executor_id,
        "application_version": application_version,
    }


def approval_topic(call_id: str) -> str:
    """The DBOS message topic an approval for ``call_id`` is sent on."""
    return f"agentloop.approval:{call_id}"


# -- the workflow ---------------------------------------------------------------------


@DBOS.workflow(name=SESSION_WORKFLOW)
async def _session_workflow(
    agent_name: str, session_id: str, input_items: list[Any], transcript: list[Any]
) -> dict[str, Any]:
    durable = _AGENTS.get(agent_name)
    if durable is None:
        raise DurableError(
            f"cannot run workflow {DBOS.workflow_id}: no DurableAgent named {agent_name!r} in "
            f"this process (registered: {sorted(_AGENTS)}); construct it before DBOS.launch()"
        )
    agent = durable.agent_for_run(
        [structure(item, Item) for item in transcript],
        [structure(item, Item) for item in input_items],
    )
    driver = await agent.start(SessionConfig(session_id))
    approvals: list[ApprovalOutcome] = []
    for _ in range(MAX_STEPS):
        step = await driver.next()
        if isinstance(step, Finished):
            return {
                "session_id": session_id,
                "finish_reason": step.result.finish_reason.value,
                "transcript": [unstructure(item) for item in driver.snapshot().transcript],
                "approvals": [unstructure(outcome) for outcome in approvals],
            }
        if isinstance(step, ApprovalRequest):
            approvals.append(await _wait_for_approval(step, durable.approval_timeout))
        elif isinstance(step, AwaitingInput):
            raise DurableError(
                f"workflow {DBOS.workflow_id}: the driver awaits input before any turn "
                "finished; start the run with input items"
            )
        else:
            assert isinstance(step, AfterToolResult)
    raise DurableError(f"workflow {DBOS.workflow_id}: no finish after {MAX_STEPS} steps")


async def _deadline(seconds: float) -> float:
    return time.time() + seconds


async def _wait_for_approval(request: ApprovalRequest, seconds: float) -> ApprovalOutcome:
    deadline: float = await DBOS.run_step_async(
        {"name": "agentloop.approval_deadline"}, _deadline, seconds
    )
    pending = PendingApproval(
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


# -- the host side (any process, through a DBOSClient) --------------------------------


def _items_document(items: Sequence[Item], label: str) -> list[Any]:
    if isinstance(items, Item):
        raise InvalidInputError(f"{label} expects a list of Items, got one Item")
    checked = list(items)
    for position, item in enumerate(checked):
        if not isinstance(item, Item):
            raise InvalidInputError(f"{label}: element {position} is {type(item).__name__}")
    return [unstructure(item) for item in checked]


async def start_session(
    agent_name: str,
    session_id: str,
    input: Sequence[Item],
    *,
    transcript: Sequence[Item] = (),
    workflow_id: str | None = None,
) -> str:
    """Start a run in this (launched) DBOS process; returns its workflow id.

    A run is one turn: ``input`` answered after ``transcript`` (the prior
    history; pass the last run's transcript to continue a session, with a
    new ``workflow_id``). ``workflow_id`` defaults to ``session_id``;
    starting the same id again returns the existing run (DBOS's idempotency).
    """
    arguments = (
        agent_name,
        session_id,
        _items_document(input, "start_session input"),
        _items_document(transcript, "start_session transcript"),
    )
    chosen = workflow_id or session_id

    def start() -> str:
        with SetWorkflowID(chosen):
            return DBOS.start_workflow(_session_workflow, *arguments).workflow_id

    return await anyio.to_thread.run_sync(start)


async def enqueue_session(
    client: DBOSClient,
    *,
    queue_name: str,
    agent_name: str,
    session_id: str,
    input: Sequence[Item],
    application_version: str,
    transcript: Sequence[Item] = (),
    workflow_id: str | None = None,
) -> str:
    """Enqueue a run on ``queue_name`` from any process; a worker of that version runs it."""
    options = EnqueueOptions(
        queue_name=queue_name,
        workflow_name=SESSION_WORKFLOW,
        workflow_id=workflow_id or session_id,
        app_version=application_version,
    )
    arguments = (
        agent_name,
        session_id,
        _items_document(input, "enqueue_session input"),
        _items_document(transcript, "enqueue_session transcript"),
    )

    def enqueue() -> str:
        return client.enqueue(options, *arguments).workflow_id

    return await anyio.to_thread.run_sync(enqueue)


async def approve(
    client: DBOSClient, workflow_id: str, call_id: str, decision: ApprovalAnswer
) -> None:
    """Answer the approval of ``call_id`` in ``workflow_id``, from any process, at any time.

    The message waits in DBOS until the workflow receives it; an answer
    after the deadline is never read (the call was denied as expired).
    """
    if not isinstance(decision, ApprovalAnswer):
        raise InvalidInputError(
            f"approve expects an ApprovalAnswer, got {type(decision).__name__}; "
            "use ApprovalAnswer.approve(), approve_with(input) or deny(reason)"
        )
    message = json.dumps(unstructure(decision))
    await anyio.to_thread.run_sync(
        lambda: client.send(workflow_id, message, approval_topic(call_id))
    )


async def pending_approval(
    client: DBOSClient, workflow_id: str, *, within: float = 0.0
) -> PendingApproval | None:
    """The approval ``workflow_id`` waits for now, waiting up to ``within`` seconds for one."""
    deadline = time.monotonic() + within
    while True:
        value = await anyio.to_thread.run_sync(
            lambda: client.get_event(workflow_id, APPROVAL_EVENT, timeout_seconds=0)
        )
        if value is not None:
            return structure(json.loads(value), PendingApproval)
        if time.monotonic() >= deadline:
            return None
        await anyio.sleep(0.1)


async def wait_result(client: DBOSClient, workflow_id: str, *, within: float) -> DurableRunResult:
    """Wait up to ``within`` seconds for the run to end and return how it ended.

    Raises ``DurableError`` when it failed, was cancelled, or is still running.
    """
    deadline = time.monotonic() + within
    while True:
        status = await anyio.to_thread.run_sync(
            lambda: client.retrieve_workflow(workflow_id).get_status()
        )
        if status.status == "SUCCESS" and isinstance(status.output, Mapping):
            return _result(workflow_id, status.output)
        if status.status not in ("PENDING", "ENQUEUED", "DELAYED"):
            raise DurableError(
                f"workflow {workflow_id} ended {status.status}: {status.error!r}; "
                "see the worker's log"
            )
        if time.monotonic() >= deadline:
            raise DurableError(f"workflow {workflow_id} is still {status.status} after {within} s")
        await anyio.sleep(0.1)


def _result(workflow_id: str, document: Mapping[str, Any]) -> DurableRunResult:
    return DurableRunResult(
        workflow_id=workflow_id,
        session_id=document["session_id"],
        finish_reason=FinishReason(document["finish_reason"]),
        transcript=tuple(structure(item, Item) for item in document["transcript"]),
        approvals=tuple(structure(outcome, ApprovalOutcome) for outcome in document["approvals"]),
    )
