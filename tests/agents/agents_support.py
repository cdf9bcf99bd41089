"""Agents, tools and checks shared by the nested-agent tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import agentloop as al
import agentloop.agents
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.transcript
from agentloop.testing import call, tool_calls


class EchoTool:
    """Answers its ``value`` input; proposes a filesystem read (approval under ``AskReads``)."""

    spec = al.ToolSpec(
        "echo",
        "Echo a value back.",
        {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
    )

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def proposed_requests(self, request: al.ToolRequest) -> Sequence[Any]:
        return [al.permissions.FileSystemRead("/tmp/echo")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.inputs.append(request.input)
        return str(request.input["value"])


class AskReads:
    """Asks the host before every filesystem read."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


def results(transcript: Sequence[al.Item]) -> list[tuple[str, Any, bool]]:
    """Every tool result of ``transcript``: (call id, output, is_error)."""
    return [
        (part.call_id, part.output, part.is_error)
        for item in transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


def assert_answered_once(transcript: Sequence[al.Item]) -> None:
    """Valid, and every call answered by exactly one result."""
    al.testing.assert_transcript_valid(list(transcript))
    calls = [p.id for item in transcript for p in item.parts if isinstance(p, al.ToolCallPart)]
    answered = [call_id for call_id, _, _ in results(transcript)]
    assert sorted(calls) == sorted(answered)


def child_agent(script: Any, *tools: Any, manager: Any = None, output: Any = None) -> al.Agent:
    registry = al.ToolRegistry()
    for tool in tools or (EchoTool(),):
        registry = registry.with_tool(tool)
    builder = al.Agent.builder().model(al.testing.ScriptedModel(script))
    builder = builder.add_tool_source(registry).permissions(AskReads())
    if manager is not None:
        builder = builder.task_manager(manager)
    if output is not None:
        builder = builder.output(output)
    return builder.build()


def echo_then(answer: str, call_id: str = "c-1", value: str = "x") -> Any:
    """A child model: one echo call, then ``answer`` once the transcript holds a result
    (decided from the request, so a restored child's new model goes on the same way)."""

    def reply(request: al.model.TurnRequest) -> Any:
        if any(item.kind is al.ItemKind.TOOL for item in request.transcript):
            return answer
        return tool_calls(call("echo", {"value": value}, id=call_id))

    return reply


def then(first: Any, answer: str) -> Any:
    """A model that replies ``first`` (a tool-call reply), then ``answer`` after a result."""

    def reply(request: al.model.TurnRequest) -> Any:
        if any(item.kind is al.ItemKind.TOOL for item in request.transcript):
            return answer
        return first

    return reply
