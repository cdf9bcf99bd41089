"""Elicitation and sampling: a server's requests during a call become CallQuestion steps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import LOADED, agent_on, http_server, outputs, stdio_server, wait_for_file

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.mcp import McpServer, McpToolSource
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}
PROTOCOLS = ["legacy", "auto"]  # 2025-11-25: a request mid-call; 2026-07-28: input required


@contextmanager
def served(kind: str, marks: Path) -> Iterator[McpServer]:
    if kind == "stdio":
        yield stdio_server(marks)
    else:
        with http_server(marks) as server:
            yield server


def structured(driver: al.LoopDriver) -> list[Any]:
    return [
        part.metadata.get("mcp.structured_content")
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_form_elicitation_is_a_question_the_host_answers(
    tmp_path: Path, transport: str, protocol: str
) -> None:
    script = [tool_calls(call("mcp__srv__ask_name", {}, id="a")), "thanks"]
    with served(transport, tmp_path) as server:
        name = server.name
        script = [tool_calls(call(f"mcp__{name}__ask_name", {}, id="a")), "thanks"]
        async with agent_on(server, script, protocol=protocol, elicitation=True) as driver:
            step = await driver.next()
            assert isinstance(step, al.CallQuestion)
            assert (step.call_id, step.tool_name) == ("a", f"mcp__{name}__ask_name")
            question = step.question
            assert (question.kind, question.message, question.schema) == (
                "mcp.elicitation",
                "What is your name?",
                NAME_SCHEMA,
            )
            assert question.data == {
                "server": name,
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": NAME_SCHEMA,
            }
            with pytest.raises(al.InvalidInputError):
                step.answer({"age": 3})  # refused against the server's schema: nothing sent
            step.answer({"name": "Ada", "age": 36})
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert structured(driver) == [{"action": "accept", "content": {"name": "Ada", "age": 36}}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declined_and_cancelled_elicitations_reach_the_server(
    tmp_path: Path, protocol: str, action: str
) -> None:
    server = stdio_server(tmp_path)
    script = [tool_calls(call("mcp__srv__ask_name", {}, id="a")), "ok"]
    async with agent_on(server, script, protocol=protocol, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        getattr(step, action)()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert structured(driver) == [{"action": action, "content": None}]
    assert await wait_for_file(tmp_path / "elicited") == action


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_url_elicitation_carries_the_url_and_accepts_without_content(
    tmp_path: Path, protocol: str
) -> None:
    server = stdio_server(tmp_path)
    script = [tool_calls(call("mcp__srv__sign_in", {}, id="a")), "ok"]
    async with agent_on(server, script, protocol=protocol, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.kind == "mcp.elicitation_url"
        assert step.question.schema is None
        assert step.question.data["url"] == "https://example.com/sign-in?session=7"
        assert step.question.data["mode"] == "url"
        with pytest.raises(al.InvalidInputError):
            step.answer({"visited": True})
        step.answer()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert structured(driver) == [{"action": "accept", "content": None}]


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_sampling_is_a_question_answered_with_the_models_text(
    tmp_path: Path, transport: str, protocol: str
) -> None:
    with served(transport, tmp_path) as server:
        tool = f"mcp__{server.name}__summarize"
        script = [tool_calls(call(tool, {"text": "a long story"}, id="a")), "ok"]
        async with agent_on(server, script, protocol=protocol, sampling=True) as driver:
            step = await driver.next()
            assert isinstance(step, al.CallQuestion)
            question = step.question
            assert question.kind == "mcp.sampling"
            assert question.message == (
                f"MCP server {server.name!r} asks for a model answer to: a long story"
            )
            assert question.data["systemPrompt"] == "Summarize in five words."
            assert question.data["messages"] == [
                {"role": "user", "content": {"type": "text", "text": "a long story"}}
            ]
            step.answer({"text": "A story, told at length.", "model": "host-model"})
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert structured(driver) == [{"text": "A story, told at length.", "model": "host-model"}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_declined_sampling_request_fails_the_servers_call(
    tmp_path: Path, protocol: str
) -> None:
    server = stdio_server(tmp_path)
    script = [tool_calls(call("mcp__srv__summarize", {"text": "x"}, id="a")), "ok"]
    async with agent_on(server, script, protocol=protocol, sampling=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        step.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert "the user rejected the sampling request (decline)" in json.dumps(output)


async def test_without_the_flags_no_capability_is_advertised(tmp_path: Path) -> None:
    server = stdio_server(tmp_path)
    script = [tool_calls(call("mcp__srv__ask_name", {}, id="a")), "ok"]
    async with agent_on(server, script, protocol="legacy") as driver:
        step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
    [output] = outputs(driver)
    assert "elicitation" in json.dumps(output).lower()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_restart_while_an_elicitation_waits(tmp_path: Path, protocol: str) -> None:
    """2026 era: the question is asked again after the restart and the call goes on from
    the answer with the saved request state; 2025 era: the call is answered in doubt."""
    from agentloop.store import MemorySessionStore

    store = MemorySessionStore()
    with http_server(tmp_path) as server:
        tool = f"mcp__{server.name}__ask_name"

        def agent(
            source: McpToolSource, manager: al.tasks.AsyncTaskManager, script: list[Any]
        ) -> al.Agent:
            return (
                al.Agent.builder()
                .model(al.testing.ScriptedModel(script))
                .add_tool_source(source)
                .task_manager(manager)
                .store(store)
                .input([al.Item.text(al.ItemKind.USER, "go")])
                .build()
            )

        first = McpToolSource(server, protocol=protocol, connect_timeout=LOADED, elicitation=True)  # type: ignore[arg-type]
        async with first, al.tasks.AsyncTaskManager() as manager:
            driver = await agent(first, manager, [tool_calls(call(tool, {}, id="a"))]).start("s")
            asked = await driver.next()
            assert isinstance(asked, al.CallQuestion)
        # The process is gone (its source, task manager and the waiting call with it).
        stored = await store.load("s")
        assert stored is not None
        assert stored.checkpoint["state"] == "AWAITING_ANSWER"
        second = McpToolSource(server, protocol=protocol, connect_timeout=LOADED, elicitation=True)  # type: ignore[arg-type]
        async with second, al.tasks.AsyncTaskManager() as manager:
            driver = await agent(second, manager, ["thanks"]).resume(session_id="s")
            if protocol == "auto":
                assert driver.state is al.DriverState.AWAITING_ANSWER
                again = await driver.next()
                assert isinstance(again, al.CallQuestion)
                assert (again.id, again.call_id, again.question.message) == (
                    asked.id,
                    "a",
                    "What is your name?",
                )
                # The server's sealed request state, saved with the question, sent back.
                assert again.question == asked.question
                assert again.question.resume["key"] == "name"
                again.answer({"name": "Ada"})
            else:
                assert driver.state is al.DriverState.AFTER_TOOL_RESULT
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    if protocol == "auto":
        assert structured(driver) == [{"action": "accept", "content": {"name": "Ada"}}]
    else:
        [result] = [
            part
            for item in driver.snapshot().transcript
            for part in item.parts
            if isinstance(part, al.ToolResultPart)
        ]
        assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_sampling_answered_by_the_agents_own_model(tmp_path: Path, protocol: str) -> None:
    from agentloop.testing import text

    server = stdio_server(tmp_path)
    script = [
        tool_calls(call("mcp__srv__summarize", {"text": "a long story"}, id="a")),
        text("A story, told long.", usage=al.Usage(input_tokens=5, output_tokens=4)),
        "ok",
    ]
    async with agent_on(server, script, protocol=protocol, sampling="model") as driver:
        finished = await driver.run_until_blocked()  # no question reaches the host
        assert isinstance(finished, al.Finished)
    assert structured(driver) == [{"text": "A story, told long.", "model": "scripted-model"}]
    assert finished.result.usage == al.Usage(input_tokens=5, output_tokens=4)


def test_sampling_takes_only_true_false_or_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sampling must be") as raised:
        McpToolSource(stdio_server(tmp_path), sampling="yes")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "McpToolSource sampling must be True (the host answers), 'model' (the agent's own "
        "model answers) or False, got 'yes'"
    )


async def test_a_call_run_inline_cannot_ask_and_the_server_hears_why(tmp_path: Path) -> None:
    server = stdio_server(tmp_path)
    source = McpToolSource(server, protocol="legacy", connect_timeout=LOADED, elicitation=True)
    async with source:
        agent = (
            al.Agent.builder()  # the default SimpleTaskManager: calls run inside next()
            .model(
                al.testing.ScriptedModel([tool_calls(call("mcp__srv__ask_name", {}, id="a")), "ok"])
            )
            .add_tool_source(source)
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        driver = await agent.start("s")
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert "cannot ask the host from call a: it runs inline in the driver's step" in json.dumps(
        output
    )


async def test_the_time_a_question_waits_does_not_count_against_call_timeout(
    tmp_path: Path,
) -> None:
    server = stdio_server(tmp_path)
    script = [tool_calls(call("mcp__srv__ask_name", {}, id="a")), "ok"]
    async with agent_on(
        server, script, protocol="legacy", elicitation=True, call_timeout=3.0
    ) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        await anyio.sleep(4.0)  # the host takes longer than the call may
        step.answer({"name": "Slow"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert structured(driver) == [{"action": "accept", "content": {"name": "Slow"}}]
