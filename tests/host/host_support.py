"""Tools, checkers and agents shared by the host tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import agentloop as al
import agentloop.permissions
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, chunked, tool_calls

USAGE = al.Usage(input_tokens=10, output_tokens=2)


class Add:
    """Adds two integers."""

    spec = al.ToolSpec(
        "add",
        "Add two integers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return str(request.input["a"] + request.input["b"])


class ReadNote:
    """Reads a note; proposes a filesystem read, so it needs approval below."""

    spec = al.ToolSpec(
        "read_note",
        "Read a note by name.",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def proposed_requests(
        self, request: al.ToolRequest
    ) -> Sequence[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead(f"/notes/{request.input['name']}")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.inputs.append(request.input)
        return {"groceries": "eggs, flour, milk"}.get(request.input["name"], "no such note")


class AskBeforeReading:
    """Reads need a human's yes."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def tour_script() -> list[Reply | str]:
    """Two tool rounds (the second needs approval), then a streamed answer."""
    return [
        tool_calls(call("add", {"a": 2, "b": 40}), usage=USAGE),
        tool_calls(call("read_note", {"name": "groceries"}), usage=USAGE),
        chunked("42, and ", "eggs, flour, milk.", usage=USAGE),
    ]


def make_agent(
    model: al.ModelAdapter,
    *,
    note: ReadNote | None = None,
    cancellation: al.CancellationHandle | None = None,
    mutator: al.transcript.LoopMutator | None = None,
) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Add()).with_tool(note or ReadNote()))
        .permissions(AskBeforeReading())
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "You are helpful.")])
    )
    if cancellation is not None:
        builder = builder.cancellation(cancellation)
    if mutator is not None:
        builder = builder.mutator(mutator)
    return builder.build()


def kinds(items: Sequence[al.Item]) -> list[str]:
    return [item.kind.value for item in items]


def last_result_text(transcript: Sequence[al.Item]) -> Any:
    results = [result for item in transcript for result in item.tool_results()]
    return results[-1].output
