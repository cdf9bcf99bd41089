"""What real servers send beyond plain tools: task support, content annotations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from mcp_support import results, stdio_server

import agentloop as al
from agentloop.mcp import McpToolSource
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

LOADED = 60.0

NOT_OFFERED = {
    "event": "mcp tool not offered",
    "log_level": "warning",
    "server": "srv",
    "tool": "needs_task",
    "reason": "it requires task-augmented execution (execution.taskSupport 'required'), which "
    "agentloop's MCP client does not support",
}


async def test_tools_requiring_tasks_are_not_offered_and_annotations_survive_a_checkpoint(
    tmp_path: Path,
) -> None:
    model = al.ScriptedModel(
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
    assert (needs.is_error, needs.metadata.get(al.OUTCOME_KEY)) == (True, "unknown_tool")
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
