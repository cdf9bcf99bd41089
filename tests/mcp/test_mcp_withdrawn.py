"""An MCP server's question the server stops waiting for is withdrawn: the server
cancels its elicitation request (``notifications/cancelled``) or goes away while the
host holds the ``CallQuestion``; ``next()`` goes on to the call's result, and a late
answer raises ``QuestionWithdrawnError`` and reaches nobody."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import HERE, agent_on, outputs, wait_for_file

import agentloop as al
from agentloop.mcp import StdioServer
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

REQUESTOR = StdioServer("req", sys.executable, [str(HERE / "task_requestor_server.py")])
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ELICIT = {"message": "Name?", "requestedSchema": SCHEMA}


def drive(*steps: dict[str, Any]) -> Any:
    return tool_calls(call("mcp__req__drive", {"steps": list(steps)}, id="a"))


def withdrawn_message(step: al.CallQuestion) -> str:
    return (
        f"cannot answer_question_for({step.id!r}): the question was withdrawn: call a "
        "(mcp__req__drive) stopped waiting for it before an answer (it ended, was "
        "cancelled or timed out); nothing was recorded; call next() to go on with the "
        "call's result"
    )


async def test_a_request_the_server_cancels_withdraws_its_question(tmp_path: Path) -> None:
    go, mark = tmp_path / "go", tmp_path / "abandoned"
    script = [
        drive(
            {"request": "elicitation/create", "params": ELICIT},
            {"wait": str(go)},
            {"abandon": "the user closed the page"},
            {"send": "ping", "params": {}},  # answered after the cancellation was read
            {"mark": str(mark)},
        ),
        "ok",
    ]
    async with agent_on(REQUESTOR, script, protocol="legacy", elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.message == "Name?"
        await anyio.Path(go).write_text("go")
        await wait_for_file(mark)
        with pytest.raises(al.QuestionWithdrawnError) as raised:
            step.answer({"name": "late"})
        assert str(raised.value) == withdrawn_message(step)
        after = await driver.next()
        assert isinstance(after, al.AfterToolResult)
        assert isinstance(await driver.next(), al.Finished)
    assert [json.loads(output) for output in outputs(driver)] == [[{"result": {}}]]
    al.testing.assert_transcript_valid(list(driver.snapshot().transcript))


async def test_a_server_that_goes_away_withdraws_its_question(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = [
        drive(
            {"request": "elicitation/create", "params": ELICIT},
            {"wait": str(go)},
            {"exit": 3},
        ),
        "ok",
    ]
    async with agent_on(REQUESTOR, script, protocol="legacy", elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        await anyio.Path(go).write_text("go")
        with anyio.fail_after(15):
            after = await driver.next()
            while isinstance(after, al.CallQuestion):  # until this process saw the exit
                assert after == step
                await anyio.sleep(0.02)
                after = await driver.next()
        assert isinstance(after, al.AfterToolResult)
        with pytest.raises(al.QuestionWithdrawnError) as raised:
            step.decline()
        assert str(raised.value) == withdrawn_message(step)
        assert isinstance(await driver.next(), al.Finished)
    assert outputs(driver) == [
        "tool 'mcp__req__drive' failed: McpConnectionError: MCP server 'req' went away "
        "during tools/call 'drive': MCPError: Connection closed; the next call reconnects"
    ]
    al.testing.assert_transcript_valid(list(driver.snapshot().transcript))
