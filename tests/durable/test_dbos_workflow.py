"""Sessions as DBOS workflows in this process: a run, approvals, expiry, bad input.

DBOS runs for real here, on a SQLite file and on the embedded PostgreSQL
(``databases``), with a claims store on the same database; every test
launches DBOS and destroys it afterwards. The database matters to DBOS, not
to agentloop's logic: the runs and the approval round trip use both, the
variations of a run SQLite only (the crash tests use both again).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from durable_kit import Launched, build_agent, final_text, user

import agentloop as al
import agentloop.tools
import agentloop.transcript
from agentloop.durable.dbos import (
    ApprovalOutcome,
    ApprovalStatus,
    DurableAgent,
    DurableApproval,
    DurableError,
    approval_topic,
    approve,
    dbos_config,
    enqueue_input,
    latest_run,
    pending_approval,
    send_input,
    wait_result,
)
from agentloop.tasks import AsyncTaskManager

pytestmark = pytest.mark.anyio

WAIT = 60.0  # every wait is bounded; a healthy run takes well under a second


async def test_a_run_calls_the_model_and_the_tool_once_each(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-small", user("charge 5"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert (result.workflow_id, result.session_id, result.run) == ("s-small#1", "s-small", 1)
    assert (result.finish_reason, result.error, result.retries) == (
        al.FinishReason.COMPLETED,
        None,
        0,
    )
    assert result.executor_id == "test"
    assert final_text(result.transcript) == "done: charged 5"
    assert result.approvals == ()
    al.transcript.validate_transcript(result.transcript)
    assert launched.charges() == ["turn-1-charge 5"]
    assert launched.requests() == [
        {"turn": "turn-1", "items": 1, "users": ["charge 5"]},
        {"turn": "turn-1", "items": 3, "users": ["charge 5"]},
    ]


async def test_an_approval_waits_for_a_client_and_runs_the_call(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-big", user("charge 500"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)

    assert isinstance(pending, DurableApproval)
    assert (pending.call_id, pending.tool_name, pending.input, pending.summary) == (
        "turn-1-charge",
        "charge",
        {"amount": 500},
        "charge 500",
    )
    assert launched.charges() == []
    await approve(launched.client, workflow_id, pending.call_id, al.ApprovalAnswer.approve())
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == "done: charged 500"
    assert result.approvals == (
        ApprovalOutcome(
            call_id="turn-1-charge",
            tool_name="charge",
            status=ApprovalStatus.APPROVED,
            deadline=pending.deadline,
        ),
    )
    assert launched.charges() == ["turn-1-charge 500"]
    assert await pending_approval(launched.client, workflow_id) is None
    al.transcript.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_approve_with_runs_the_edited_input(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-edit", user("charge 900"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    decision = al.ApprovalAnswer.approve_with({"amount": 90})
    await approve(launched.client, workflow_id, pending.call_id, decision)
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == "done: charged 90"
    assert [outcome.status for outcome in result.approvals] == [ApprovalStatus.APPROVED_WITH]
    assert launched.charges() == ["turn-1-charge 90"]


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("message", "reason", "status"),
    [
        (None, "too expensive", ApprovalStatus.DENIED),
        (
            "not json",
            "approval denied: unreadable decision (JSONDecodeError)",
            ApprovalStatus.DENIED,
        ),
        ('{"kind": "maybe"}', "approval denied: unreadable decision", ApprovalStatus.DENIED),
        ("[1, 2]", "approval denied: unreadable decision", ApprovalStatus.DENIED),
    ],
)
async def test_a_denial_or_an_unreadable_answer_never_runs_the_call(
    launched: Launched, message: str | None, reason: str, status: ApprovalStatus
) -> None:
    workflow_id = await send_input("charges", "s-deny", user("charge 700"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    if message is None:
        denial = al.ApprovalAnswer.deny("too expensive")
        await approve(launched.client, workflow_id, pending.call_id, denial)
    else:
        await anyio.to_thread.run_sync(
            lambda: launched.client.send(workflow_id, message, approval_topic(pending.call_id))
        )
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    [outcome] = result.approvals
    assert outcome.status is status
    assert outcome.reason is not None
    assert outcome.reason.startswith(reason)
    assert final_text(result.transcript) == f"done: {outcome.reason}"
    assert launched.charges() == []
    al.transcript.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_unanswered_approval_expires_denied(workdir: Path, launched: Launched) -> None:
    DurableAgent(build_agent(workdir), name="impatient", approval_timeout=0.5)
    workflow_id = await send_input("impatient", "s-expire", user("charge 800"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    [outcome] = result.approvals
    assert outcome.status is ApprovalStatus.EXPIRED
    assert outcome.reason is not None
    assert outcome.reason.startswith("approval expired: no decision before 20")
    assert final_text(result.transcript) == f"done: {outcome.reason}"
    [tool_result] = [part for part in result.transcript[-2].parts]
    assert isinstance(tool_result, al.ToolResultPart)
    assert tool_result.is_error
    assert launched.charges() == []
    # A late answer changes nothing: the run is over.
    await approve(launched.client, workflow_id, "turn-1-charge", al.ApprovalAnswer.approve())
    assert await wait_result(launched.client, workflow_id, within=WAIT) == result
    assert launched.charges() == []


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_raising_tool_is_an_error_result_recorded_like_any(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-raise", user("charge -3"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == (
        "done: tool 'charge' failed: RecordedToolFailure: "
        "ValueError: cannot charge a negative amount (-3)"
    )
    assert launched.charges() == []


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_unknown_agent_fails_the_workflow_with_its_name(launched: Launched) -> None:
    workflow_id = await send_input("nobody", "s-nobody", user("charge 1"))
    with pytest.raises(DurableError, match=r"ended ERROR: .*no DurableAgent named 'nobody'"):
        await wait_result(launched.client, workflow_id, within=WAIT)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_wait_that_runs_out_says_so(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-slow", user("charge 501"))
    with pytest.raises(DurableError, match=r"workflow s-slow#1 is still PENDING after 0.2 s"):
        await wait_result(launched.client, workflow_id, within=0.2)
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    await approve(launched.client, workflow_id, pending.call_id, al.ApprovalAnswer.deny())
    await wait_result(launched.client, workflow_id, within=WAIT)


# -- bad input (no DBOS needed) -------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1.0, "10", None, math.nan])
def test_durable_agent_refuses_a_bad_approval_timeout(workdir: Path, timeout: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="approval_timeout must be positive seconds"):
        DurableAgent(build_agent(workdir), name="bad", approval_timeout=timeout)


@pytest.mark.parametrize("name", ["", None, 3])
def test_durable_agent_refuses_a_bad_name(workdir: Path, name: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="name must be a non-empty str"):
        DurableAgent(build_agent(workdir), name=name)


def test_durable_agent_refuses_what_it_cannot_wrap(workdir: Path) -> None:
    with pytest.raises(al.InvalidInputError, match="expects an Agent, got str"):
        DurableAgent("agent", name="bad")  # type: ignore[arg-type]
    agent = build_agent(workdir)
    custom = (
        al.Agent.builder().model(agent.model).tool_executor(al.tools.BasicToolExecutor(())).build()
    )
    with pytest.raises(al.InvalidInputError, match="custom tool_executor"):
        DurableAgent(custom, name="bad")
    concurrent = al.Agent.builder().model(agent.model).task_manager(AsyncTaskManager()).build()
    with pytest.raises(al.InvalidInputError, match=r"custom task_manager \(AsyncTaskManager\)"):
        DurableAgent(concurrent, name="bad")


@pytest.mark.parametrize(
    ("executor_id", "version", "label"),
    [("", "v1", "executor_id"), (None, "v1", "executor_id"), ("w", "", "application_version")],
)
def test_dbos_config_requires_an_executor_id_and_a_version(
    executor_id: Any, version: Any, label: str
) -> None:
    with pytest.raises(al.InvalidInputError, match=f"{label} must be a non-empty str"):
        dbos_config("app", "sqlite:///x", executor_id=executor_id, application_version=version)


async def test_approve_refuses_what_is_not_a_decision() -> None:
    client: Any = None
    for wrong in ("yes", True, {"kind": "approve"}):
        with pytest.raises(al.InvalidInputError, match="expects an ApprovalAnswer"):
            await approve(client, "s", "call-1", wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (al.Item.text(al.ItemKind.USER, "hi"), "expects a list of Items, got one Item"),
        ("hi", "expects a list of Items, got str"),
        (None, "expects a list of Items, got NoneType"),
        (["hi"], "element 0 is str"),
        ([None], "element 0 is NoneType"),
        ([], "is empty: a run answers at least one item"),
    ],
)
async def test_sending_refuses_what_is_not_a_list_of_items(items: Any, message: str) -> None:
    with pytest.raises(
        al.InvalidInputError, match=f"send_input input {message}|send_input input: {message}"
    ):
        await send_input("charges", "s", items)
    client: Any = None
    with pytest.raises(al.InvalidInputError, match=f"enqueue_input input:? {message}"):
        await enqueue_input(
            client,
            queue_name="q",
            agent_name="charges",
            session_id="s",
            input=items,
            application_version="v",
        )


@pytest.mark.parametrize("name", ["", "  ", None, 3])
async def test_sending_refuses_a_bad_session_or_agent_name(name: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="send_input session_id must be a non-empty str"):
        await send_input("charges", name, user("charge 1"))
    with pytest.raises(al.InvalidInputError, match="send_input agent_name must be a non-empty str"):
        await send_input(name, "s", user("charge 1"))
    client: Any = None
    for label in ("queue_name", "agent_name", "session_id", "application_version"):
        arguments = {
            "queue_name": "q",
            "agent_name": "charges",
            "session_id": "s",
            "application_version": "v",
            label: name,
        }
        with pytest.raises(al.InvalidInputError, match=f"enqueue_input {label} must be"):
            await enqueue_input(client, input=user("charge 1"), **arguments)
    with pytest.raises(al.InvalidInputError, match="latest_run session_id must be"):
        await latest_run(client, name)


@pytest.mark.parametrize("retry", ["twice", 2, al.TurnRetryPolicy])
def test_durable_agent_refuses_a_retry_that_is_no_policy(workdir: Path, retry: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="retry expects a TurnRetryPolicy or None"):
        DurableAgent(build_agent(workdir), name="bad", retry=retry)
