"""A DBOS workflow runs an agent whose tool runs another agent (``Agent.as_tool``).

The child runs inline in the lead's workflow: its model and tool calls are DBOS steps
of that workflow (its non-idempotent tools claimed under the child's session id), and
its approvals wait durably like the lead's own (``pending_approval`` / ``approve`` with
the child's call id). Real DBOS on SQLite and the embedded PostgreSQL; the crash case
(a worker SIGKILLed inside the child's tool) is in test_dbos_crash.py.
"""

from __future__ import annotations

import pytest
from durable_kit import Launched, build_nested_agent, final_text, user

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.transcript
from agentloop.durable.dbos import (
    ApprovalOutcome,
    ApprovalStatus,
    DurableAgent,
    approve,
    pending_approval,
    send_input,
    wait_result,
)

pytestmark = pytest.mark.anyio

WAIT = 60.0


def nested(launched: Launched) -> DurableAgent:
    return DurableAgent(
        build_nested_agent(launched.workdir),
        name="nested",
        claims=launched.agent.claims,
        approval_timeout=30.0,
    )


async def test_a_child_agent_runs_inside_the_workflow(launched: Launched) -> None:
    nested(launched)
    workflow_id = await send_input("nested", "s-child", user("charge 5"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)
    assert final_text(result.transcript) == "lead: done: charged 5"
    assert launched.charges() == ["turn-1-charge 5"]
    assert [request["items"] for request in launched.requests()] == [1, 3]  # the child's
    al.transcript.validate_transcript(result.transcript)


async def test_a_child_agents_approval_waits_durably_and_is_answered(launched: Launched) -> None:
    nested(launched)
    workflow_id = await send_input("nested", "s-child-approval", user("charge 500"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    assert (pending.call_id, pending.tool_name, pending.input) == (
        "turn-1-charge",
        "charge",
        {"amount": 500},
    )
    assert launched.charges() == []
    decision = al.ApprovalAnswer.approve_with({"amount": 50})
    await approve(launched.client, workflow_id, pending.call_id, decision)
    result = await wait_result(launched.client, workflow_id, within=WAIT)
    assert final_text(result.transcript) == "lead: done: charged 50"
    assert launched.charges() == ["turn-1-charge 50"]
    assert result.approvals == (
        ApprovalOutcome(
            call_id="turn-1-charge",
            tool_name="charge",
            status=ApprovalStatus.APPROVED_WITH,
            deadline=pending.deadline,
        ),
    )
    al.transcript.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_denied_child_call_never_runs(launched: Launched) -> None:
    nested(launched)
    workflow_id = await send_input("nested", "s-child-denied", user("charge 700"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    await approve(launched.client, workflow_id, pending.call_id, al.ApprovalAnswer.deny("no"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)
    assert final_text(result.transcript).startswith("lead: done: ")
    assert "no" in final_text(result.transcript)
    assert launched.charges() == []
    [outcome] = result.approvals
    assert (outcome.status, outcome.reason) == (ApprovalStatus.DENIED, "no")


def test_durable_agent_refuses_a_child_agent_it_cannot_wrap(workdir: object) -> None:
    child = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([]))
        .task_manager(al.tasks.AsyncTaskManager())
        .build()
    )
    lead = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([]))
        .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
        .build()
    )
    with pytest.raises(al.InvalidInputError) as raised:
        DurableAgent(lead, name="nested-refused")
    assert str(raised.value) == (
        "DurableAgent cannot wrap an agent with a custom task_manager (AsyncTaskManager) in "
        "the child agent its tool 'helper' runs: concurrent tool calls would make the order "
        "of DBOS steps depend on timing; leave the default SimpleTaskManager"
    )
