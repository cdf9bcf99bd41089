"""Sessions as DBOS workflows in this process: runs, approvals, expiry, bad input.

DBOS runs for real here, on a SQLite file and on the embedded PostgreSQL
(``databases``), with a claims store on the same database; every test
launches DBOS and destroys it afterwards. The database matters to DBOS, not
to agentloop's logic: the runs and the approval round trip use both, the
variations of a run SQLite only (the crash tests use both again).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dbos import DBOS, DBOSClient
from durable_kit import build_agent, final_text, lines, user

import agentloop as al
from agentloop.durable.dbos import (
    ApprovalOutcome,
    ApprovalStatus,
    DurableAgent,
    DurableError,
    PendingApproval,
    approval_topic,
    approve,
    dbos_config,
    pending_approval,
    start_session,
    wait_result,
)
from agentloop.store import PostgresSessionStore, SessionStore, SqliteSessionStore
from agentloop.tasks import AsyncTaskManager

pytestmark = pytest.mark.anyio

WAIT = 60.0  # every wait is bounded; a healthy run takes well under a second


class Launched:
    def __init__(self, workdir: Path, client: DBOSClient, agent: DurableAgent) -> None:
        self.workdir = workdir
        self.client = client
        self.agent = agent

    def charges(self) -> list[str]:
        return lines(self.workdir / "charges.log")

    def requests(self) -> list[str]:
        return lines(self.workdir / "requests.log")


def _claims(target: str) -> SessionStore:
    if target.startswith("postgresql"):
        return PostgresSessionStore(target)
    return SqliteSessionStore(target)


@pytest.fixture
def launched(workdir: Path, databases: tuple[str, str]) -> Iterator[Launched]:
    url, claims_target = databases
    claims = _claims(claims_target)
    agent = DurableAgent(build_agent(workdir), name="charges", claims=claims, approval_timeout=30.0)
    DBOS(config=dbos_config("agentloop-tests", url, executor_id="test", application_version="t1"))
    DBOS.launch()
    client = DBOSClient(system_database_url=url)
    try:
        yield Launched(workdir, client, agent)
    finally:
        client.destroy()
        DBOS.destroy()
        anyio.run(claims.aclose)  # type: ignore[attr-defined]


async def test_a_run_calls_the_model_and_the_tool_once_each(launched: Launched) -> None:
    workflow_id = await start_session("charges", "s-small", user("charge 5"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert (result.workflow_id, result.session_id) == ("s-small", "s-small")
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert final_text(result.transcript) == "done: charged 5"
    assert result.approvals == ()
    al.validate_transcript(result.transcript)
    assert launched.charges() == ["turn-1-charge 5"]
    assert launched.requests() == [
        '{"turn": "turn-1", "items": 1}',
        '{"turn": "turn-1", "items": 3}',
    ]


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_starting_the_same_workflow_again_returns_the_recorded_run(
    launched: Launched,
) -> None:
    first = await start_session("charges", "s-again", user("charge 6"))
    done = await wait_result(launched.client, first, within=WAIT)
    second = await start_session("charges", "s-again", user("charge 6"))
    again = await wait_result(launched.client, second, within=WAIT)

    assert second == first
    assert again == done
    assert launched.charges() == ["turn-1-charge 6"]
    assert len(launched.requests()) == 2


async def test_an_approval_waits_for_a_client_and_runs_the_call(launched: Launched) -> None:
    workflow_id = await start_session("charges", "s-big", user("charge 500"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)

    assert isinstance(pending, PendingApproval)
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
    al.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_approve_with_runs_the_edited_input(launched: Launched) -> None:
    workflow_id = await start_session("charges", "s-edit", user("charge 900"))
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
    workflow_id = await start_session("charges", "s-deny", user("charge 700"))
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
    al.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_unanswered_approval_expires_denied(workdir: Path, launched: Launched) -> None:
    DurableAgent(build_agent(workdir), name="impatient", approval_timeout=0.5)
    workflow_id = await start_session("impatient", "s-expire", user("charge 800"))
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
    workflow_id = await start_session("charges", "s-raise", user("charge -3"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == (
        "done: tool 'charge' failed: RecordedToolFailure: "
        "ValueError: cannot charge a negative amount (-3)"
    )
    assert launched.charges() == []


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_unknown_agent_fails_the_workflow_with_its_name(launched: Launched) -> None:
    workflow_id = await start_session("nobody", "s-nobody", user("charge 1"))
    with pytest.raises(DurableError, match=r"ended ERROR: .*no DurableAgent named 'nobody'"):
        await wait_result(launched.client, workflow_id, within=WAIT)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_wait_that_runs_out_says_so(launched: Launched) -> None:
    workflow_id = await start_session("charges", "s-slow", user("charge 501"))
    with pytest.raises(DurableError, match=r"workflow s-slow is still PENDING after 0.2 s"):
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
    custom = al.Agent.builder().model(agent.model).tool_executor(al.BasicToolExecutor(())).build()
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


@pytest.mark.parametrize("items", [al.Item.text(al.ItemKind.USER, "hi"), ["hi"], [None]])
async def test_start_session_refuses_what_is_not_a_list_of_items(items: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="start_session input"):
        await start_session("charges", "s", items)
