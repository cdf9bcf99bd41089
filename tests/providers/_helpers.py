"""Shared helpers for the provider tests: requests, event collection, fast retries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel

from agentloop import (
    FinishReason,
    Item,
    ItemKind,
    ModelTurnResult,
    ReasoningPart,
    SessionConfig,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentloop.core._cancellation import TurnCancellation
from agentloop.model._protocol import ModelEvent, TurnRequest
from agentloop.providers import RetryPolicy

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
