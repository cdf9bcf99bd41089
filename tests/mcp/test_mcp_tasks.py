"""Task-augmented MCP tool calls against a 2025-11-25 task server (stdio and HTTP)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from mcp_support import TASK_SERVER, http_server, results, stdio_server, task_server
from test_mcp_source import LOADED, run_session

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.mcp import (
    TASK_KEY,
    McpCallError,
    McpServer,
    McpToolSource,
    RouteMcpTasks,
    StdioServer,
)
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

DONE = {"taskId": "task-1", "status": "completed", "statusMessage": None}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_required_task_tools_run_as_tasks_in_a_session(
    tmp_path: Path, transport: str
) -> None:
    replies: list[Reply | str] = [
        tool_calls(
            call("mcp__tsk__work", {"n": 1}, id="c1"),
            call("mcp__tsk__maybe", {"n": 2}, id="c2"),
            call("mcp__tsk__plain", {"n": 3}, id="c3"),
        ),
        "done",
    ]
    if transport == "stdio":
        async with McpToolSource(task_server(tmp_path), connect_timeout=LOADED) as source:
            driver, _, step = await run_session(source, replies)
    else:
        with http_server(tmp_path, "tsk", TASK_SERVER) as server:
            async with McpToolSource(server, connect_timeout=LOADED) as source:
                driver, _, step = await run_session(source, replies)
    assert isinstance(step, al.Finished)
    work, maybe, plain = results(driver)
    assert (work.output, work.is_error, work.metadata) == (
        'work done: {"n": 1}',
        False,
        {TASK_KEY: DONE},
    )
    assert (maybe.output, maybe.metadata) == ('ran plainly: maybe {"n": 2}', {})
    assert (plain.output, plain.metadata) == ('ran plainly: plain {"n": 3}', {})


async def test_prefer_tasks_runs_optional_tools_as_tasks(tmp_path: Path) -> None:
    async with McpToolSource(
        task_server(tmp_path), prefer_tasks=True, connect_timeout=LOADED
    ) as source:
        output = await source.call_tool("maybe", {"n": 7})
        plain = await source.call_tool("plain", {})
    assert (output.value, output.metadata) == ('maybe done: {"n": 7}', {TASK_KEY: DONE})
    assert (plain.value, plain.metadata) == ("ran plainly: plain {}", {})


async def test_prefer_tasks_set_after_construction_is_honoured(tmp_path: Path) -> None:
    source = McpToolSource(task_server(tmp_path), connect_timeout=LOADED)
    source.prefer_tasks = True  # a plain attribute: the tool list reads it when built
    async with source:
        output = await source.call_tool("maybe", {"n": 7})
    assert (output.value, output.metadata) == ('maybe done: {"n": 7}', {TASK_KEY: DONE})


async def test_a_failed_task_is_an_error_result_with_its_status(tmp_path: Path) -> None:
    async with McpToolSource(task_server(tmp_path), connect_timeout=LOADED) as source:
        output = await source.call_tool("fails", {})
    assert (output.value, output.is_error) == ("it broke", True)
    assert output.metadata == {
        TASK_KEY: {"taskId": "task-1", "status": "failed", "statusMessage": "the job broke"}
    }


async def test_a_task_needing_input_is_read_with_tasks_result(tmp_path: Path) -> None:
    async with McpToolSource(task_server(tmp_path), connect_timeout=LOADED) as source:
        output = await source.call_tool("asks", {"n": 3})
    assert (output.value, output.is_error) == ('asks done: {"n": 3}', False)
    assert output.metadata == {
        TASK_KEY: {
            "taskId": "task-1",
            "status": "input_required",
            "statusMessage": "waiting for a reviewer",
        }
    }


HOSTILE = {
    "vanish": "MCP server 'tsk' failed tasks/get 'task-1': MCPError: 'no task task-1'",
    "wrong_id": "MCP server 'tsk' answered tasks/get 'task-1' with task 'task-999'; expected "
    "the same task id",
    "bad_status": "MCP server 'tsk' failed tasks/get 'task-1': ValidationError: 1 validation "
    "error for GetTaskResult",
    "bad_result": "MCP server 'tsk' failed tasks/result 'task-1': ValidationError: 1 validation "
    "error for CallToolResult",
    "server_cancels": "MCP server 'tsk' cancelled task 'task-1' of tools/call 'server_cancels': "
    "the operator stopped it",
    "bad_create": "MCP server 'tsk' answered tools/call 'bad_create' (as a task) with a malformed "
    "CreateTaskResult: ValidationError: 5 validation errors for CreateTaskResult",
}


@pytest.mark.parametrize("tool", sorted(HOSTILE))
async def test_a_hostile_task_fails_its_call_clearly_and_loses_nothing(
    tmp_path: Path, tool: str
) -> None:
    async with McpToolSource(task_server(tmp_path), connect_timeout=LOADED) as source:
        with pytest.raises(McpCallError) as caught:
            await source.call_tool(tool, {})
        assert str(caught.value).startswith(HOSTILE[tool])
        assert caught.value.server == "tsk"
        after = await source.call_tool("work", {"n": 1})  # the same connection still serves
        assert after.value == 'work done: {"n": 1}'
        assert source.connections == 1


async def test_a_task_that_never_ends_is_cancelled_after_task_timeout(tmp_path: Path) -> None:
    async with McpToolSource(
        task_server(tmp_path), task_timeout=0.5, connect_timeout=LOADED
    ) as source:
        with pytest.raises(McpCallError) as caught:
            await source.call_tool("never", {})
        assert str(caught.value) == (
            "MCP server 'tsk': task 'task-1' of tools/call 'never' did not end within "
            "task_timeout (0.5 s; last status 'working'); it was cancelled (tasks/cancel): "
            "raise the source's task_timeout for longer tasks"
        )
        assert (tmp_path / "cancelled-task-1").exists()
        assert (await source.call_tool("plain", {})).value == "ran plainly: plain {}"


async def test_cancelling_our_call_cancels_the_task(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        async with McpToolSource(task_server(tmp_path), connect_timeout=LOADED) as source:
            async with anyio.create_task_group() as group:
                group.start_soon(source.call_tool, "never", {})
                with anyio.fail_after(LOADED):
                    created = "mcp task created"
                    while not any(entry["event"] == created for entry in logs):  # noqa: ASYNC110 (logged by the source)
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()
            assert (tmp_path / "cancelled-task-1").exists()
            assert (await source.call_tool("work", {})).value == "work done: {}"


async def test_a_status_notification_wakes_the_poll_at_once(tmp_path: Path) -> None:
    """``pushed`` asks to be polled once an hour (capped at 5 s) and completes only once
    ``push`` said so: only the notification's wake-up ends it within task_timeout (4 s).
    Notifications about an unknown task, and malformed ones, are ignored."""
    outcome: list[Any] = []
    with structlog.testing.capture_logs() as logs:
        async with McpToolSource(
            task_server(tmp_path), task_timeout=4.0, connect_timeout=LOADED
        ) as source:
            for arguments in (
                {"task": "task-77", "status": "completed"},  # nobody follows it
                {"params": {"taskId": 5, "status": "completed"}},
                {"params": {"taskId": "task-9", "status": "working", "x": "y" * 100_000}},
            ):
                assert (await source.call_tool("push", arguments)).value == "pushed"

            async def followed() -> None:
                outcome.append(await source.call_tool("pushed", {"n": 1}))

            async with anyio.create_task_group() as group:
                group.start_soon(followed)
                with anyio.fail_after(LOADED):
                    created = "mcp task created"
                    while not any(entry["event"] == created for entry in logs):  # noqa: ASYNC110 (logged by the source)
                        await anyio.sleep(0.01)
                for arguments in (
                    {"params": {"taskId": "task-1", "status": "exploded"}},
                    {"task": "task-1", "status": "completed"},
                ):
                    assert (await source.call_tool("push", arguments)).value == "pushed"
            assert source.connections == 1
    [output] = outcome
    assert (output.value, output.metadata) == (
        'pushed done: {"n": 1}',
        {TASK_KEY: {"taskId": "task-1", "status": "completed", "statusMessage": None}},
    )
    statuses = [
        {key: entry[key] for key in ("task", "status", "message", "via")}
        for entry in logs
        if entry["event"] == "mcp task status"
    ]
    assert statuses == [
        {"task": "task-1", "status": "completed", "message": "pushed", "via": "notification"}
    ]
    assert [(e["log_level"], e["task"]) for e in logs if "unknown task" in e["event"]] == [
        ("debug", "task-77"),
        ("debug", "task-9"),
    ]
    malformed = [e["reason"] for e in logs if e["event"].endswith("notification malformed")]
    assert malformed == [
        "expected a string taskId and a status of ['cancelled', 'completed', 'failed', "
        "'input_required', 'working']; found taskId 5, status 'completed'",
        "expected a string taskId and a status of ['cancelled', 'completed', 'failed', "
        "'input_required', 'working']; found taskId 'task-1', status 'exploded'",
    ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_task_outlives_a_lost_connection_when_the_server_does(
    tmp_path: Path, transport: str
) -> None:
    """The connection is reopened while the task runs: over HTTP the same server still
    has the task and the call gets its result; a restarted stdio server does not."""
    outcome: list[Any] = []
    with structlog.testing.capture_logs() as logs:
        async with AsyncExitStack() as stack:
            if transport == "stdio":
                server: McpServer = task_server(tmp_path)
            else:
                server = stack.enter_context(http_server(tmp_path, "tsk", TASK_SERVER))
            source = await stack.enter_async_context(McpToolSource(server, connect_timeout=LOADED))

            async def long_call() -> None:
                try:
                    outcome.append(await source.call_tool("long", {"n": 9}))
                except McpCallError as error:
                    outcome.append(error)

            async with anyio.create_task_group() as group:
                group.start_soon(long_call)
                with anyio.fail_after(LOADED):
                    created = "mcp task created"
                    while not any(entry["event"] == created for entry in logs):  # noqa: ASYNC110 (logged by the source)
                        await anyio.sleep(0.01)
                await source.reconnect()
            assert source.connections == 2
    assert [entry["event"] for entry in logs if entry["event"].startswith("mcp task conn")] == [
        "mcp task connection lost"
    ]
    if transport == "http":
        assert outcome[0].value == 'long done: {"n": 9}'
        assert outcome[0].metadata[TASK_KEY]["status"] == "completed"
    else:
        assert (
            str(outcome[0])
            == "MCP server 'tsk' failed tasks/get 'task-1': MCPError: 'no task task-1'"
        )


async def test_without_the_tasks_capability_required_tools_are_not_offered(
    tmp_path: Path,
) -> None:
    with structlog.testing.capture_logs() as logs:
        async with McpToolSource(
            task_server(tmp_path, "notasks"), connect_timeout=LOADED
        ) as source:
            names = [spec.name for spec in source.specs()]
            maybe = await source.call_tool("maybe", {})
    assert names == ["mcp__tsk__maybe", "mcp__tsk__plain", "mcp__tsk__push"]
    assert maybe.value == "ran plainly: maybe {}"
    hidden = [entry for entry in logs if entry["event"] == "mcp tool not offered"]
    assert [entry["tool"] for entry in hidden] == [
        "asks", "bad_create", "bad_result", "bad_status", "fails", "long", "never",
        "pushed", "server_cancels", "vanish", "work", "wrong_id",
    ]  # fmt: skip
    assert {entry["reason"] for entry in hidden} == {
        "it requires task-augmented execution (execution.taskSupport 'required') and the "
        "server does not advertise tasks.requests.tools.call"
    }


async def test_a_2026_connection_carries_no_task_support(tmp_path: Path) -> None:
    """The mcp package's own server on the 2026-07-28 wire: no tasks, every tool plain."""
    async with McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED) as source:
        needs = await source.call_tool("needs_task", {})
    assert needs.value == "ran without a task"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_2026_server_offering_the_tasks_extension_offers_its_task_tools(
    tmp_path: Path, protocol: Any
) -> None:
    """The mcp package's server advertising the extension (it runs every call plainly):
    on the 2026 wire every tool is offered (its listing carries no ``execution``: the
    server decides per call), and nothing says the extension is unused; the 2025
    handshake carries no extensions, and a tool requiring a task is not offered."""
    plain = stdio_server(tmp_path)
    server = StdioServer(
        "srv", plain.command, plain.args, env={**(plain.env or {}), "MCP_TEST_TASKS_EXTENSION": "1"}
    )
    with structlog.testing.capture_logs() as logs:
        async with McpToolSource(server, protocol=protocol, connect_timeout=LOADED) as source:
            needs = await source.call_tool("needs_task", {})
            tasks = [spec.name for spec in source.specs() if TASK_KEY in spec.metadata]
            names = [spec.name for spec in source.specs()]
    assert [entry for entry in logs if "extension" in entry["event"]] == []
    if protocol == "legacy":  # the 2025 handshake: no extensions, no tasks capability
        assert "mcp__srv__needs_task" not in names
        return
    assert needs.value == "ran without a task"
    assert "mcp__srv__needs_task" in names
    assert tasks == []


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "10"])
async def test_task_timeout_must_be_a_positive_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="task_timeout") as caught:
        McpToolSource(task_server(Path(".")), task_timeout=bad)
    assert str(caught.value) == (
        f"McpToolSource: task_timeout must be a positive number, got {bad!r}"
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_task_calls_run_in_the_background_with_route_mcp_tasks(
    tmp_path: Path, transport: str
) -> None:
    model = al.testing.ScriptedModel(
        [
            tool_calls(call("mcp__tsk__work", {"n": 5}, id="c1")),
            tool_calls(call("mcp__tsk__plain", {"n": 6}, id="c2")),
            "both done",
        ]
    )
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            server: McpServer = task_server(tmp_path)
        else:
            server = stack.enter_context(http_server(tmp_path, "tsk", TASK_SERVER))
        source = await stack.enter_async_context(McpToolSource(server, connect_timeout=LOADED))
        routing = RouteMcpTasks(source)
        assert [spec.name for spec in source.specs() if TASK_KEY in spec.metadata] == [
            "mcp__tsk__asks", "mcp__tsk__bad_create", "mcp__tsk__bad_result",
            "mcp__tsk__bad_status", "mcp__tsk__fails", "mcp__tsk__long", "mcp__tsk__never",
            "mcp__tsk__pushed", "mcp__tsk__server_cancels", "mcp__tsk__vanish", "mcp__tsk__work",
            "mcp__tsk__wrong_id",
        ]  # fmt: skip
        manager = await stack.enter_async_context(al.tasks.AsyncTaskManager(routing=routing))
        handle = manager.handle()
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(source)
            .task_manager(manager)
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        driver = await agent.start("s")
        step = await driver.run_until_blocked()  # the plain call ran; the task still polls
        while not isinstance(step, al.Finished):
            event = await handle.next_event()
            assert event is not None
            step = await driver.run_until_blocked()
        transcript = driver.snapshot().transcript
    al.transcript.validate_transcript(transcript)
    placeholder, plain = [r for item in transcript for r in item.tool_results()]
    assert al.tools.result_outcome(placeholder) == al.tools.ResultOutcome.BACKGROUND
    assert plain.output == 'ran plainly: plain {"n": 6}'
    assert [item.text_content for item in transcript if item.kind is al.ItemKind.NOTIFICATION] == [
        'Background tool call c1 completed: work done: {"n": 5}'
    ]
    assert step.result.final_items[0].text_content == "both done"


def test_route_mcp_tasks_checks_its_choices() -> None:
    with pytest.raises(TypeError) as caught:
        RouteMcpTasks(al.ToolRegistry(), task="background")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "RouteMcpTasks: task must be TaskKind.FOREGROUND, TaskKind.BACKGROUND or "
        "DetachAfter(seconds), got 'background'"
    )
