"""McpToolSource against real MCP server processes (the official ``mcp`` package)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import RAW_SERVER, Events, http_server, results, stdio_server, wait_for_file

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.mcp import (
    McpConnect,
    McpConnectionError,
    McpError,
    McpToolSource,
    StdioServer,
)
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

LOADED = 60.0
"""Connect and call bounds for a machine under load (a server process may start slowly)."""

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}},
    "required": ["a", "b"],
    "title": "addArguments",
}


def outcome(result: al.ToolResultPart) -> str | None:
    value = result.metadata.get(al.tools.OUTCOME_KEY)
    return None if value is None else str(value)


async def run_session(
    source: McpToolSource,
    replies: list[Reply | str],
    *,
    permissions: Any = None,
    seen: list[list[str]] | None = None,
) -> tuple[al.LoopDriver, Events, al.Step]:
    """Run one turn whose model plays ``replies`` in order (recording the tools it is offered)."""

    def script(request: al.model.TurnRequest) -> Reply | str:
        if seen is not None:
            seen.append([spec.name for spec in request.available_tools])
        answered = sum(item.kind is al.ItemKind.ASSISTANT for item in request.transcript)
        return replies[answered]

    events = Events()
    builder = al.Agent.builder().model(al.testing.ScriptedModel(script)).add_tool_source(source)
    if permissions is not None:
        builder = builder.permissions(permissions)
    agent = builder.observer(events).input([al.Item.text(al.ItemKind.USER, "go")]).build()
    driver = await agent.start("s")
    step = await driver.run_until_blocked()
    return driver, events, step


async def test_tools_are_namespaced_with_their_schemas_and_annotations(tmp_path: Path) -> None:
    async with McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED) as source:
        names = [spec.name for spec in source.specs()]
        assert names == [
            "mcp__srv__add", "mcp__srv__add_note", "mcp__srv__annotated", "mcp__srv__ask_name",
            "mcp__srv__big",
            "mcp__srv__die", "mcp__srv__dotted_name", "mcp__srv__freeze", "mcp__srv__grow",
            "mcp__srv__may_task",
            "mcp__srv__needs_task",  # the 2026 wire carries no task support: offered
            "mcp__srv__pid", "mcp__srv__refuse", "mcp__srv__rich", "mcp__srv__roots",
            "mcp__srv__shrink", "mcp__srv__sign_in", "mcp__srv__slow", "mcp__srv__summarize",
        ]  # fmt: skip
        add = source.get("mcp__srv__add")
        assert add is not None
        assert (add.mcp_name, add.spec.description, add.spec.input_schema) == (
            "add",
            "Add two integers.",
            ADD_SCHEMA,
        )
        assert add.spec.annotations == al.ToolAnnotations(read_only=True)
        assert add.spec.metadata == {"mcp.server": "srv", "mcp.tool": "add"}
        dotted = source.get("mcp__srv__dotted_name")
        assert dotted is not None
        assert dotted.mcp_name == "dotted.name"
        assert source.connected
        assert source.connections == 1
    assert not source.connected


async def test_calls_run_with_validated_input_and_every_content_kind(tmp_path: Path) -> None:
    replies: list[Reply | str] = [
        tool_calls(
            call("mcp__srv__add", {"a": 2, "b": 40}, id="c1"),
            call("mcp__srv__add", {"a": "two", "b": 40}, id="c2"),
            call("mcp__srv__dotted_name", {"text": "hi"}, id="c3"),
            call("mcp__srv__rich", {}, id="c4"),
            call("mcp__srv__refuse", {"reason": "no"}, id="c5"),
        ),
        "done",
    ]
    async with McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED) as source:
        driver, _, step = await run_session(source, replies)
    assert isinstance(step, al.Finished)
    by_id = {result.call_id: result for result in results(driver)}
    assert (by_id["c1"].output, by_id["c1"].is_error, outcome(by_id["c1"])) == ("42", False, None)
    assert by_id["c1"].metadata == {"mcp.structured_content": {"result": "42"}}
    assert (by_id["c2"].is_error, outcome(by_id["c2"])) == (True, "invalid_input")
    assert by_id["c2"].output == (
        "invalid input for tool 'mcp__srv__add': at $.a: 'two' is not of type 'integer'"
    )
    assert by_id["c3"].output == "HI"
    assert by_id["c4"].output == [
        al.TextPart("a picture:"),
        al.MediaPart("image/png", data="iVBORw0KGgo="),
        al.TextPart("note text", metadata={"mcp.uri": "file:///notes/a.txt"}),
        al.FilePart(
            "b.bin", mime_type="application/octet-stream", data="AAEC", uri="file:///data/b.bin"
        ),
        al.FilePart("c.md", mime_type="text/markdown", uri="file:///docs/c.md"),
    ]
    assert by_id["c4"].metadata == {"mcp.structured_content": {"pictures": 1}}
    assert (by_id["c5"].output, by_id["c5"].is_error, outcome(by_id["c5"])) == (
        "refused: no",
        True,
        None,
    )


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_list_changed_updates_the_catalog_before_the_next_model_call(
    tmp_path: Path, protocol: Any
) -> None:
    seen: list[list[str]] = []
    replies: list[Reply | str] = [
        tool_calls(call("mcp__srv__grow", {}, id="c1")),
        tool_calls(call("mcp__srv__extra", {"word": "ab"}, id="c2")),
        tool_calls(call("mcp__srv__shrink", {}, id="c3")),
        "done",
    ]
    async with McpToolSource(
        stdio_server(tmp_path), protocol=protocol, connect_timeout=LOADED
    ) as source:
        add = source.get("mcp__srv__add")
        assert add is not None
        assert source.drain_catalog_events() == []
        driver, events, step = await run_session(source, replies, seen=seen)
        assert source.drain_catalog_events() == [
            al.tools.ToolCatalogEvent(
                "mcp:srv", added=["mcp__srv__extra"], removed=["mcp__srv__add"]
            )
        ]
        assert add.current_spec() is None  # hidden once the server no longer lists it
        assert source.get("mcp__srv__add") is None
    assert isinstance(step, al.Finished)
    assert "mcp__srv__extra" not in seen[0]
    assert "mcp__srv__extra" in seen[1]
    assert "mcp__srv__add" in seen[2]
    assert "mcp__srv__add" not in seen[3]
    assert [r.output for r in results(driver)] == ["grown", "abab", "shrunk"]
    assert events.of(al.observe.ToolCatalogChanged) == [
        al.observe.ToolCatalogChanged("mcp:srv", added=["mcp__srv__extra"]),
        al.observe.ToolCatalogChanged("mcp:srv", removed=["mcp__srv__add"]),
    ]


async def test_streamable_http_server_lists_calls_and_reports_changes(tmp_path: Path) -> None:
    seen: list[list[str]] = []
    replies: list[Reply | str] = [
        tool_calls(call("mcp__web__add", {"a": 1, "b": 2}, id="c1")),
        tool_calls(call("mcp__web__grow", {}, id="c2")),
        "done",
    ]
    with http_server(tmp_path) as server:
        async with McpToolSource(server, connect_timeout=LOADED) as source:
            driver, events, step = await run_session(source, replies, seen=seen)
    assert isinstance(step, al.Finished)
    assert [r.output for r in results(driver)] == ["3", "grown"]
    assert "mcp__web__extra" in seen[2]
    assert "mcp__web__extra" not in seen[1]
    assert events.of(al.observe.ToolCatalogChanged) == [
        al.observe.ToolCatalogChanged("mcp:web", added=["mcp__web__extra"])
    ]


async def test_a_server_killed_mid_call_fails_that_call_and_the_next_call_reconnects(
    tmp_path: Path,
) -> None:
    replies: list[Reply | str] = [
        tool_calls(call("mcp__srv__pid", {}, id="c1")),
        tool_calls(call("mcp__srv__die", {}, id="c2")),
        tool_calls(call("mcp__srv__pid", {}, id="c3")),
        "done",
    ]
    async with McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED) as source:
        driver, _, step = await run_session(source, replies)
        assert source.connections == 2
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    first, died, second = results(driver)
    assert (await wait_for_file(tmp_path / "died")) == first.output
    assert (died.is_error, outcome(died)) == (True, "failed")
    assert died.output == (
        "tool 'mcp__srv__die' failed: McpConnectionError: MCP server 'srv' went away during "
        "tools/call 'die': MCPError: Connection closed; the next call reconnects"
    )
    assert second.is_error is False
    assert second.output != first.output
    with pytest.raises(ProcessLookupError):
        os.kill(int(first.output), 0)


async def test_a_hung_server_times_out_the_call_and_is_restarted(tmp_path: Path) -> None:
    replies: list[Reply | str] = [
        tool_calls(call("mcp__srv__freeze", {}, id="c1")),
        tool_calls(call("mcp__srv__add", {"a": 1, "b": 1}, id="c2")),
        "done",
    ]
    async with McpToolSource(
        stdio_server(tmp_path), call_timeout=1, connect_timeout=LOADED
    ) as source:
        driver, _, step = await run_session(source, replies)
        assert source.connections == 2
    assert isinstance(step, al.Finished)
    hung, after = results(driver)
    assert (hung.is_error, outcome(hung)) == (True, "failed")
    assert hung.output == (
        "tool 'mcp__srv__freeze' failed: McpCallError: MCP server 'srv' did not answer "
        "tools/call 'freeze' within 1 s; the call was cancelled and the connection will be "
        "reopened on the next call"
    )
    assert (after.output, after.is_error) == ("2", False)


async def test_a_malformed_answer_fails_the_call_not_the_driver() -> None:
    server = StdioServer("raw", sys.executable, [RAW_SERVER])
    replies: list[Reply | str] = [tool_calls(call("mcp__raw__broken", {}, id="c1")), "done"]
    async with McpToolSource(server, protocol="legacy", call_timeout=LOADED) as source:
        driver, _, step = await run_session(source, replies)
    assert isinstance(step, al.Finished)
    (result,) = results(driver)
    assert (result.is_error, outcome(result)) == (True, "failed")
    assert str(result.output).startswith(
        "tool 'mcp__raw__broken' failed: McpCallError: MCP server 'raw' failed tools/call "
        "'broken': "
    )


async def test_cancelling_a_call_sends_the_cancel_notification(tmp_path: Path) -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(
        [tool_calls(call("mcp__srv__slow", {"seconds": 60}, id="c1")), "ok"]
    )
    async with McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED) as source:
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(source)
            .cancellation(controller.handle())
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        driver = await agent.start("s")
        steps: list[al.Step] = []

        async def drive() -> None:
            steps.append(await driver.run_until_blocked())

        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await wait_for_file(tmp_path / "started-slow")
            controller.interrupt()
        assert await wait_for_file(tmp_path / "cancelled-slow") == ""
        (step,) = steps
        assert isinstance(step, al.Finished)
        assert step.result.finish_reason is al.FinishReason.CANCELLED
        (result,) = results(driver)
        assert (result.is_error, outcome(result)) == (True, "cancelled")
        assert source.connected
        assert source.connections == 1
        assert (await source.call_tool("add", {"a": 5, "b": 5})).value == "10"


async def test_invocations_can_be_sent_for_approval_or_denied(tmp_path: Path) -> None:
    ask = al.permissions.RequestKindPolicy(
        require_approval={"mcp.invoke_tool"}
    )  # as docs/mcp.md writes it
    replies: list[Reply | str] = [
        tool_calls(call("mcp__srv__add", {"a": 1, "b": 2}, id="c1")),
        "ok",
    ]
    async with McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED) as source:
        driver, _, step = await run_session(source, replies, permissions=ask)
        assert isinstance(step, al.ApprovalRequest)
        assert (step.call_id, step.request_kind, step.summary) == (
            "c1",
            "mcp.invoke_tool",
            "Invoke MCP tool srv.add",
        )
        step.approve()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
        assert [r.output for r in results(driver)] == ["3"]

        deny = al.permissions.PolicyChain(
            al.permissions.RequestKindPolicy(deny={"mcp.invoke_tool"})
        )
        driver, _, step = await run_session(source, replies, permissions=deny)
    assert isinstance(step, al.Finished)
    (denied,) = results(driver)
    assert (denied.output, outcome(denied)) == (
        "tool permission denied: mcp.invoke_tool requests are not allowed "
        "(Invoke MCP tool srv.add) (code: policy_denied)",
        "permission_denied",
    )


async def test_connecting_is_a_permission_request(tmp_path: Path) -> None:
    server = stdio_server(tmp_path)
    deny = al.permissions.PolicyChain(al.permissions.RequestKindPolicy(deny={"mcp.connect"}))
    with pytest.raises(McpConnectionError) as denied:
        async with McpToolSource(server, permissions=deny):
            pass
    assert str(denied.value) == (
        "connecting to MCP server 'srv' was denied: mcp.connect requests are not allowed "
        f"(Connect MCP server srv ({server.target})) (code: policy_denied)"
    )

    ask = al.permissions.RequestKindPolicy(
        require_approval={"mcp.connect"}
    )  # a bare policy: used in a chain
    with pytest.raises(McpConnectionError, match="has no approve_connect callback"):
        async with McpToolSource(server, permissions=ask):
            pass

    asked: list[McpConnect] = []

    async def approve(request: McpConnect, decision: al.permissions.AskApproval) -> bool:
        asked.append(request)
        return True

    async with McpToolSource(
        server, permissions=ask, approve_connect=approve, connect_timeout=LOADED
    ) as source:
        assert source.connected
    assert asked == [McpConnect("srv", server.target)]


async def test_a_server_that_cannot_start_raises_a_connection_error(tmp_path: Path) -> None:
    missing = StdioServer("gone", str(tmp_path / "no-such-program"))
    with pytest.raises(McpConnectionError, match=r"^cannot connect to MCP server 'gone'"):
        async with McpToolSource(missing, connect_timeout=5):
            pass
    silent = StdioServer("mute", sys.executable, ["-c", "import time; time.sleep(60)"])
    with pytest.raises(McpConnectionError) as timed_out:
        async with McpToolSource(silent, connect_timeout=1):
            pass
    assert str(timed_out.value) == (
        f"cannot connect to MCP server 'mute' ({silent.target}): no answer within 1 s"
    )


async def test_calls_outside_the_context_manager_are_refused(tmp_path: Path) -> None:
    source = McpToolSource(stdio_server(tmp_path), connect_timeout=LOADED)
    with pytest.raises(McpConnectionError, match="is not open; use `async with"):
        await source.call_tool("add", {"a": 1, "b": 2})
    with pytest.raises(McpError, match="is not open"):
        await source.refresh()
