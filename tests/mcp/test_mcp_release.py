"""A driver resting on an MCP server's elicitation, released by its host (``release()``)
while the source and the task manager live on (a server's app): the asking call's task
ends, and a driver resumed from the store on the same source goes on as after a restart
(2026 era: the question asked again and the call goes on from the answer with the saved
request state; 2025 era: the call answered in doubt). A real server over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_support import LOADED, http_server

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.mcp import McpToolSource
from agentloop.store import MemorySessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def results(driver: al.LoopDriver) -> list[al.ToolResultPart]:
    return [
        part
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_released_elicitation_goes_on_in_the_resumed_driver(
    tmp_path: Path, protocol: str
) -> None:
    store = MemorySessionStore()
    with http_server(tmp_path) as server:
        tool = f"mcp__{server.name}__ask_name"
        script: list[Any] = [tool_calls(call(tool, {}, id="a")), "thanks"]
        source = McpToolSource(
            server,
            protocol=protocol,  # type: ignore[arg-type]
            connect_timeout=LOADED,
            elicitation=True,
        )
        async with source, al.tasks.AsyncTaskManager() as manager:
            tasks = manager.handle()
            agent = (
                al.Agent.builder()
                .model(al.testing.ScriptedModel(script))
                .add_tool_source(source)
                .task_manager(manager)
                .store(store)
                .build()
            )
            driver = await agent.start("s")
            driver.submit_input("go")
            asked = await driver.next()
            assert isinstance(asked, al.CallQuestion)
            await driver.release()
            assert await tasks.list_running() == []
            stored = await store.load("s")
            assert stored is not None
            assert stored.checkpoint["state"] == "AWAITING_ANSWER"
            resumed = await agent.resume(session_id="s")
            if protocol == "auto":
                again = await resumed.next()
                assert isinstance(again, al.CallQuestion)
                assert (again.id, again.question) == (asked.id, asked.question)
                again.answer({"name": "Ada"})
            else:
                assert resumed.state is al.DriverState.AFTER_TOOL_RESULT
            assert isinstance(await resumed.run_until_blocked(), al.Finished)
            assert await tasks.list_running() == []
    [result] = results(resumed)
    if protocol == "auto":
        assert result.metadata.get("mcp.structured_content") == {
            "action": "accept",
            "content": {"name": "Ada"},
        }
    else:
        assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT
