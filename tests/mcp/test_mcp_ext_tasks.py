"""The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``): a server that
answers ``tools/call`` with a task is followed with ``tasks/get`` to its end, its input
requests become ``CallQuestion`` s answered with ``tasks/update``, ``tasks/cancel`` ends
it. Against ``ext_task_server.py`` in its own process, over stdio and streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from mcp_support import (
    EXT_TASK_SERVER,
    LOADED,
    agent_on,
    ext_task_server,
    http_server,
    outputs,
)

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.mcp import TASK_KEY, McpCallError, McpServer, McpToolSource
from agentloop.store import MemorySessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


@contextmanager
def served(transport: str, marks: Path) -> Iterator[McpServer]:
    if transport == "stdio":
        yield ext_task_server(marks)
    else:
        with http_server(marks, "ext", EXT_TASK_SERVER) as server:
            yield server


def state(task_id: str, status: str = "completed", message: str | None = None) -> dict[str, Any]:
    return {TASK_KEY: {"taskId": task_id, "status": status, "statusMessage": message}}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_task_answer_is_followed_to_its_result(tmp_path: Path, transport: str) -> None:
    with served(transport, tmp_path) as server:
        async with McpToolSource(server, connect_timeout=LOADED) as source:
            assert [spec.name for spec in source.specs() if TASK_KEY in spec.metadata] == []
            work = await source.call_tool("work", {"n": 1})
            broke = await source.call_tool("tool_error", {})
            plain = await source.call_tool("plain", {"n": 2})
            needed = await source.call_tool("requires_task", {})
            assert source.connections == 1
    assert (work.value, work.is_error, work.metadata) == (
        'work done: {"n": 1}',
        False,
        state("task-1"),
    )
    assert (broke.value, broke.is_error, broke.metadata) == ("it broke", True, state("task-2"))
    assert (plain.value, plain.metadata) == ('ran plainly: plain {"n": 2}', {})
    assert (needed.value, needed.metadata) == ("requires_task done: {}", state("task-3"))
    if transport == "http":  # the extension's routing header: Mcp-Name is the task id
        names = (tmp_path / "names").read_text().splitlines()
        assert set(names) == {"tasks/get task-1", "tasks/get task-2", "tasks/get task-3"}


FAILURES = {
    "fails": "MCP server 'ext': task 'task-1' of tools/call 'fails' failed with JSON-RPC "
    "error -32603: API rate limit exceeded: the job broke",
    "server_cancels": "MCP server 'ext' cancelled task 'task-1' of tools/call "
    "'server_cancels': the operator stopped it",
    "vanish": "MCP server 'ext' failed tasks/get 'task-1': MCPError: Failed to retrieve "
    "task: no task task-1",
    "asks": "MCP server 'ext': task 'task-1' of tools/call 'asks' needs input "
    "(elicitation/create) that this call cannot ask for: give the source elicitation=True "
    "and run the call in a driver (an entered AsyncTaskManager answers questions); the task "
    "was cancelled (tasks/cancel)",
}


@pytest.mark.parametrize("tool", sorted(FAILURES))
async def test_a_task_that_does_not_complete_fails_its_call_clearly(
    tmp_path: Path, tool: str
) -> None:
    async with McpToolSource(ext_task_server(tmp_path), connect_timeout=LOADED) as source:
        with pytest.raises(McpCallError) as caught:
            await source.call_tool(tool, {})
        assert str(caught.value) == FAILURES[tool]
        assert caught.value.server == "ext"
        after = await source.call_tool("work", {})
        assert (after.value, after.metadata) == ("work done: {}", state("task-2"))
        assert source.connections == 1
    # Only a task that had not ended (or was lost) is cancelled.
    assert (tmp_path / "cancelled-task-1").exists() is (tool in ("asks", "vanish"))


async def test_a_task_that_never_ends_is_cancelled_after_task_timeout(tmp_path: Path) -> None:
    async with McpToolSource(
        ext_task_server(tmp_path), task_timeout=0.5, connect_timeout=LOADED
    ) as source:
        with pytest.raises(McpCallError) as caught:
            await source.call_tool("never", {})
        assert str(caught.value) == (
            "MCP server 'ext': task 'task-1' of tools/call 'never' did not end within "
            "task_timeout (0.5 s; last status 'working'); it was cancelled (tasks/cancel): "
            "raise the source's task_timeout for longer tasks"
        )
        assert (tmp_path / "cancelled-task-1").exists()
        assert (await source.call_tool("plain", {})).value == "ran plainly: plain {}"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelling_our_call_sends_tasks_cancel(tmp_path: Path, transport: str) -> None:
    with served(transport, tmp_path) as server, structlog.testing.capture_logs() as logs:
        async with McpToolSource(server, connect_timeout=LOADED) as source:
            async with anyio.create_task_group() as group:
                group.start_soon(source.call_tool, "never", {})
                with anyio.fail_after(LOADED):
                    while not any(e["event"] == "mcp task created" for e in logs):  # noqa: ASYNC110 (logged by the source)
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()
            assert (tmp_path / "cancelled-task-1").exists()
            assert (await source.call_tool("work", {})).value == "work done: {}"
    if transport == "http":
        assert "tasks/cancel task-1" in (tmp_path / "names").read_text().splitlines()


def updates(marks: Path) -> list[Any]:
    return [json.loads(path.read_text()) for path in sorted(marks.glob("update-*"))]


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
async def test_input_required_is_a_question_answered_with_tasks_update(
    tmp_path: Path, transport: str, action: str
) -> None:
    with served(transport, tmp_path) as server:
        script = [tool_calls(call("mcp__ext__asks", {"n": 1}, id="a")), "thanks"]
        async with agent_on(server, script, elicitation=True) as driver:
            step = await driver.next()
            assert isinstance(step, al.CallQuestion)
            assert (step.call_id, step.question.kind, step.question.message) == (
                "a",
                "mcp.elicitation",
                "name",
            )
            assert step.question.schema == {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            }
            assert step.question.resume is not None
            assert {k: step.question.resume[k] for k in ("tool", "task", "key")} == {
                "tool": "asks",
                "task": "task-1",
                "key": "name",
            }
            with pytest.raises(al.InvalidInputError):
                step.answer({"name": 3})  # refused against the server's schema: nothing sent
            if action == "accept":
                step.answer({"name": "Ada"})
            else:
                getattr(step, action)()
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    said = "Ada" if action == "accept" else action
    assert outputs(driver) == [f"Hello, {said}"]
    content = {"content": {"name": "Ada"}} if action == "accept" else {}
    assert updates(tmp_path) == [{"name": {"action": action, **content}}]


async def test_several_input_rounds_and_a_sampling_request(tmp_path: Path) -> None:
    server = ext_task_server(tmp_path)
    script = [
        tool_calls(call("mcp__ext__asks_twice", {}, id="a"), call("mcp__ext__samples", {}, id="b")),
        "ok",
    ]
    async with agent_on(server, script, elicitation=True, sampling=True) as driver:
        answered: list[str] = []
        step = await driver.run_until_blocked()
        while isinstance(step, al.CallQuestion):
            if step.question.kind == "mcp.sampling":
                assert step.question.data["messages"] == [
                    {"role": "user", "content": {"type": "text", "text": "Say hi"}}
                ]
                step.answer({"text": "hi there", "model": "host"})
            else:
                step.answer({"name": step.question.message.upper()})
            answered.append(f"{step.call_id}:{step.question.message}")
            step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
    assert sorted(answered) == [
        "a:first",
        "a:second",
        "b:MCP server 'ext' asks for a model answer to: Say hi",
    ]
    assert outputs(driver) == ["Hello, FIRST and SECOND", "the model said: hi there"]


async def test_a_declined_sampling_request_fails_the_call_and_cancels_the_task(
    tmp_path: Path,
) -> None:
    script = [tool_calls(call("mcp__ext__samples", {}, id="b")), "ok"]
    async with agent_on(ext_task_server(tmp_path), script, sampling=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.kind == "mcp.sampling"
        step.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        "tool 'mcp__ext__samples' failed: McpCallError: MCP server 'ext': the user rejected "
        "the sampling request (decline)"
    ]
    assert (tmp_path / "cancelled-task-1").exists()
    assert updates(tmp_path) == []


async def test_a_pushed_task_status_wakes_the_poll_at_once(tmp_path: Path) -> None:
    """A ``notifications/tasks`` the server sends (agentloop does not subscribe, but a
    pushed one is used): ``pushed`` is polled once an hour (capped at 5 s), so only the
    wake-up ends it within task_timeout (4 s); the poll then reads its result."""
    outcome: list[Any] = []
    with structlog.testing.capture_logs() as logs:
        async with McpToolSource(
            ext_task_server(tmp_path), task_timeout=4.0, connect_timeout=LOADED
        ) as source:

            async def followed() -> None:
                outcome.append(await source.call_tool("pushed", {}))

            async with anyio.create_task_group() as group:
                group.start_soon(followed)
                with anyio.fail_after(LOADED):
                    while not any(e["event"] == "mcp task created" for e in logs):  # noqa: ASYNC110 (logged by the source)
                        await anyio.sleep(0.01)
                assert (await source.call_tool("push", {"task": "task-1"})).value == "pushed"
    [output] = outcome
    assert (output.value, output.metadata) == ("pushed done: {}", state("task-1"))
    assert [(e["status"], e["via"]) for e in logs if e["event"] == "mcp task status"] == [
        ("completed", "notification")
    ]


async def test_a_multi_round_trip_answer_then_a_task(tmp_path: Path) -> None:
    """The server asks with an input-required result first (multi round-trip: the call
    is sent again with the answer) and then answers with a task, followed to its end."""
    script = [tool_calls(call("mcp__ext__confirm_first", {"n": 2}, id="a")), "ok"]
    async with agent_on(ext_task_server(tmp_path), script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.message == "go ahead?"
        assert step.question.resume is not None
        assert (step.question.resume["state"], "task" in step.question.resume) == ("s1", False)
        step.answer({"name": "yes"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == ['confirmed: {"n": 2}']
    [result] = [r for item in driver.snapshot().transcript for r in item.tool_results()]
    assert result.metadata[TASK_KEY] == {
        "taskId": "task-1",
        "status": "completed",
        "statusMessage": None,
    }
    assert updates(tmp_path) == []  # answered by sending the call again, not tasks/update


async def test_a_restart_while_a_task_waits_for_input_answers_the_same_task(
    tmp_path: Path,
) -> None:
    """The task id is durable: a driver restored in a new process asks the question again
    and its answer goes to the same task (``tasks/update``), which is followed to its end;
    the tool is not called again."""
    store = MemorySessionStore()
    with http_server(tmp_path, "ext", EXT_TASK_SERVER) as server:

        def agent(source: McpToolSource, manager: Any, script: list[Any]) -> al.Agent:
            return (
                al.Agent.builder()
                .model(al.testing.ScriptedModel(script))
                .add_tool_source(source)
                .task_manager(manager)
                .store(store)
                .input([al.Item.text(al.ItemKind.USER, "go")])
                .build()
            )

        first = McpToolSource(server, connect_timeout=LOADED, elicitation=True)
        async with first, al.tasks.AsyncTaskManager() as manager:
            script = [tool_calls(call("mcp__ext__asks", {"n": 4}, id="a"))]
            asked = await (await agent(first, manager, script).start("s")).next()
            assert isinstance(asked, al.CallQuestion)
        stored = await store.load("s")
        assert stored is not None
        assert stored.checkpoint["state"] == "AWAITING_ANSWER"
        assert not (tmp_path / "cancelled-task-1").exists()  # left to its stored question
        second = McpToolSource(server, connect_timeout=LOADED, elicitation=True)
        async with second, al.tasks.AsyncTaskManager() as manager:
            driver = await agent(second, manager, ["thanks"]).resume(session_id="s")
            again = await driver.next()
            assert isinstance(again, al.CallQuestion)
            assert (again.id, again.question) == (asked.id, asked.question)
            again.answer({"name": "Grace"})
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == ["Hello, Grace"]
    [result] = [r for item in driver.snapshot().transcript for r in item.tool_results()]
    assert result.metadata[TASK_KEY] == {
        "taskId": "task-1",
        "status": "completed",
        "statusMessage": None,
    }
    assert updates(tmp_path) == [{"name": {"action": "accept", "content": {"name": "Grace"}}}]
