"""Nested agents and the durable paths.

The store path: the call running a child is claimed like any call; a checkpoint taken
while the child (or grandchild) waits for approval holds the child's checkpoint inside the
parent's, in the question the call asked (``Question.resume``). Restored, the parent asks
again, and the answer resumes the child from its checkpoint under the question's own claim
key. (DBOS runs nested agents too: tests/durable/test_dbos_nested.py.)
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from agents_support import (
    EchoTool,
    assert_answered_once,
    child_agent,
    echo_then,
    results,
    then,
    user,
)

import agentloop as al
import agentloop.permissions
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


async def test_a_restored_parent_resumes_the_child_waiting_for_approval() -> None:
    store, echo = MemorySessionStore(), EchoTool()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await parent(store, manager, echo).start("top")
        before = await driver.next()
        assert isinstance(before, al.agents.ChildApprovalRequest)
        stored = await store.load("top")
        assert stored is not None
        assert stored.checkpoint["state"] == "AWAITING_ANSWER"
        assert "p-1" in stored.started_calls
    async with al.tasks.AsyncTaskManager() as manager:  # a new process: the child's task is gone
        resumed = await parent(store, manager, echo).resume(session_id="top")
        step = await resumed.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        assert (step.path, step.call_id, step.question_id, step.input) == (
            before.path,
            before.call_id,
            before.question_id,
            before.input,
        )
        step.approve_with({"value": "after restart"})
        finished = await resumed.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert finished.result.finish_reason is al.FinishReason.COMPLETED
    assert echo.inputs == [{"value": "after restart"}]
    assert results(resumed.snapshot().transcript) == [("p-1", "child done", False)]
    assert_answered_once(resumed.snapshot().transcript)


async def test_a_restored_tree_resumes_a_waiting_grandchild() -> None:
    store, echo, runs = MemorySessionStore(), EchoTool(), []

    def build(manager: al.tasks.AsyncTaskManager) -> al.Agent:
        grandchild = child_agent(echo_then("grand done", "g-1"), echo, manager=manager)
        inner = grandchild.as_tool("inner", "Inner.", on_run=runs.append)
        child = child_agent(
            then(tool_calls(call("inner", {"input": "deeper"}, id="c-1")), "child done"),
            inner, manager=manager,
        )  # fmt: skip
        return (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(parent_model))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .store(store)
            .input([user("go")])
            .build()
        )

    async with al.tasks.AsyncTaskManager() as manager:
        step = await (await build(manager).start("top")).next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        assert step.path == ("helper:p-1", "inner:c-1")
    async with al.tasks.AsyncTaskManager() as manager:
        resumed = await build(manager).resume(session_id="top")
        step = await resumed.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        assert (step.path, step.call_id) == (("helper:p-1", "inner:c-1"), "g-1")
        step.approve()
        finished = await resumed.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert echo.inputs == [{"value": "x"}]
    assert results(resumed.snapshot().transcript) == [("p-1", "child done", False)]
    grand = [run for run in runs if run.session_id == "top/p-1/c-1" and run.result]
    assert results(grand[-1].transcript) == [("g-1", "x", False)]
    for run in runs:
        assert_answered_once(run.transcript)


class Hold:
    """Needs approval like ``echo``; once running, counts its run and holds forever."""

    spec = al.ToolSpec("echo", "Echo, slowly.", {"type": "object"})

    def __init__(self) -> None:
        self.runs = 0
        self.entered = anyio.Event()

    def proposed_requests(self, request: al.ToolRequest) -> list[Any]:
        return [al.permissions.FileSystemRead("/tmp/echo")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs += 1
        self.entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_crash_while_the_child_runs_answers_the_call_in_doubt() -> None:
    store, hold = MemorySessionStore(), Hold()

    def build(manager: al.tasks.AsyncTaskManager) -> al.Agent:
        child = child_agent(echo_then("child done"), hold, manager=manager)
        return (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(parent_model))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .store(store)
            .input([user("go")])
            .build()
        )

    async with al.tasks.AsyncTaskManager() as manager, anyio.create_task_group() as group:
        driver = await build(manager).start("top")
        step = await driver.next()
        step.approve()
        group.start_soon(driver.next)
        await hold.entered.wait()  # the child's call runs: the parent saved before waiting
        # Another process takes the session over from the store (this one "died" here).
        async with al.tasks.AsyncTaskManager() as other:
            resumed = await build(other).resume(session_id="top")
            finished = await resumed.run_until_blocked()
        group.cancel_scope.cancel()
    assert isinstance(finished, al.Finished)
    [(call_id, output, is_error)] = results(resumed.snapshot().transcript)
    assert (call_id, is_error) == ("p-1", True)
    assert output.startswith("in doubt")
    assert hold.runs == 1  # never run again
    assert_answered_once(resumed.snapshot().transcript)
