"""Fakes shared by the task-manager tests: gated tools, checkers, a step runner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc

import agentloop as al
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


class GateTool:
    """Each call signals ``entered(call_id)`` and waits for ``release(call_id)``.

    Input ``{"fail": true}`` makes the call raise after release (an error result).
    With ``guarded``, the tool proposes a filesystem read (see ``ApproveFsReads``).
    """

    def __init__(
        self,
        name: str,
        *,
        guarded: bool = False,
        annotations: al.ToolAnnotations | None = None,
        blocking: bool = True,
    ) -> None:
        self.spec = al.ToolSpec(
            name,
            f"{name}: wait until released",
            {"type": "object"},
            annotations=annotations or al.ToolAnnotations(),
        )
        self.guarded = guarded
        self.blocking = blocking
        self.opened = False
        self.invoked: list[str] = []
        self.cancelled: list[str] = []
        self._entered: dict[str, anyio.Event] = {}
        self._gates: dict[str, anyio.Event] = {}

    def entered(self, call_id: str) -> anyio.Event:
        return self._entered.setdefault(call_id, anyio.Event())

    def release(self, call_id: str) -> None:
        self._gates.setdefault(call_id, anyio.Event()).set()

    def released(self, call_id: str) -> bool:
        gate = self._gates.get(call_id)
        return gate is not None and gate.is_set()

    def open_all(self) -> None:
        """Release every call, present and future."""
        self.opened = True
        for call_id in self.invoked:
            self.release(call_id)

    def proposed_requests(
        self, request: al.ToolRequest
    ) -> Sequence[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead(f"/data/{request.call_id}")] if self.guarded else []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        call_id = request.call_id
        self.invoked.append(call_id)
        self.entered(call_id).set()
        if self.blocking and not self.opened:
            try:
                await self._gates.setdefault(call_id, anyio.Event()).wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(call_id)
                raise
        if isinstance(request.input, dict) and request.input.get("fail"):
            raise RuntimeError(f"{call_id} broke")
        return f"{self.spec.name}-done:{call_id}"


class SleepTool:
    """Sleeps ``seconds`` and answers with the call id."""

    def __init__(self, seconds: float, name: str = "sleep") -> None:
        self.spec = al.ToolSpec(name, "Sleep a while.", {"type": "object"})
        self.seconds = seconds

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await anyio.sleep(self.seconds)
        return f"slept:{request.call_id}"


class ApproveFsReads:
    """Every filesystem read needs a human's approval."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


class StepRunner:
    """Runs ``driver.next()`` in a task of ``group`` so the test can act meanwhile."""

    def __init__(self, group: anyio.abc.TaskGroup, driver: al.LoopDriver) -> None:
        self.group = group
        self.driver = driver
        self.done = anyio.Event()
        self.step: al.Step | None = None
        group.start_soon(self._run)

    async def _run(self) -> None:
        self.step = await self.driver.next()
        self.done.set()

    async def result(self) -> al.Step:
        await self.done.wait()
        assert self.step is not None
        return self.step


async def next_event(handle: al.tasks.TaskManagerHandle) -> al.tasks.TaskEvent:
    event = await handle.next_event()
    assert event is not None
    return event


async def events(handle: al.tasks.TaskManagerHandle, count: int) -> list[al.tasks.TaskEvent]:
    return [await next_event(handle) for _ in range(count)]


def describe(event: al.tasks.TaskEvent) -> tuple[str, str, str]:
    """(event type, call id, tool name) for whole-outcome assertions."""
    return (type(event).__name__, event.task.call_id, event.task.tool_name)


def tool_outputs(items: Sequence[al.Item]) -> list[tuple[str, Any, bool]]:
    """(call id, output, is_error) of every tool result, in transcript order."""
    return [(r.call_id, r.output, r.is_error) for item in items for r in item.tool_results()]


def notifications(items: Sequence[al.Item]) -> list[str]:
    return [item.text_content for item in items if item.kind is al.ItemKind.NOTIFICATION]


def build(
    model: al.testing.ScriptedModel,
    manager: al.tasks.TaskManager,
    *tools: al.Tool,
    permissions: al.permissions.PermissionChecker | None = None,
    cancellation: al.CancellationHandle | None = None,
) -> al.AgentBuilder:
    registry = al.ToolRegistry()
    for tool in tools:
        registry.add(tool)
    builder = al.Agent.builder().model(model).add_tool_source(registry).task_manager(manager)
    if permissions is not None:
        builder = builder.permissions(permissions)
    if cancellation is not None:
        builder = builder.cancellation(cancellation)
    return builder
