"""Fakes shared by the driver tests: tools, checkers, observers, mutators."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

import agentloop as al
import agentloop.observe
import agentloop.permissions
import agentloop.transcript


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


class EchoTool:
    """Answers "pong" (or the ``value`` input); proposes a filesystem read of ``/tmp``."""

    spec = al.ToolSpec(
        "echo",
        "Echo a value back.",
        {"type": "object", "properties": {"value": {"type": "string"}}},
    )

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def proposed_requests(
        self, request: al.ToolRequest
    ) -> Sequence[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead("/tmp/echo")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.inputs.append(request.input)
        return str(request.input.get("value", "pong"))


class BlockingTool:
    """Signals ``entered`` then waits for ``release``."""

    def __init__(self, name: str = "block") -> None:
        self.spec = al.ToolSpec(name, "Block until released.", {"type": "object"})
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = False

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.entered.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        return "released"


class DynamicTool:
    """A tool whose description follows ``version``."""

    def __init__(self) -> None:
        self.version = 1
        self.spec = al.ToolSpec("dynamic", "dynamic version 1")

    def current_spec(self) -> al.ToolSpec:
        return al.ToolSpec("dynamic", f"dynamic version {self.version}")

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "ok"


class ApproveFsReads:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


class DenyFsReads:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.Deny("path_not_allowed", "reads are not allowed here")
        return al.permissions.Allow()


class Recorder:
    """Records events and appended items."""

    def __init__(self) -> None:
        self.events: list[al.observe.AgentEvent] = []
        self.items: list[al.Item] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events.append(event)

    def on_item_appended(self, item: al.Item) -> None:
        self.items.append(item)

    def of(self, cls: type[Any]) -> list[Any]:
        return [event for event in self.events if isinstance(event, cls)]


class PointRecorder:
    name = "points"

    def __init__(self) -> None:
        self.points: list[al.transcript.MutationPoint] = []

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        self.points.append(ctx.point)


class KeepLast:
    """Keeps the last ``keep`` items (a crude compaction that may break pairs)."""

    name = "keep-last"

    def __init__(self, keep: int) -> None:
        self.keep = keep

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        if len(cursor) > self.keep:
            del cursor[: len(cursor) - self.keep]


def tool_texts(items: Sequence[al.Item]) -> list[tuple[str, Any, bool]]:
    """(call id, output, is_error) of every tool result, in transcript order."""
    return [
        (part.call_id, part.output, part.is_error)
        for item in items
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


async def run_until_finished(driver: al.LoopDriver) -> al.Step:
    return await driver.run_until_blocked()
