"""Real MCP server processes for the tests: stdio configs and an HTTP server on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
import agentloop.observe
import agentloop.tasks
import agentloop.testing
from agentloop.mcp import HttpServer, McpServer, McpToolSource, StdioServer

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "mcp_server.py")
RAW_SERVER = str(HERE / "raw_server.py")
TASK_SERVER = str(HERE / "task_server.py")
EXT_TASK_SERVER = str(HERE / "ext_task_server.py")
START_TIMEOUT = 30.0


def stdio_server(marks: Path, name: str = "srv") -> StdioServer:
    """The test server over stdio; tools leave marks in ``marks``."""
    return StdioServer(name, sys.executable, [SERVER, "stdio"], env={"MCP_TEST_MARKS": str(marks)})


def task_server(marks: Path, *options: str, name: str = "tsk") -> StdioServer:
    """The task test server over stdio (``options``: ``"notasks"``)."""
    return StdioServer(
        name, sys.executable, [TASK_SERVER, "stdio", *options], env={"MCP_TEST_MARKS": str(marks)}
    )


def ext_task_server(marks: Path, name: str = "ext") -> StdioServer:
    """The 2026-07-28 tasks extension test server over stdio."""
    return StdioServer(
        name, sys.executable, [EXT_TASK_SERVER, "stdio"], env={"MCP_TEST_MARKS": str(marks)}
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(marks: Path, name: str = "web", script: str = SERVER) -> Iterator[HttpServer]:
    """The test server (or ``script``) over streamable HTTP on a free port of 127.0.0.1
    (stopped after)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, script, "http", str(port)],
        env={"MCP_TEST_MARKS": str(marks), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the HTTP MCP server exited with {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("the HTTP MCP server did not listen in time") from None
                time.sleep(0.05)
        yield HttpServer(name, f"http://127.0.0.1:{port}/mcp")
    finally:
        process.kill()
        process.wait(timeout=10)


async def wait_for_file(path: Path, limit: float = 15.0) -> str:
    """The file's text once it exists; fails after ``limit`` seconds."""
    with anyio.fail_after(limit):
        while not await anyio.Path(path).exists():  # noqa: ASYNC110 (another process writes it)
            await anyio.sleep(0.02)
    return await anyio.Path(path).read_text()


class Events:
    """Records every event."""

    def __init__(self) -> None:
        self.events: list[al.observe.AgentEvent] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[al.observe.AgentEvent]) -> list[al.observe.AgentEvent]:
        return [event for event in self.events if isinstance(event, kind)]


def results(driver: al.LoopDriver) -> list[al.ToolResultPart]:
    return [r for item in driver.snapshot().transcript for r in item.tool_results()]


LOADED = 60.0
"""Seconds a test server may take to start on a loaded machine (connect timeout)."""


@asynccontextmanager
async def agent_on(
    server: McpServer, script: list[Any], **options: Any
) -> AsyncIterator[al.LoopDriver]:
    """A started driver over ``server`` (an entered ``AsyncTaskManager``, so calls may ask
    the host), its model scripted by ``script``; ``options`` go to ``McpToolSource``."""
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
    """The outputs of the driver's tool results, in transcript order."""
    return [
        part.output
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
