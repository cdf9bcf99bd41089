"""A real MCP server for the tests, built with the official ``mcp`` package.

Run: python mcp_server.py stdio
     python mcp_server.py http PORT

Environment: ``MCP_TEST_MARKS`` names a directory where tools leave marks
(``cancelled-<tool>`` when a call was cancelled, ``pid`` with the process id).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage


class TasksExtension(Extension):
    """Only advertises the 2026 tasks extension (``MCP_TEST_TASKS_EXTENSION=1``)."""

    identifier = "io.modelcontextprotocol/tasks"


server = MCPServer(
    "test-server",
    log_level="WARNING",
    extensions=[TasksExtension()] if os.environ.get("MCP_TEST_TASKS_EXTENSION") else None,
)
marks = Path(os.environ.get("MCP_TEST_MARKS", "."))


def mark(name: str, text: str = "") -> None:
    (marks / name).write_text(text)


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(name="dotted.name")
def dotted(text: str) -> str:
    """A tool whose MCP name has a dot."""
    return text.upper()


@server.tool()
def rich() -> types.CallToolResult:
    """Every kind of content block."""
    return types.CallToolResult(
        content=[
            types.TextContent(text="a picture:"),
            types.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="file:///notes/a.txt", text="note text", mime_type="text/plain"
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="file:///data/b.bin", blob="AAEC", mime_type="application/octet-stream"
                )
            ),
            types.ResourceLink(name="c.md", uri="file:///docs/c.md", mime_type="text/markdown"),
        ],
        structured_content={"pictures": 1},
    )


@server.tool()
def refuse(reason: str) -> types.CallToolResult:
    """A tool result with isError set."""
    return types.CallToolResult(
        content=[types.TextContent(text=f"refused: {reason}")], is_error=True
    )


def extra(word: str) -> str:
    """Added at run time by grow."""
    return word * 2


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool 'extra' and say the list changed."""
    server.add_tool(extra)
    await _list_changed(ctx)
    return "grown"


@server.tool()
async def shrink(ctx: Context) -> str:
    """Remove the tool 'add' and say the list changed."""
    server.remove_tool("add")
    await _list_changed(ctx)
    return "shrunk"


async def _list_changed(ctx: Context) -> None:
    if (ctx.protocol_version or "") >= "2026":
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep; leaves marks when it starts and if it is cancelled."""
    mark("started-slow")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark("cancelled-slow")
        raise
    return "slept"


@server.tool()
def freeze() -> str:
    """Block the whole server (a hung process)."""
    time.sleep(3600)
    return "never"


@server.tool()
async def die() -> str:
    """Kill this server process mid-call (SIGKILL)."""
    mark("died", str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)
    await anyio.sleep(10)
    return "never"


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
def annotated() -> types.CallToolResult:
    """Content blocks with annotations (and one without)."""
    return types.CallToolResult(
        content=[
            types.TextContent(
                text="for you", annotations=types.Annotations(audience=["user"], priority=0.9)
            ),
            types.TextContent(text="plain"),
            types.ImageContent(
                data="iVBORw0KGgo=",
                mime_type="image/png",
                annotations=types.Annotations(audience=["assistant"], priority=0.0),
            ),
            types.ResourceLink(
                name="c.md",
                uri="file:///docs/c.md",
                annotations=types.Annotations(last_modified="2026-01-02T03:04:05Z"),
            ),
        ]
    )


@server.tool()
def big(size: int) -> str:
    """A text result of ``size`` characters."""
    return "0123456789" * (size // 10) + "x" * (size % 10)


@server.tool()
def needs_task() -> str:
    """Listed with execution.taskSupport 'required'."""
    return "ran without a task"


@server.tool()
def may_task() -> str:
    """Listed with execution.taskSupport 'optional'."""
    return "ran without a task"


TASK_SUPPORT = {"needs_task": "required", "may_task": "optional"}
_list_tools = server.list_tools


async def _tools_with_task_support() -> list[types.Tool]:
    return [
        tool.model_copy(update={"execution": types.ToolExecution(task_support=support)})
        if (support := TASK_SUPPORT.get(tool.name))
        else tool
        for tool in await _list_tools()
    ]


server.list_tools = _tools_with_task_support  # type: ignore[method-assign]


@server.tool()
async def roots(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """The client's roots (roots/list), as JSON: the capability and the list."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return types.CallToolResult(
            content=[types.TextContent(text="no roots")],
            structured_content={"advertised": False, "roots": []},
        )
    if (ctx.protocol_version or "") >= "2026":
        answers = ctx.input_responses or {}
        if "roots" not in answers:
            return types.InputRequiredResult(input_requests={"roots": types.ListRootsRequest()})
        listed = answers["roots"]
        assert isinstance(listed, types.ListRootsResult)
    else:
        with warnings.catch_warnings():  # roots are deprecated in the 2026 spec, not in 2025
            warnings.simplefilter("ignore")
            listed = await ctx.session.list_roots()
    found = [
        root.model_dump(mode="json", by_alias=True, exclude_none=True) for root in listed.roots
    ]
    return types.CallToolResult(
        content=[types.TextContent(text="roots")],
        structured_content={"advertised": True, "roots": found},
    )


# -- resources and prompts ---------------------------------------------------------


@server.resource(
    "notes://readme",
    name="readme",
    title="Read me",
    description="The notes' read-me.",
    mime_type="text/plain",
    annotations=types.Annotations(audience=["user"], priority=0.5),
)
def readme() -> str:
    return "read me first"


@server.resource("data://bytes", name="bytes", mime_type="application/octet-stream")
def raw_bytes() -> bytes:
    return b"\x00\x01\x02"


@server.resource("notes://{topic}", name="note", description="The note on a topic.")
def note(topic: str) -> str:
    return f"a note on {topic}"


@server.prompt(title="Review", description="Review some code.")
def review(code: str, style: str = "short") -> str:
    return f"Review this ({style}): {code}"


@server.prompt()
def dialogue() -> list[Message]:
    """A prompt of two messages, one with an annotated image."""
    return [
        UserMessage(content=types.TextContent(text="what is this?")),
        AssistantMessage(
            content=types.ImageContent(
                data="iVBORw0KGgo=",
                mime_type="image/png",
                annotations=types.Annotations(audience=["user"]),
            ),
        ),
    ]


def later() -> str:
    return "added later"


@server.tool()
async def add_note(ctx: Context) -> str:
    """Add the resource notes://later and a prompt, and say both lists changed."""
    from mcp.server.mcpserver.resources import FunctionResource

    server.add_resource(FunctionResource.from_function(later, "notes://later", name="later"))
    server.prompt(name="later")(later)
    if (ctx.protocol_version or "") >= "2026":
        await ctx.notify_resources_changed()
        await ctx.notify_prompts_changed()
    else:
        await ctx.session.send_resource_list_changed()
        await ctx.session.send_prompt_list_changed()
    return "noted"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
