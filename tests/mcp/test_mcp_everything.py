"""Against the reference MCP test server, ``@modelcontextprotocol/server-everything``
(run by node over stdio and streamable HTTP): its tools, resources and prompts, and the
elicitation, sampling and roots tools it offers only to a client advertising them.

``scripts/install_node_clients.sh`` (run by ``make test``) installs it into
``tests/ui/node/node_modules``; the tests fail, never skip, when it is missing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp_support import LOADED, START_TIMEOUT, agent_on, free_port, outputs

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.mcp import HttpServer, McpServer, McpToolSource, StdioServer
from agentloop.testing import call, text, tool_calls

pytestmark = pytest.mark.anyio

PACKAGE = (
    Path(__file__).resolve().parents[1]
    / "ui" / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything"
)  # fmt: skip
PLAIN_TOOLS = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "simulate-research-query",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
]


def node_and_entry() -> tuple[str, str]:
    node = shutil.which("node")
    assert node is not None, "node is not installed (apt-get install -y nodejs npm)"
    entry = PACKAGE / "dist" / "index.js"
    assert entry.is_file(), (
        "@modelcontextprotocol/server-everything is not installed: run "
        "sh scripts/install_node_clients.sh"
    )
    return node, str(entry)


@contextmanager
def everything(transport: str) -> Iterator[McpServer]:
    """server-everything over ``transport`` ("stdio", or "http" on a free port)."""
    node, entry = node_and_entry()
    if transport == "stdio":
        yield StdioServer("ev", node, [entry, "stdio"])
        return
    port = free_port()
    process = subprocess.Popen(
        [node, entry, "streamableHttp"],
        env={"PORT": str(port), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(process, port)
        yield HttpServer("ev", f"http://127.0.0.1:{port}/mcp")
    finally:
        process.kill()
        process.wait(timeout=10)


def wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server-everything exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError("server-everything did not listen in time") from None
            time.sleep(0.05)


def sampled(model: str, answer: str) -> str:
    """What trigger-sampling-request says the client answered."""
    result = {
        "model": model,
        "stopReason": "endTurn",
        "role": "assistant",
        "content": {"type": "text", "text": answer},
    }
    return "LLM sampling result: \n" + json.dumps(result, indent=2)


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Iterator[McpServer]:
    with everything(str(request.param)) as served:
        yield served


async def test_plain_tools_are_offered_and_the_asking_ones_only_when_advertised(
    server: McpServer, tmp_path: Path
) -> None:
    async with McpToolSource(server, connect_timeout=LOADED) as source:
        plain = sorted(spec.name for spec in source.specs())
        echoed = await source.call_tool("echo", {"message": "hi there"})
        summed = await source.call_tool("get-sum", {"a": 2, "b": 3.5})
    async with McpToolSource(
        server, connect_timeout=LOADED, elicitation=True, sampling=True, roots=[tmp_path]
    ) as source:
        advertised = sorted(spec.name for spec in source.specs())
    assert plain == [f"mcp__ev__{name}" for name in PLAIN_TOOLS]
    assert advertised == sorted(
        f"mcp__ev__{name}"
        for name in [
            *PLAIN_TOOLS,
            "get-roots-list",
            "trigger-elicitation-request",
            "trigger-elicitation-request-async",
            "trigger-sampling-request",
            "trigger-sampling-request-async",
            "trigger-url-elicitation",
        ]
    )
    assert (echoed.value, echoed.is_error) == ("Echo: hi there", False)
    assert (summed.value, summed.is_error) == ("The sum of 2 and 3.5 is 5.5.", False)


async def test_resources_and_prompts_list_read_and_get(server: McpServer) -> None:
    docs = PACKAGE / "dist" / "docs"
    async with McpToolSource(server, connect_timeout=LOADED) as source:
        listed = await source.list_resources()
        templates = await source.list_resource_templates()
        architecture = await source.read_resource("demo://resource/static/document/architecture.md")
        dynamic = await source.read_resource("demo://resource/dynamic/text/3")
        prompts = await source.list_prompts()
        simple = await source.get_prompt("simple-prompt")
        filled = await source.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
    names = sorted(path.name for path in docs.glob("*.md"))
    assert [(r.uri, r.name, r.mime_type) for r in listed] == [
        (f"demo://resource/static/document/{name}", name, "text/markdown") for name in names
    ]
    assert [t.uri_template for t in templates] == [
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    ]
    assert architecture == [
        al.TextPart(
            text=(docs / "architecture.md").read_text(),
            metadata={
                "mcp.uri": "demo://resource/static/document/architecture.md",
                "mcp.mime_type": "text/markdown",
            },
        )
    ]
    [part] = dynamic
    assert isinstance(part, al.TextPart)
    assert part.text.startswith("Resource 3: This is a plaintext resource created at ")
    assert part.metadata == {
        "mcp.uri": "demo://resource/dynamic/text/3",
        "mcp.mime_type": "text/plain",
    }
    assert [p.name for p in prompts] == [
        "simple-prompt",
        "args-prompt",
        "completable-prompt",
        "resource-prompt",
    ]
    assert [(a.name, a.required) for a in prompts[1].arguments] == [
        ("city", True),
        ("state", False),
    ]
    assert [(m.role, m.part) for m in simple.messages] == [
        ("user", al.TextPart(text="This is a simple prompt without arguments."))
    ]
    assert [(m.role, m.part) for m in filled.messages] == [
        ("user", al.TextPart(text="What's weather in Paris, TX?"))
    ]


async def test_the_roots_tool_lists_our_roots(server: McpServer, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    async with McpToolSource(server, connect_timeout=LOADED, roots=[tmp_path / "work"]) as source:
        listed = await source.call_tool("get-roots-list", {})
    work = tmp_path / "work"
    assert (listed.value, listed.is_error) == (
        f"Current MCP Roots (1 total):\n\n1. {work}\n   URI: {work.resolve().as_uri()}\n\n"
        "Note: This server demonstrates the roots protocol capability but doesn't actually "
        "access files. The roots are provided by the MCP client and can be used by servers "
        "that need file system access.",
        False,
    )


async def test_an_accepted_elicitation_reaches_the_server(server: McpServer) -> None:
    tool = "mcp__ev__trigger-elicitation-request"
    script = [tool_calls(call(tool, {}, id="a")), "thanks"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert (step.call_id, step.tool_name) == ("a", tool)
        assert step.question.kind == "mcp.elicitation"
        assert step.question.message == "Please provide inputs for the following fields:"
        assert step.question.schema is not None
        assert step.question.schema["required"] == ["name"]
        with pytest.raises(al.InvalidInputError):
            step.answer({"check": True})  # no name: refused here, nothing sent
        step.answer({"name": "Ada", "check": True, "integer": 7})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert output == (
        "✅ User provided the requested information!\nUser inputs:\n- Name: Ada\n"
        "- Agreed to terms: true\n- Favorite Integer: 7\n\nRaw result: "
        + json.dumps(
            {"action": "accept", "content": {"name": "Ada", "check": True, "integer": 7}}, indent=2
        )
    )


async def test_a_declined_elicitation_reaches_the_server(server: McpServer) -> None:
    script = [tool_calls(call("mcp__ev__trigger-elicitation-request", {}, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        step.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert output == (
        "❌ User declined to provide the requested information.\n\nRaw result: "
        + json.dumps({"action": "decline"}, indent=2)
    )


async def test_sampling_answered_by_the_host(server: McpServer) -> None:
    tool = "mcp__ev__trigger-sampling-request"
    script = [tool_calls(call(tool, {"prompt": "a haiku", "maxTokens": 20}, id="a")), "ok"]
    async with agent_on(server, script, sampling=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.kind == "mcp.sampling"
        assert step.question.data["systemPrompt"] == "You are a helpful test server."
        assert step.question.data["maxTokens"] == 20
        assert step.question.data["messages"] == [
            {
                "role": "user",
                "content": {
                    "type": "text",
                    "text": "Resource trigger-sampling-request context: a haiku",
                },
            }
        ]
        step.answer({"text": "Old pond, frog jumps in.", "model": "host-model"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert output == sampled("host-model", "Old pond, frog jumps in.")


async def test_sampling_answered_by_the_agents_model(server: McpServer) -> None:
    tool = "mcp__ev__trigger-sampling-request"
    script = [
        tool_calls(call(tool, {"prompt": "a haiku"}, id="a")),
        text("Frog, pond, splash."),
        "ok",
    ]
    async with agent_on(server, script, sampling="model") as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert output == sampled("scripted-model", "Frog, pond, splash.")


@pytest.mark.parametrize(
    ("options", "asking"),
    [
        (
            {"elicitation": True},
            [
                "trigger-elicitation-request",
                "trigger-elicitation-request-async",
                "trigger-url-elicitation",
            ],
        ),
        ({"sampling": True}, ["trigger-sampling-request", "trigger-sampling-request-async"]),
        ({"sampling": "model"}, ["trigger-sampling-request", "trigger-sampling-request-async"]),
        ({"roots": []}, ["get-roots-list"]),
    ],
)
async def test_each_capability_offers_its_own_tools(
    options: dict[str, Any], asking: list[str]
) -> None:
    with everything("stdio") as server:
        async with McpToolSource(server, connect_timeout=LOADED, **options) as source:
            names = sorted(spec.name for spec in source.specs())
    assert names == sorted(f"mcp__ev__{name}" for name in [*PLAIN_TOOLS, *asking])


async def test_a_cancelled_elicitation_reaches_the_server(server: McpServer) -> None:
    script = [tool_calls(call("mcp__ev__trigger-elicitation-request", {}, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        step.cancel()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        "\u26a0\ufe0f User cancelled the elicitation dialog.\n\nRaw result: "
        + json.dumps({"action": "cancel"}, indent=2)
    ]


async def test_a_url_elicitation_is_a_question_with_the_url(server: McpServer) -> None:
    tool = "mcp__ev__trigger-url-elicitation"
    arguments = {"url": "https://example.com/consent", "elicitationId": "e-7"}
    script = [tool_calls(call(tool, arguments, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        question = step.question
        assert (question.kind, question.message, question.schema) == (
            "mcp.elicitation_url",
            "Please open the link to complete this action.",
            None,
        )
        assert question.data == {
            "server": "ev",
            "mode": "url",
            "message": "Please open the link to complete this action.",
            "url": "https://example.com/consent",
            "elicitationId": "e-7",
        }
        step.answer()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        "\u2705 User completed the URL elicitation flow.\nElicitation ID: e-7\n"
        "URL: https://example.com/consent\n\nRaw result: "
        + json.dumps({"action": "accept"}, indent=2)
    ]


async def test_a_task_tool_asks_for_clarification_while_it_runs(server: McpServer) -> None:
    """simulate-research-query is a task tool (taskSupport "required"): polled to its end;
    its elicitation comes through tasks/result while the task is input_required."""
    tool = "mcp__ev__simulate-research-query"
    script = [tool_calls(call(tool, {"topic": "python", "ambiguous": True}, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question.message == (
            'The research query "python" could have multiple interpretations. '
            "Please clarify what you're looking for:"
        )
        assert step.question.schema is not None
        choices = step.question.schema["properties"]["interpretation"]["oneOf"]
        assert [choice["const"] for choice in choices] == ["programming", "snake", "comedy"]
        with pytest.raises(al.InvalidInputError):
            step.answer({"interpretation": "the language"})  # not one of the choices
        step.answer({"interpretation": "snake"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [result] = [r for item in driver.snapshot().transcript for r in item.tool_results()]
    assert isinstance(result.output, str)
    assert result.output.startswith(
        "# Research Report: python (snake)\n\n## Research Parameters\n- **Topic**: python\n"
        "- **Clarification**: snake\n"
    )
    assert "Status progressed: `working` → `input_required` → `working` → `completed`" in (
        result.output
    )
    # The task's state when the client turned to tasks/result (docs/mcp.md "Tasks").
    assert {
        key: value for key, value in result.metadata["mcp.task"].items() if key != "taskId"
    } == {
        "status": "input_required",
        "statusMessage": 'Found multiple interpretations for "python". Requesting clarification...',
    }


async def test_a_url_elicitation_required_error_is_asked_and_the_call_run_again(
    server: McpServer,
) -> None:
    """errorPath: the first call is refused with -32042 naming a prerequisite URL; once
    the host accepts it the call runs again and asks its own URL (the request path)."""
    tool = "mcp__ev__trigger-url-elicitation"
    arguments = {"url": "https://example.com/consent", "elicitationId": "e-8", "errorPath": True}
    script = [tool_calls(call(tool, arguments, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        first = await driver.next()
        assert isinstance(first, al.CallQuestion)
        assert (first.question.kind, first.question.data["url"]) == (
            "mcp.elicitation_url",
            "https://modelcontextprotocol.io",
        )
        assert first.question.message == (
            "Open this link to satisfy the prerequisite, then retry the request."
        )
        first.answer()
        second = await driver.next()
        assert isinstance(second, al.CallQuestion)
        assert (second.call_id, second.question.data["url"]) == (
            "a",
            "https://example.com/consent",
        )
        second.answer()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        "\u2705 User completed the URL elicitation flow.\nElicitation ID: e-8\n"
        "URL: https://example.com/consent\n\nRaw result: "
        + json.dumps({"action": "accept"}, indent=2)
    ]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_refused_required_url_fails_the_call_unrun(server: McpServer, action: str) -> None:
    tool = "mcp__ev__trigger-url-elicitation"
    arguments = {"url": "https://example.com/consent", "errorPath": True}
    script = [tool_calls(call(tool, arguments, id="a")), "ok"]
    async with agent_on(server, script, elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        getattr(step, action)()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        f"tool {tool!r} failed: McpCallError: MCP server 'ev' requires a visit to "
        "https://modelcontextprotocol.io before tools/call 'trigger-url-elicitation'; the "
        f"host answered {action}, so the call was not run"
    ]


async def test_a_required_url_that_cannot_be_asked_fails_the_call() -> None:
    """The default SimpleTaskManager runs calls inline: nobody can be asked."""
    tool = "mcp__ev__trigger-url-elicitation"
    arguments = {"url": "https://example.com/consent", "errorPath": True}
    with everything("stdio") as server:
        async with McpToolSource(server, connect_timeout=LOADED, elicitation=True) as source:
            agent = (
                al.Agent.builder()
                .model(al.testing.ScriptedModel([tool_calls(call(tool, arguments, id="a")), "ok"]))
                .add_tool_source(source)
                .input([al.Item.text(al.ItemKind.USER, "go")])
                .build()
            )
            driver = await agent.start("s")
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        f"tool {tool!r} failed: McpCallError: MCP server 'ev' requires a visit to "
        "https://modelcontextprotocol.io before tools/call 'trigger-url-elicitation', which "
        "could not be asked: cannot ask the host from call a: it runs inline in the driver's "
        "step, so next() cannot return the question while it runs; build the agent with "
        ".task_manager(AsyncTaskManager()) entered around the driver, so each call runs in a "
        "task of its own"
    ]


async def test_resources_and_prompts_as_tools_for_the_model(server: McpServer) -> None:
    script = [
        tool_calls(
            call("mcp__ev__read_resource", {"uri": "demo://resource/dynamic/text/4"}, id="r"),
            call(
                "mcp__ev__get_prompt",
                {"name": "args-prompt", "arguments": {"city": "Oslo"}},
                id="p",
            ),
        ),
        "ok",
    ]
    async with agent_on(server, script, feature_tools=True) as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    read, prompt = outputs(driver)
    assert isinstance(read, str)
    assert read.startswith("Resource 4: This is a plaintext resource created at ")
    assert prompt == "[user] What's weather in Oslo?"


def url_gate() -> StdioServer:
    return StdioServer("gate", sys.executable, [str(Path(__file__).parent / "url_gate_server.py")])


async def test_a_server_that_keeps_requiring_urls_is_given_up_on() -> None:
    script = [tool_calls(call("mcp__gate__always", {}, id="a")), "ok"]
    async with agent_on(url_gate(), script, protocol="legacy", elicitation=True) as driver:
        asked = 0
        step = await driver.next()
        while isinstance(step, al.CallQuestion):
            assert step.question.data["url"] == "https://example.com/gate"
            asked += 1
            step.answer()
            step = await driver.next()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert asked == 10
    assert outputs(driver) == [
        "tool 'mcp__gate__always' failed: McpCallError: MCP server 'gate' required URL "
        "elicitations more than 10 times in tools/call 'always'"
    ]


async def test_a_malformed_url_elicitation_required_error_fails_the_call() -> None:
    script = [tool_calls(call("mcp__gate__malformed", {}, id="a")), "ok"]
    async with agent_on(url_gate(), script, protocol="legacy", elicitation=True) as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [output] = outputs(driver)
    assert isinstance(output, str)
    assert output.startswith(
        "tool 'mcp__gate__malformed' failed: McpCallError: MCP server 'gate' refused "
        "tools/call 'malformed' with a malformed URL elicitation required error (sign in "
        "first): 1 validation error for list[ElicitRequestURLParams]"
    )


async def test_without_elicitation_the_servers_error_fails_the_call() -> None:
    script = [tool_calls(call("mcp__gate__always", {}, id="a")), "ok"]
    async with agent_on(url_gate(), script, protocol="legacy") as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        "tool 'mcp__gate__always' failed: McpCallError: MCP server 'gate' failed tools/call "
        "'always': MCPError: sign in first"
    ]
