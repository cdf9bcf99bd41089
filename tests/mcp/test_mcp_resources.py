"""Resources and prompts of real MCP servers: the host API, the opt-in tools, bad answers."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
from mcp_support import HERE, Events, http_server, results, stdio_server
from test_mcp_source import LOADED, outcome, run_session

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.permissions
import agentloop.testing
from agentloop.mcp import (
    McpCallError,
    McpPrompt,
    McpPromptArgument,
    McpPromptMessage,
    McpPromptResult,
    McpResource,
    McpResourceTemplate,
    McpToolSource,
    StdioServer,
)
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

RESOURCES = [
    McpResource(
        "notes://readme",
        "readme",
        title="Read me",
        description="The notes' read-me.",
        mime_type="text/plain",
        annotations={"audience": ["user"], "priority": 0.5},
    ),
    McpResource("data://bytes", "bytes", description="", mime_type="application/octet-stream"),
]
TEMPLATES = [
    McpResourceTemplate(
        "notes://{topic}", "note", description="The note on a topic.", mime_type="text/plain"
    )
]
PROMPTS = [
    McpPrompt(
        "review",
        "Review",
        "Review some code.",
        (McpPromptArgument("code", None, True), McpPromptArgument("style", None, False)),
    ),
    McpPrompt("dialogue", None, "A prompt of two messages, one with an annotated image."),
]


@asynccontextmanager
async def source_for(
    transport: str, tmp_path: Path, **options: Any
) -> AsyncIterator[McpToolSource]:
    """The mcp-package test server over stdio (2026 or legacy handshake) or HTTP."""
    if transport == "http":
        with http_server(tmp_path, "srv") as server:
            async with McpToolSource(server, connect_timeout=LOADED, **options) as source:
                yield source
        return
    protocol = "legacy" if transport == "stdio-legacy" else "auto"
    async with McpToolSource(
        stdio_server(tmp_path), protocol=protocol, connect_timeout=LOADED, **options
    ) as source:
        yield source


TRANSPORTS = ["stdio", "stdio-legacy", "http"]
TEXT_PLAIN = {"mcp.mime_type": "text/plain"}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_host_lists_and_reads_resources_and_prompts(
    tmp_path: Path, transport: str
) -> None:
    async with source_for(transport, tmp_path) as source:
        assert await source.list_resources() == RESOURCES
        assert await source.list_resource_templates() == TEMPLATES
        assert await source.read_resource("notes://readme") == [
            al.TextPart(
                "read me first",
                metadata={"mcp.uri": "notes://readme", "mcp.mime_type": "text/plain"},
            )
        ]
        assert await source.read_resource("data://bytes") == [
            al.FilePart(
                "bytes", mime_type="application/octet-stream", data="AAEC", uri="data://bytes"
            )
        ]
        assert await source.read_resource("notes://cats") == [
            al.TextPart("a note on cats", metadata={"mcp.uri": "notes://cats", **TEXT_PLAIN})
        ]
        assert await source.list_prompts() == PROMPTS
        assert await source.get_prompt("review", {"code": "x = 1"}) == McpPromptResult(
            "review",
            "Review some code.",
            (McpPromptMessage("user", al.TextPart("Review this (short): x = 1")),),
        )
        dialogue = await source.get_prompt("dialogue")
        with pytest.raises(McpCallError) as caught:
            await source.read_resource("nowhere://at-all")
        assert str(caught.value).startswith(
            "MCP server 'srv' failed resources/read 'nowhere://at-all': MCPError: "
        )
        assert [spec.name for spec in source.specs() if "resource" in spec.name] == []
    assert dialogue.messages == (
        McpPromptMessage("user", al.TextPart("what is this?")),
        McpPromptMessage(
            "assistant",
            al.MediaPart(
                "image/png",
                data="iVBORw0KGgo=",
                metadata={"mcp.annotations": {"audience": ["user"]}},
            ),
        ),
    )


async def test_host_api_arguments_are_checked(tmp_path: Path) -> None:
    async with source_for("stdio", tmp_path) as source:
        with pytest.raises(TypeError) as empty:
            await source.read_resource("")
        with pytest.raises(TypeError) as numbers:
            await source.get_prompt("review", {"code": 1})  # type: ignore[dict-item]
        assert (await source.get_prompt("review", {"code": "ok"})).messages[0].role == "user"
    assert str(empty.value) == "read_resource: uri must be a non-empty string, got ''"
    assert str(numbers.value) == (
        "get_prompt 'review': arguments must map strings to strings (MCP prompt arguments are "
        "strings); not strings: {'code': 1}"
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_model_reads_resources_and_gets_prompts_when_opted_in(
    tmp_path: Path, transport: str
) -> None:
    replies: list[Reply | str] = [
        tool_calls(
            call("mcp__srv__read_resource", {"uri": "notes://readme"}, id="c1"),
            call("mcp__srv__read_resource", {"uri": "notes://dogs"}, id="c2"),
            call("mcp__srv__get_prompt", {"name": "review", "arguments": {"code": "f()"}}, id="c3"),
            call("mcp__srv__get_prompt", {"name": "dialogue"}, id="c4"),
            call("mcp__srv__get_prompt", {"name": "absent"}, id="c5"),
        ),
        "done",
    ]
    seen: list[list[str]] = []
    async with source_for(transport, tmp_path, feature_tools=True) as source:
        read = source.get("mcp__srv__read_resource")
        assert read is not None
        assert read.spec.description == (
            "Read a resource of MCP server 'srv' by its URI.\nResources:\n"
            "- notes://readme (readme): Read me - The notes' read-me.\n- data://bytes (bytes)\n"
            "URI templates (fill in the {placeholders}):\n"
            "- notes://{topic} (note): The note on a topic."
        )
        assert read.spec.annotations == al.ToolAnnotations(read_only=True, idempotent=True)
        driver, _, step = await run_session(source, replies, seen=seen)
    assert isinstance(step, al.Finished)
    assert "mcp__srv__get_prompt" in seen[0]
    by_id = {result.call_id: result for result in results(driver)}
    assert (by_id["c1"].output, by_id["c1"].metadata) == (
        "read me first",
        {"mcp.uri": "notes://readme"},
    )
    assert by_id["c2"].output == "a note on dogs"
    assert by_id["c3"].output == "[user] Review this (short): f()"
    assert by_id["c4"].output == [
        al.TextPart("[user] what is this?"),
        al.TextPart("[assistant]"),
        al.MediaPart(
            "image/png", data="iVBORw0KGgo=", metadata={"mcp.annotations": {"audience": ["user"]}}
        ),
    ]
    assert (by_id["c5"].is_error, outcome(by_id["c5"])) == (True, "invalid_input")


async def test_reads_and_prompts_have_permission_kinds_of_their_own(tmp_path: Path) -> None:
    replies: list[Reply | str] = [
        tool_calls(
            call("mcp__srv__read_resource", {"uri": "notes://readme"}, id="c1"),
            call("mcp__srv__get_prompt", {"name": "review", "arguments": {"code": "x"}}, id="c2"),
            call("mcp__srv__add", {"a": 1, "b": 1}, id="c3"),
        ),
        "done",
    ]
    policy = al.permissions.RequestKindPolicy(deny={"mcp.read_resource"}, allow={"*"})
    async with source_for("stdio", tmp_path, feature_tools=True) as source:
        driver, _, step = await run_session(source, replies, permissions=policy)
    assert isinstance(step, al.Finished)
    read, prompt, add = results(driver)
    assert (read.is_error, outcome(read)) == (True, "permission_denied")
    denied = "mcp.read_resource requests are not allowed (Read MCP resource notes://readme of srv)"
    assert denied in read.output
    assert (prompt.output, add.output) == ("[user] Review this (short): x", "2")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_list_changed_refreshes_what_the_feature_tools_offer(
    tmp_path: Path, transport: str
) -> None:
    replies: list[Reply | str] = [
        tool_calls(call("mcp__srv__add_note", {}, id="c1")),
        tool_calls(call("mcp__srv__read_resource", {"uri": "notes://later"}, id="c2")),
        "done",
    ]
    offered: list[dict[str, al.ToolSpec]] = []

    async with source_for(transport, tmp_path, feature_tools=True) as source:

        def script(request: al.model.TurnRequest) -> Reply | str:
            offered.append({spec.name: spec for spec in request.available_tools})
            answered = sum(item.kind is al.ItemKind.ASSISTANT for item in request.transcript)
            return replies[answered]

        events = Events()
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(source)
            .observer(events)
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        driver = await agent.start("s")
        step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert events.of(al.observe.ToolCatalogChanged) == [
        al.observe.ToolCatalogChanged(
            "mcp:srv", changed=["mcp__srv__get_prompt", "mcp__srv__read_resource"]
        )
    ]
    before, after = offered[0], offered[1]
    assert "notes://later" not in before["mcp__srv__read_resource"].description
    assert "- notes://later (later)" in after["mcp__srv__read_resource"].description
    prompt_names = after["mcp__srv__get_prompt"].input_schema["properties"]["name"]["enum"]
    assert prompt_names == ["review", "dialogue", "later"]
    assert [r.output for r in results(driver)] == ["noted", "added later"]


def feature_server(*options: str) -> StdioServer:
    return StdioServer("bad", sys.executable, [str(HERE / "feature_server.py"), *options])


BAD_READS = {
    "bad://not-a-list": "MCP server 'bad' failed resources/read 'bad://not-a-list': "
    "ValidationError: ",
    "bad://no-text": "MCP server 'bad' failed resources/read 'bad://no-text': ValidationError: ",
    "bad://blob": "MCP server 'bad' answered resources/read 'bad://blob' with contents[0] "
    "(bad://blob) whose blob is not base64: ",
    "bad://absent": "MCP server 'bad' failed resources/read 'bad://absent': MCPError: no "
    "resource bad://absent",
}


@pytest.mark.parametrize("uri", sorted(BAD_READS))
async def test_a_bad_read_fails_clearly_and_loses_nothing(uri: str) -> None:
    async with McpToolSource(feature_server(), connect_timeout=LOADED) as source:
        with pytest.raises(McpCallError) as caught:
            await source.read_resource(uri)
        assert str(caught.value).startswith(BAD_READS[uri])
        assert await source.read_resource("good://text") == [
            al.TextPart("fine", metadata={"mcp.uri": "good://text"})
        ]
        assert source.connections == 1


async def test_a_read_answered_with_a_null_result_times_out_and_reconnects() -> None:
    """``"result": null`` is not a JSON-RPC response: the SDK drops the line, so the read
    waits for its call_timeout; the next read reconnects."""
    async with McpToolSource(feature_server(), call_timeout=2, connect_timeout=LOADED) as source:
        with pytest.raises(McpCallError) as caught:
            await source.read_resource("bad://null")
        assert str(caught.value) == (
            "MCP server 'bad' did not answer resources/read 'bad://null' within 2 s; the call "
            "was cancelled and the connection will be reopened on the next call"
        )
        assert (await source.read_resource("good://text"))[0] == al.TextPart(
            "fine", metadata={"mcp.uri": "good://text"}
        )
        assert source.connections == 2


BAD_PROMPTS = {
    "bad_role": "MCP server 'bad' failed prompts/get 'bad_role': ValidationError: ",
    "no_messages": "MCP server 'bad' failed prompts/get 'no_messages': ValidationError: ",
    "absent": "MCP server 'bad' failed prompts/get 'absent': MCPError: 'absent'",
}


@pytest.mark.parametrize("name", sorted(BAD_PROMPTS))
async def test_a_bad_prompt_fails_clearly_and_loses_nothing(name: str) -> None:
    async with McpToolSource(feature_server(), connect_timeout=LOADED) as source:
        with pytest.raises(McpCallError) as caught:
            await source.get_prompt(name)
        assert str(caught.value).startswith(BAD_PROMPTS[name])
        good = await source.get_prompt("good")
        assert good.messages == (McpPromptMessage("user", al.TextPart("hi")),)


async def test_endless_pages_and_bad_lists_fail_and_the_feature_tools_wait() -> None:
    async with McpToolSource(feature_server("endless"), connect_timeout=LOADED) as source:
        with pytest.raises(McpCallError) as caught:
            await source.list_resources()
        assert str(caught.value) == (
            "MCP server 'bad' listed more than 100 pages of resources/list; the list was not read"
        )
        assert len(await source.list_prompts()) == 3
    with pytest.raises(McpCallError) as bad:
        async with McpToolSource(
            feature_server("badtemplates"), feature_tools=True, connect_timeout=LOADED
        ):
            pass
    assert str(bad.value).startswith(
        "MCP server 'bad' failed resources/templates/list: ValidationError: "
    )


async def test_a_server_without_resources_offers_no_feature_tools() -> None:
    async with McpToolSource(
        feature_server("noresources"), feature_tools=True, connect_timeout=LOADED
    ) as source:
        assert source.specs() == []
        with pytest.raises(McpCallError) as caught:
            await source.read_resource("good://text")
        with pytest.raises(McpCallError) as prompts:
            await source.list_prompts()
    assert str(caught.value) == (
        "MCP server 'bad' does not offer resources (its capabilities have no 'resources' entry)"
    )
    assert str(prompts.value) == (
        "MCP server 'bad' does not offer prompts (its capabilities have no 'prompts' entry)"
    )


async def test_a_server_tool_keeps_its_name_over_a_feature_tool() -> None:
    with structlog.testing.capture_logs() as logs:
        async with McpToolSource(
            feature_server("clash"), feature_tools=True, connect_timeout=LOADED
        ) as source:
            read = source.get("mcp__bad__read_resource")
            prompt = source.get("mcp__bad__get_prompt")
    assert type(read).__name__ == "McpTool"
    assert type(prompt).__name__ == "GetPromptTool"
    assert [entry for entry in logs if entry["event"] == "mcp feature tool not offered"] == [
        {
            "event": "mcp feature tool not offered",
            "log_level": "warning",
            "server": "bad",
            "tool": "mcp__bad__read_resource",
            "reason": "the server has a tool of that name",
        }
    ]
