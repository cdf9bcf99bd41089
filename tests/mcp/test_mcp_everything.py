"""Against the reference MCP test server, ``@modelcontextprotocol/server-everything``
(run by node over stdio and streamable HTTP): its tools, resources and prompts, and the
elicitation, sampling and roots tools it offers only to a client advertising them.

``scripts/install_node_clients.sh`` (run by ``make test``) installs it into
``tests/ui/node/node_modules``; the tests fail, never skip, when it is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp_support import START_TIMEOUT, free_port

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.mcp import HttpServer, McpServer, McpToolSource, StdioServer
from agentloop.testing import call, text, tool_calls

pytestmark = pytest.mark.anyio

LOADED = 60.0
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
    import socket

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


@asynccontextmanager
async def agent_on(
    server: McpServer, script: list[Any], **options: Any
) -> AsyncIterator[al.LoopDriver]:
    source = McpToolSource(server, connect_timeout=LOADED, **options)
    async with source, al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(source)
            .task_manager(manager)
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        yield await agent.start("s")


def outputs(driver: al.LoopDriver) -> list[Any]:
    return [
        part.output
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


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
            "trigger-sampling-request",
            "trigger-url-elicitation",
        ]
    )
    assert (echoed.value, echoed.is_error) == ("Echo: hi there", False)
    assert (summed.value, summed.is_error) == ("The sum of 2 and 3.5 is 5.5.", False)
