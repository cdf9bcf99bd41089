"""What real servers send beyond plain tools: task support, annotations, large answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from mcp_support import http_server, results, stdio_server

import agentloop as al
import agentloop.testing
import agentloop.tools
from agentloop.mcp import McpToolSource
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

LOADED = 60.0

NOT_OFFERED = {
    "event": "mcp tool not offered",
    "log_level": "warning",
    "server": "srv",
    "tool": "needs_task",
    "reason": "it requires task-augmented execution (execution.taskSupport 'required') and the "
    "server does not advertise tasks.requests.tools.call",
}


async def test_tools_requiring_tasks_are_not_offered_and_annotations_survive_a_checkpoint(
    tmp_path: Path,
) -> None:
    model = al.testing.ScriptedModel(
        [
            tool_calls(
                call("mcp__srv__may_task", {}, id="c1"),
                call("mcp__srv__needs_task", {}, id="c2"),
                call("mcp__srv__annotated", {}, id="c3"),
            ),
            "done",
        ]
    )
    with structlog.testing.capture_logs() as logs:
        # Task support is a 2025-11-25 field: the 2026 wire carries no tasks.
        async with McpToolSource(
            stdio_server(tmp_path), protocol="legacy", connect_timeout=LOADED
        ) as source:
            names = [spec.name for spec in source.specs()]
            await source.refresh()  # listed again: not logged again
            agent = (
                al.Agent.builder()
                .model(model)
                .add_tool_source(source)
                .input([al.Item.text(al.ItemKind.USER, "go")])
                .build()
            )
            driver = await agent.start("s")
            step = await driver.run_until_blocked()
            restored = await agent.resume(json.loads(json.dumps(driver.checkpoint())))
    assert "mcp__srv__may_task" in names
    assert "mcp__srv__needs_task" not in names
    assert [entry for entry in logs if entry["event"] == "mcp tool not offered"] == [NOT_OFFERED]
    assert isinstance(step, al.Finished)
    may, needs, annotated = results(driver)
    assert (may.output, may.is_error) == ("ran without a task", False)
    assert (needs.is_error, needs.metadata.get(al.tools.OUTCOME_KEY)) == (True, "unknown_tool")
    assert annotated.output == [
        al.TextPart(
            "for you", metadata={"mcp.annotations": {"audience": ["user"], "priority": 0.9}}
        ),
        al.TextPart("plain"),
        al.MediaPart(
            "image/png",
            data="iVBORw0KGgo=",
            metadata={"mcp.annotations": {"audience": ["assistant"], "priority": 0.0}},
        ),
        al.FilePart(
            "c.md",
            uri="file:///docs/c.md",
            metadata={"mcp.annotations": {"lastModified": "2026-01-02T03:04:05Z"}},
        ),
    ]
    assert results(restored) == [may, needs, annotated]


BIG = 1_500_000


async def test_a_large_answer_over_http_is_truncated_and_one_over_the_limit_fails_only_its_call(
    tmp_path: Path,
) -> None:
    truncated = "[output truncated: 1400000 of 1500000 characters cut]"
    replies: list[Reply | str] = [tool_calls(call("mcp__web__big", {"size": BIG}, id="c1")), "ok"]
    with http_server(tmp_path) as server:
        for protocol in ("legacy", "auto"):  # 2025 answers stream as server-sent events
            async with McpToolSource(server, protocol=protocol, connect_timeout=LOADED) as source:
                driver = await run(source, replies)
                (result,) = results(driver)
                assert (result.is_error, len(result.output)) == (
                    False,
                    100_000 + 1 + len(truncated),
                )
                assert result.output.startswith("0123456789" * 10)
                assert result.output.endswith("\n" + truncated)
        async with McpToolSource(
            server, protocol="legacy", max_message_size=BIG, connect_timeout=LOADED
        ) as source:
            driver = await run(source, replies)
            assert source.connected
            assert (await source.call_tool("add", {"a": 1, "b": 2})).value == "3"
            assert source.connections == 1
    (failed,) = results(driver)
    assert (failed.is_error, failed.metadata.get(al.tools.OUTCOME_KEY)) == (True, "failed")
    assert failed.output == (
        "tool 'mcp__web__big' failed: McpCallError: MCP server 'web' answered tools/call 'big' "
        "with a message larger than max_message_size (1500000 bytes); it was not read (the "
        "connection stays open): raise the source's max_message_size to read it"
    )


async def run(source: McpToolSource, replies: list[Reply | str]) -> al.LoopDriver:
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(list(replies)))
        .add_tool_source(source)
        .input([al.Item.text(al.ItemKind.USER, "go")])
        .build()
    )
    driver = await agent.start("s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    return driver


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_message_size": 0}, ValueError, "McpToolSource: max_message_size must be a "
         "positive number of bytes or None, got 0"),
        ({"max_message_size": 1.5}, ValueError, "McpToolSource: max_message_size must be a "
         "positive number of bytes or None, got 1.5"),
        ({"roots": "/srv"}, TypeError, "McpToolSource roots must be a PathPolicy, a PolicyChain "
         "or a collection of paths, got the single path '/srv'; pass ['/srv']"),
        ({"roots": [None]}, TypeError, "McpToolSource roots must be paths (str or os.PathLike), "
         "got NoneType: None"),
    ],
)  # fmt: skip
async def test_bad_options_are_refused_when_the_source_is_made(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as refused:
        McpToolSource(stdio_server(tmp_path), **options)
    assert str(refused.value) == message
