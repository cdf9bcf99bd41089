"""The state machine's instruments: a recording observer and the cancellation probes.

A probe is a harmless tool or mutator that interrupts the turn when the
machine armed it, so random runs hit cancellation at a tool or a mutator.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..core._cancellation import CancellationController
from ..core._items import Item, ItemKind, ToolCallPart
from ..core._tool_spec import ToolSpec
from ..loop._events import AgentEvent, MutationFinished
from ..loop._mutators import MutationContext, TranscriptCursor
from ..loop._state import INTERRUPTED_KEY
from ..tools._tool import ToolContext, ToolRequest
from ._actions import CancelPoint
from ._replies import Reply, call, tool_calls

__all__ = ["PROBE_TOOL_NAME"]

PROBE_TOOL_NAME = "agentloop_probe"
"""The name of the harmless tool the machine adds to hit ``CancelPoint.TOOL``."""


class _Recorder:
    """Transcript observer (every appended item) and loop observer (dirty mutator passes)."""

    def __init__(self) -> None:
        self.appended: list[Item] = []
        self.since_rewrite: list[Item] = []
        self.rewrites = 0

    def on_item_appended(self, item: Item) -> None:
        self.appended.append(item)
        self.since_rewrite.append(item)

    def handle_event(self, event: AgentEvent) -> None:
        if isinstance(event, MutationFinished) and event.dirty:
            self.rewrites += 1
            self.since_rewrite.clear()


class _Probes:
    """Where the next cancellation is armed, and whether it fired during this step.

    A probe tool running beside a pending approval (concurrent task managers)
    can fire after ``next()`` returned: that is recorded as ``fired_late``.
    """

    def __init__(self, controller: CancellationController) -> None:
        self.controller = controller
        self.armed: CancelPoint | None = None
        self.fired: CancelPoint | None = None
        self.fired_late: CancelPoint | None = None
        self.stepping = False
        self.host_scope: anyio.CancelScope | None = None

    def take(self, point: CancelPoint) -> bool:
        if self.armed is not point:
            return False
        self.armed = None
        if self.stepping:
            self.fired = point
        else:
            self.fired_late = point
        return True


class _ProbeTool:
    """Echoes its input; when ``CancelPoint.TOOL`` is armed it interrupts and waits."""

    spec = ToolSpec(
        PROBE_TOOL_NAME,
        "Test-harness probe: echoes its input.",
        {"type": "object", "properties": {"note": {"type": "string", "maxLength": 8}}},
    )

    def __init__(self, probes: _Probes) -> None:
        self._probes = probes

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        if self._probes.take(CancelPoint.TOOL):
            self._probes.controller.interrupt()
            await anyio.sleep_forever()
        return {"echo": request.input}


class _ProbeMutator:
    """Leaves the transcript alone; when ``CancelPoint.MUTATOR`` is armed it interrupts."""

    name = "agentloop_probe"

    def __init__(self, probes: _Probes) -> None:
        self._probes = probes

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        if self._probes.take(CancelPoint.MUTATOR):
            self._probes.controller.interrupt()
            await anyio.lowlevel.checkpoint()


def _with_probe_call(calls: list[ToolCallPart], at: int) -> Reply:
    return tool_calls(*calls[:at], call(PROBE_TOOL_NAME, {}), *calls[at:])


def _is_interrupted(item: Item) -> bool:
    return item.kind is ItemKind.ASSISTANT and bool(item.metadata.get(INTERRUPTED_KEY))
