"""A parent agent whose child agent (``Agent.as_tool``) needs approval for its one call:
shared by the tests that answer a child's approval over AG-UI, A2A and the inbox."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
from agentloop.testing import call, tool_calls

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
    "additionalProperties": False,
}


class Echo:
    """Echoes ``value``; proposes a filesystem read, so it needs approval."""

    spec = al.ToolSpec("echo", "Echo a value back.", ECHO_SCHEMA)

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def proposed_requests(self, request: al.ToolRequest) -> Sequence[Any]:
        return [al.permissions.FileSystemRead("/tmp/echo")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.inputs.append(request.input)
        return f"echoed {request.input['value']}"


class AskReads:
    """Asks approval for filesystem reads, allows the rest."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", "read /tmp/echo")
        return al.permissions.Allow()


def after_tool(first: Any, prefix: str) -> Any:
    """A scripted reply: ``first``, then ``prefix`` + the tool's output once it came."""

    def reply(request: al.model.TurnRequest) -> Any:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.TOOL:
            return prefix + str(last.parts[0].output)
        return first

    return reply


@asynccontextmanager
async def parent_agent(store: Any, echo: Echo) -> AsyncIterator[al.Agent]:
    """The parent (call ``p-1`` of ``helper``) over ``store``; its child calls ``echo``
    (call ``c-1``), which asks approval. Both share one entered task manager."""
    async with al.tasks.AsyncTaskManager() as manager:
        child = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(
                after_tool(tool_calls(call("echo", {"value": "x"}, id="c-1")), "child: ")))
            .add_tool_source(al.ToolRegistry().with_tool(echo))
            .permissions(AskReads())
            .task_manager(manager)
            .build()
        )  # fmt: skip
        yield (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(
                after_tool(tool_calls(call("helper", {"input": "go"}, id="p-1")), "parent: ")))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .store(store)
            .build()
        )  # fmt: skip
