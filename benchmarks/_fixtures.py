"""What the benchmarks share: an echo tool and a zero-latency model.

Not a benchmark itself (``run_all.py`` skips modules starting with ``_``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio.lowlevel

import agentloop as al
import agentloop.model

ECHO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}


class Echo:
    """Returns its ``value`` argument; validated against ``ECHO_SCHEMA`` by the executor."""

    spec = al.ToolSpec("echo", "Echo.", ECHO_SCHEMA)

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return str(request.input["value"])


class FastModel:
    """A zero-latency model: each session asks for one echo call per model call,
    ``rounds`` times, then answers "done" (and starts over on the next turn).

    ``yield_control``: pass control to the event loop once per model call, as
    a real network call would, so that concurrent sessions interleave.
    """

    provider_name = "bench"
    model_name = "bench"

    def __init__(self, rounds: int, *, yield_control: bool = False) -> None:
        self.rounds = rounds
        self.yield_control = yield_control

    async def start_session(self, config: al.SessionConfig) -> FastSession:
        return FastSession(self.rounds, self.yield_control)


class FastSession:
    """One session of :class:`FastModel`: a call counter and nothing else."""

    __slots__ = ("calls", "in_turn", "rounds", "yield_control")

    def __init__(self, rounds: int, yield_control: bool) -> None:
        self.rounds = rounds
        self.yield_control = yield_control
        self.calls = 0  # numbers the call ids: unique in the session
        self.in_turn = 0

    async def begin_turn(
        self, request: al.model.TurnRequest, cancellation: Any
    ) -> AsyncIterator[al.model.ModelTurnResult]:
        self.in_turn += 1
        if self.in_turn <= self.rounds:
            self.calls += 1
            part = al.ToolCallPart(f"call-{self.calls}", "echo", {"value": "x"})
            result = al.model.ModelTurnResult(
                al.FinishReason.TOOL_CALL, (al.Item(al.ItemKind.ASSISTANT, (part,)),)
            )
        else:
            self.in_turn = 0
            result = al.model.ModelTurnResult(
                al.FinishReason.COMPLETED, (al.Item.text(al.ItemKind.ASSISTANT, "done"),)
            )
        return self._one(result)

    async def _one(
        self, result: al.model.ModelTurnResult
    ) -> AsyncIterator[al.model.ModelTurnResult]:
        if self.yield_control:
            await anyio.lowlevel.checkpoint()
        yield result
