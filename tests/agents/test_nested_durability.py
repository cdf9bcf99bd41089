"""What the durable paths do with nested agents today.

The store path: the call running a child is claimed like any call, and a checkpoint taken
while the child waits for approval holds the parent waiting on that call's question (the
child's own state is not in it). Restored, the call is answered in doubt, never run again:
no side effect of the child happens twice, and it does not resume either. DBOS refuses an
agent whose tools run other agents.
"""

from __future__ import annotations

import pytest
from agents_support import EchoTool, assert_answered_once, child_agent, echo_then, results, user

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.store import MemorySessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def parent_model(request: al.model.TurnRequest) -> al.testing.Reply | str:
    """Calls the helper once, then answers."""
    if any(item.kind is al.ItemKind.TOOL for item in request.transcript):
        return "parent done"
    return tool_calls(call("helper", {"input": "go"}, id="p-1"))


def parent(
    store: MemorySessionStore, manager: al.tasks.AsyncTaskManager, echo: EchoTool
) -> al.Agent:
    child = child_agent(echo_then("child done"), echo, manager=manager)
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(parent_model))
        .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
        .task_manager(manager)
        .store(store)
        .input([user("go")])
        .build()
    )  # fmt: skip


async def test_a_restore_answers_the_call_running_a_waiting_child_in_doubt() -> None:
    store, echo = MemorySessionStore(), EchoTool()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await parent(store, manager, echo).start("top")
        step = await driver.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        stored = await store.load("top")
        assert stored is not None
        assert stored.checkpoint["state"] == "AWAITING_ANSWER"
        assert "p-1" in stored.started_calls
    async with al.tasks.AsyncTaskManager() as manager:  # a new process: the child is gone
        resumed = await parent(store, manager, echo).resume(session_id="top")
        finished = await resumed.run_until_blocked()
    assert isinstance(finished, al.Finished)
    [(call_id, output, is_error)] = results(resumed.snapshot().transcript)
    assert (call_id, is_error) == ("p-1", True)
    assert output.startswith("in doubt")
    assert finished.result.finish_reason is al.FinishReason.COMPLETED
    assert echo.inputs == []
    assert_answered_once(resumed.snapshot().transcript)


def test_dbos_refuses_an_agent_whose_tool_runs_another_agent() -> None:
    durable = pytest.importorskip("agentloop.durable.dbos")
    child = child_agent(["x"])
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([]))
        .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
        .build()
    )
    with pytest.raises(al.InvalidInputError) as raised:
        durable.DurableAgent(agent, name="nested-refused")
    assert str(raised.value) == (
        "DurableAgent cannot wrap an agent whose tool 'helper' runs another agent "
        "(Agent.as_tool): the child's model and tool calls would run inside one DBOS step, "
        "so a crash would run them all again; register the child as a DurableAgent of its "
        "own (a workflow per session) instead"
    )
