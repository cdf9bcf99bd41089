"""server-everything's ``-async`` tools (bidirectional MCP tasks, 2025-11-25): the server
sends elicitation and sampling requests with ``params.task``, the client answers with a
task and asks the host (or the agent's model), the server polls ``tasks/get`` once a
second and reads ``tasks/result``. Over stdio and streamable HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_support import agent_on, outputs
from test_mcp_everything import everything

import agentloop as al
from agentloop.mcp import McpServer
from agentloop.testing import call, text, tool_calls

pytestmark = pytest.mark.anyio

ELICIT = "mcp__ev__trigger-elicitation-request-async"
SAMPLE = "mcp__ev__trigger-sampling-request-async"
CREATED = re.compile(r"Task created: ([0-9a-f-]{36})\n")
WAITING = "input_required - waiting for the host's answer"


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Iterator[McpServer]:
    with everything(str(request.param)) as served:
        yield served


def progress(
    output: str, last: str, waiting: str = WAITING, every: bool = False
) -> tuple[str, str]:
    """The task id and the server's progress lines, checked: created, then the polls
    that saw the task ``waiting`` (how many depends on how fast the answer comes), then
    ``last``. The server logs every poll (``every``) or the first, every tenth and
    the last."""
    found = CREATED.search(output)
    assert found is not None, output
    task_id = found.group(1)
    lines = output[found.start() :].split("\n\n")[0].split("\n")
    assert lines[0] == f"Task created: {task_id}"
    polls = [line.split(": ", 1) for line in lines[1:]]
    numbers = [int(number.removeprefix("Poll ")) for number, _ in polls]
    logged = [
        n for n in range(1, numbers[-1] + 1) if every or n == 1 or n % 10 == 0 or n == numbers[-1]
    ]
    assert numbers == logged
    assert [status for _, status in polls] == [waiting] * (len(polls) - 1) + [last]
    return task_id, "\n".join(lines)


def raw(value: dict[str, Any], task_id: str) -> str:
    meta = {"_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}}
    return json.dumps({**meta, **value}, indent=2)


async def test_an_accepted_async_elicitation_reaches_the_server(server: McpServer) -> None:
    script = [tool_calls(call(ELICIT, {}, id="a")), "thanks"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert (step.call_id, step.tool_name, step.question.kind) == (
            "a",
            ELICIT,
            "mcp.elicitation",
        )
        assert step.question.message == (
            "Please provide inputs for the following fields (async task demo):"
        )
        assert step.question.schema is not None
        assert step.question.schema["required"] == ["name"]
        with pytest.raises(al.InvalidInputError):
            step.answer({"favoriteColor": "Blue"})  # no name: refused here, nothing sent
        step.answer({"name": "Ada", "favoriteColor": "Blue", "agreeToTerms": True})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    task_id, lines = progress(output, "completed - the host answered: accept")
    content = {"name": "Ada", "favoriteColor": "Blue", "agreeToTerms": True}
    assert output == (
        "[COMPLETED] User provided the requested information!\nUser inputs:\n- Name: Ada\n"
        "- Favorite Color: Blue\n- Agreed to terms: true\n\nProgress:\n"
        + lines
        + "\n\nRaw result: "
        + raw({"action": "accept", "content": content}, task_id)
    )


@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("decline", "[DECLINED] User declined to provide the requested information."),
        ("cancel", "[CANCELLED] User cancelled the elicitation dialog."),
    ],
)
async def test_a_refused_async_elicitation_reaches_the_server(
    server: McpServer, action: str, said: str
) -> None:
    script = [tool_calls(call(ELICIT, {}, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        getattr(step, action)()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    task_id, lines = progress(output, f"completed - the host answered: {action}")
    assert output == (
        f"{said}\n\nProgress:\n{lines}\n\nRaw result: " + raw({"action": action}, task_id)
    )


def sampled(output: str, model: str, answer: str, who: str) -> str:
    waiting = WAITING if who == "the host" else "working - waiting for the agent's model"
    task_id, lines = progress(output, f"completed - {who} answered", waiting, every=True)
    result = {
        "role": "assistant",
        "content": {"type": "text", "text": answer},
        "model": model,
        "stopReason": "endTurn",
    }
    return (
        "[COMPLETED] Async sampling completed!\n\n**Progress:**\n"
        + lines
        + "\n\n**Result:**\n"
        + raw(result, task_id)
    )


async def test_async_sampling_answered_by_the_host(server: McpServer) -> None:
    script = [tool_calls(call(SAMPLE, {"prompt": "a haiku", "maxTokens": 20}, id="a")), "ok"]
    async with agent_on(server, script, sampling=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.kind == "mcp.sampling"
        assert step.question.data == {
            "server": "ev",
            "messages": [
                {
                    "role": "user",
                    "content": {
                        "type": "text",
                        "text": "Resource trigger-sampling-request-async context: a haiku",
                    },
                }
            ],
            "systemPrompt": "You are a helpful test server.",
            "temperature": 0.7,
            "maxTokens": 20,
        }
        step.answer({"text": "Old pond, frog jumps in.", "model": "host-model"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert output == sampled(output, "host-model", "Old pond, frog jumps in.", "the host")


async def test_async_sampling_answered_by_the_agents_model(server: McpServer) -> None:
    script = [
        tool_calls(call(SAMPLE, {"prompt": "a haiku"}, id="a")),
        text("Frog, pond, splash."),
        "ok",
    ]
    async with agent_on(server, script, sampling="model") as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert output == sampled(output, "scripted-model", "Frog, pond, splash.", "the agent's model")


async def test_a_declined_async_sampling_fails_the_task(server: McpServer) -> None:
    script = [tool_calls(call(SAMPLE, {"prompt": "a haiku"}, id="a")), "ok"]
    async with agent_on(server, script, sampling=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        step.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    refused = "the user rejected the sampling request (decline)"
    _, lines = progress(output, f"failed - {refused}", every=True)
    assert output == f"[FAILED] {refused}\n\nProgress:\n{lines}"
