"""Shared helpers for the provider tests: requests, event collection, agent runs, retries."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from agentloop import (
    AfterToolResult,
    Agent,
    AppendText,
    Finished,
    FinishReason,
    Item,
    ItemKind,
    ReasoningPart,
    SessionConfig,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentloop.core._cancellation import TurnCancellation
from agentloop.loop._driver import LoopDriver
from agentloop.model import ModelTurnResult
from agentloop.model._protocol import ModelEvent, TurnRequest
from agentloop.providers import RetryPolicy
from agentloop.tools import ToolRegistry

from ._server import ReplayServer, Reply

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolSpec(
    "get_time",
    "Current time in a timezone",
    {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
)


class SleepRecorder:
    """A ``RetryPolicy.sleep`` that records the delays and does not wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await anyio.lowlevel.checkpoint()


def fast_retry(recorder: SleepRecorder | None = None, attempts: int = 3) -> RetryPolicy:
    """A retry policy with tiny delays (and an optional delay recorder)."""
    if recorder is None:
        return RetryPolicy(max_attempts=attempts, base_delay=0.001, max_delay=0.002)
    return RetryPolicy(max_attempts=attempts, base_delay=0.001, max_delay=0.002, sleep=recorder)


def turn(transcript: Sequence[Item], tools: Sequence[ToolSpec] = (), **kw: Any) -> TurnRequest:
    """A TurnRequest for session ``s1``, turn ``t1``."""
    return TurnRequest("s1", "t1", tuple(transcript), tuple(tools), **kw)


def user(text: str) -> Item:
    """A user text item."""
    return Item.text(ItemKind.USER, text)


async def collect(
    model: Any, request: TurnRequest, cancellation: TurnCancellation | None = None
) -> list[ModelEvent]:
    """Every event of one model turn."""
    session = await model.start_session(SessionConfig("s1"))
    stream = await session.begin_turn(request, cancellation)
    events: list[ModelEvent] = []
    try:
        async for event in stream:
            events.append(event)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    return events


async def cancel_at_first_text(
    model: Any, request: TurnRequest, on_text: Callable[[], None] | None = None
) -> list[ModelEvent]:
    """Read one turn, cancelling the reading scope at the first ``AppendText``; the events seen.

    ``on_text`` runs just before the cancel, while the stream is still open.
    """
    session = await model.start_session(SessionConfig("s1"))
    seen: list[ModelEvent] = []
    with anyio.CancelScope() as scope:
        stream = await session.begin_turn(request, None)
        try:
            async for event in stream:
                seen.append(event)
                if isinstance(event, AppendText):
                    if on_text is not None:
                        on_text()
                    scope.cancel()
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
    assert scope.cancelled_caught
    return seen


def result_of(events: Sequence[ModelEvent]) -> ModelTurnResult:
    """The closing result (asserting it is last and unique)."""
    assert isinstance(events[-1], ModelTurnResult)
    assert sum(isinstance(event, ModelTurnResult) for event in events) == 1
    return events[-1]


def multi_turn_transcript() -> list[Item]:
    """System, user, assistant (thinking, text, 2 calls), tool results, notification, user."""
    return [
        Item.text(ItemKind.SYSTEM, "You are terse."),
        user("Weather in Paris and time in CET?"),
        Item(
            ItemKind.ASSISTANT,
            (
                ReasoningPart("Two lookups.", metadata={"anthropic.thinking_signature": "sig-1"}),
                TextPart("Checking."),
                ToolCallPart("call_1", "get_weather", {"city": "Paris"}),
                ToolCallPart("call_2", "get_time", {"tz": "CET"}),
            ),
            finish_reason=FinishReason.TOOL_CALL,
        ),
        Item(
            ItemKind.TOOL,
            (
                ToolResultPart("call_1", "18°C, cloudy"),
                ToolResultPart("call_2", {"error": "unknown tz"}, is_error=True),
            ),
        ),
        Item.notification("Background task 7 finished."),
        user("Thanks. Summarise."),
    ]


class Weather:
    """A weather tool that answers from a table."""

    spec = ToolSpec(WEATHER.name, WEATHER.description, WEATHER.input_schema)

    async def invoke(self, request: Any, ctx: Any) -> str:
        return {"Paris": "18C", "Rome": "24C"}[request.input["city"]]


async def replay(
    model_for: Callable[[ReplayServer], Any], replies: Sequence[Reply], request: TurnRequest
) -> list[ModelEvent]:
    """Every event of one turn of ``model_for(server)`` against a server replaying ``replies``."""
    async with ReplayServer(replies) as server:
        return await collect(model_for(server), request)


async def run_agent(
    model: Any,
    prompt: str,
    tools: Sequence[Any] = (),
    *,
    on_tool_result: Callable[[AfterToolResult], None] | None = None,
) -> tuple[Finished, LoopDriver, int]:
    """Drive an agent to ``Finished``: ``(final step, driver, tool-result pauses)``.

    Every pause on the way must be an ``AfterToolResult``; ``on_tool_result``
    sees each one before the driver goes on. Callers bound it with ``anyio.fail_after``.
    """
    registry = ToolRegistry()
    for tool in tools:
        registry = registry.with_tool(tool)
    agent = Agent.builder().model(model).add_tool_source(registry).input([user(prompt)]).build()
    driver = await agent.start(SessionConfig("s1"))
    pauses = 0
    while not isinstance(step := await driver.next(), Finished):
        assert isinstance(step, AfterToolResult)
        pauses += 1
        if on_tool_result is not None:
            on_tool_result(step)
    return step, driver, pauses


def client_connections(port: int) -> int:
    """Open (ESTABLISHED) IPv4 connections from this machine to 127.0.0.1:``port``."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        pytest.skip("needs Linux's /proc/net/tcp to see open connections")
    rows = [line.split() for line in table.read_text().splitlines()[1:]]
    return sum(1 for row in rows if row[2] == f"0100007F:{port:04X}" and row[3] == "01")


def refuses_connections(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` any more."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def stamped(
    parts: Sequence[Any],
    provider: str,
    model: str,
    response_model: str | None = None,
    response_id: str | None = None,
) -> Item:
    """The assistant item an HTTP adapter returns: ``parts`` plus its provider stamp."""
    metadata = {"agentloop.provider": provider, "agentloop.model": model}
    if response_model is not None:
        metadata["agentloop.response_model"] = response_model
    if response_id is not None:
        metadata["agentloop.response_id"] = response_id
    return Item(ItemKind.ASSISTANT, tuple(parts), metadata=metadata)
