"""The host side of durable sessions: send input, answer approvals, read results.

``send_input`` runs in a launched DBOS process; everything else works from
any process through a ``DBOSClient``. DBOS's own calls are synchronous and
run in a worker thread, so these functions work under asyncio and trio.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
from dbos import DBOS, DBOSClient, EnqueueOptions, SetWorkflowID
from dbos._error import DBOSWorkflowIDInUseError

from ..._log import get_logger
from ...core._errors import InvalidInputError, ProviderError
from ...core._items import FinishReason, Item
from ...loop._converter import structure, unstructure
from ...loop._steps import ApprovalAnswer
from ._agent import run_number, run_workflow_id, runs_prefix
from ._results import ApprovalOutcome, DurableApproval, DurableError, DurableRunResult
from ._workflow import APPROVAL_EVENT, SESSION_WORKFLOW, approval_topic, session_run

__all__ = [
    "approve",
    "enqueue_input",
    "latest_run",
    "pending_approval",
    "send_input",
    "wait_result",
]

_log = get_logger()

_MAX_ATTEMPTS = 100
"""How many run numbers a send tries when other senders keep taking the next one."""


def _items_document(items: Sequence[Item], label: str) -> list[Any]:
    if isinstance(items, Item):
        raise InvalidInputError(f"{label} expects a list of Items, got one Item")
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidInputError(f"{label} expects a list of Items, got {type(items).__name__}")
    checked = list(items)
    if not checked:
        raise InvalidInputError(f"{label} is empty: a run answers at least one item")
    for position, item in enumerate(checked):
        if not isinstance(item, Item):
            raise InvalidInputError(f"{label}: element {position} is {type(item).__name__}")
    return [unstructure(item) for item in checked]


def _check_name(label: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{label} must be a non-empty str, got {value!r}")


def _newest(session_id: str, workflow_ids: Iterable[str]) -> int:
    numbers = (run_number(session_id, workflow_id) for workflow_id in workflow_ids)
    return max((number for number in numbers if number is not None), default=0)


def _start_next_run(
    session_id: str,
    list_ids: Callable[[], list[str]],
    start: Callable[[int, str], str],
) -> str:
    run = _newest(session_id, list_ids()) + 1
    for _ in range(_MAX_ATTEMPTS):
        try:
            return start(run, run_workflow_id(session_id, run))
        except DBOSWorkflowIDInUseError:  # another sender took this number: take the next
            _log.info("run number taken", session_id=session_id, run=run)
            run += 1
    raise DurableError(
        f"cannot start a run of session {session_id!r}: {_MAX_ATTEMPTS} run numbers up to "
        f"{run - 1} were taken by other senders meanwhile"
    )


async def send_input(agent_name: str, session_id: str, input: Sequence[Item]) -> str:
    """Run ``input`` as the next run of ``session_id`` in this launched DBOS process.

    The first input starts the session; each later one continues it (the
    run waits for the previous run, then resumes from its checkpoint).
    Returns the run's workflow id, ``<session_id>#<run>``; concurrent
    senders get consecutive run numbers.
    """
    _check_name("send_input agent_name", agent_name)
    _check_name("send_input session_id", session_id)
    items = _items_document(input, "send_input input")

    def list_ids() -> list[str]:
        return _run_ids(DBOS.list_workflows, session_id)

    def start(run: int, workflow_id: str) -> str:
        with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"):
            handle = DBOS.start_workflow(session_run, agent_name, session_id, run, items)
        return handle.workflow_id

    return await anyio.to_thread.run_sync(lambda: _start_next_run(session_id, list_ids, start))


async def enqueue_input(
    client: DBOSClient,
    *,
    queue_name: str,
    agent_name: str,
    session_id: str,
    input: Sequence[Item],
    application_version: str,
) -> str:
    """Enqueue ``input`` as the next run of ``session_id`` on ``queue_name``, from any process.

    A worker of ``application_version`` that serves the queue runs it; as
    with :func:`send_input`, the run continues the session's previous one
    and its workflow id is ``<session_id>#<run>``.
    """
    for label, value in (
        ("queue_name", queue_name),
        ("agent_name", agent_name),
        ("session_id", session_id),
        ("application_version", application_version),
    ):
        _check_name(f"enqueue_input {label}", value)
    items = _items_document(input, "enqueue_input input")

    def list_ids() -> list[str]:
        return _run_ids(client.list_workflows, session_id)

    def start(run: int, workflow_id: str) -> str:
        options = EnqueueOptions(
            queue_name=queue_name,
            workflow_name=SESSION_WORKFLOW,
            workflow_id=workflow_id,
            workflow_id_reuse_policy="reject",
            app_version=application_version,
        )
        return client.enqueue(options, agent_name, session_id, run, items).workflow_id

    return await anyio.to_thread.run_sync(lambda: _start_next_run(session_id, list_ids, start))


async def latest_run(client: DBOSClient, session_id: str) -> str | None:
    """The workflow id of the newest run of ``session_id`` (``None`` for an unknown session)."""
    _check_name("latest_run session_id", session_id)
    found = await anyio.to_thread.run_sync(
        lambda: client.list_workflows(
            workflow_id_prefix=runs_prefix(session_id),
            load_input=False,
            load_output=False,
        )
    )
    newest = _newest(session_id, (status.workflow_id for status in found))
    return run_workflow_id(session_id, newest) if newest else None


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
) -> DurableApproval | None:
    """The approval ``workflow_id`` waits for now, waiting up to ``within`` seconds for one."""
    deadline = time.monotonic() + within
    while True:
        value = await anyio.to_thread.run_sync(
            lambda: client.get_event(workflow_id, APPROVAL_EVENT, timeout_seconds=0)
        )
        if value is not None:
            return structure(json.loads(value), DurableApproval)
        if time.monotonic() >= deadline:
            return None
        await anyio.sleep(0.1)


async def wait_result(client: DBOSClient, workflow_id: str, *, within: float) -> DurableRunResult:
    """Wait up to ``within`` seconds for the run to end and return how it ended.

    A model failure is a result (``finish_reason`` ``ERROR``). Raises
    ``DurableError`` when the run failed (a bug, an unknown agent, a failed
    previous run), was cancelled, or is still running.
    """
    deadline = time.monotonic() + within
    while True:
        status = await anyio.to_thread.run_sync(
            lambda: client.retrieve_workflow(workflow_id).get_status()
        )
        if status.status == "SUCCESS" and isinstance(status.output, Mapping):
            return _result(workflow_id, status.output, status.executor_id)
        if status.status not in ("PENDING", "ENQUEUED", "DELAYED"):
            raise DurableError(
                f"workflow {workflow_id} ended {status.status}: {status.error!r}; "
                "see the worker's log"
            )
        if time.monotonic() >= deadline:
            raise DurableError(f"workflow {workflow_id} is still {status.status} after {within} s")
        await anyio.sleep(0.1)


def _result(
    workflow_id: str, document: Mapping[str, Any], executor_id: str | None
) -> DurableRunResult:
    error = document["error"]
    return DurableRunResult(
        workflow_id=workflow_id,
        session_id=document["session_id"],
        run=document["run"],
        finish_reason=FinishReason(document["finish_reason"]),
        transcript=tuple(structure(item, Item) for item in document["checkpoint"]["transcript"]),
        approvals=tuple(structure(outcome, ApprovalOutcome) for outcome in document["approvals"]),
        retries=document["retries"],
        executor_id=executor_id,
        error=None if error is None else structure(error, ProviderError),
    )


def _run_ids(list_workflows: Callable[..., list[Any]], session_id: str) -> list[str]:
    """The workflow ids of ``session_id``'s runs (``DBOS`` or a client lists them)."""
    found = list_workflows(
        workflow_id_prefix=runs_prefix(session_id), load_input=False, load_output=False
    )
    return [status.workflow_id for status in found]
