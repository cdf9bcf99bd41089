"""Anthropic Messages API SSE fixtures.

Shapes follow Anthropic's published streaming examples
(https://platform.claude.com/docs/en/build-with-claude/streaming, formerly
docs.anthropic.com/en/docs/build-with-claude/streaming): named events
``message_start`` (usage with input and cache tokens), ``content_block_start``
/ ``content_block_delta`` (``text_delta``, ``input_json_delta``,
``thinking_delta``, ``signature_delta``) / ``content_block_stop``, ``ping``,
``message_delta`` (``stop_reason`` and cumulative ``output_tokens``),
``message_stop`` and ``error`` (``overloaded_error``). Prompt-cache usage fields
are from https://platform.claude.com/docs/en/build-with-claude/prompt-caching.
"""

from __future__ import annotations

import json
from typing import Any

from ._server import events


def record(kind: str, **fields: Any) -> str:
    """One named SSE record: ``event: kind`` plus its JSON ``data``."""
    return f"event: {kind}\ndata: " + json.dumps({"type": kind, **fields}, ensure_ascii=False)


def message_start(input_tokens: int = 25, read: int = 0, written: int = 0) -> str:
    """The opening event with the message id, model and input usage."""
    return record(
        "message_start",
        message={
            "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-sonnet-4-5-20250929",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
                "output_tokens": 1,
            },
        },
    )


def block_start(index: int, block: dict[str, Any]) -> str:
    """content_block_start."""
    return record("content_block_start", index=index, content_block=block)


def delta(index: int, value: dict[str, Any]) -> str:
    """content_block_delta."""
    return record("content_block_delta", index=index, delta=value)


def text(index: int, value: str) -> str:
    """A text_delta."""
    return delta(index, {"type": "text_delta", "text": value})


def block_stop(index: int) -> str:
    """content_block_stop."""
    return record("content_block_stop", index=index)


def message_delta(stop_reason: str, output_tokens: int = 15) -> str:
    """message_delta with the stop reason and cumulative output tokens."""
    return record(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )


PING = record("ping")
STOP = record("message_stop")


def text_stream(stop_reason: str = "end_turn") -> bytes:
    """Hello wörld 🌍 in three deltas, with a ping."""
    return events(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        PING,
        text(0, "Hello"),
        text(0, " wörld"),
        text(0, " 🌍"),
        block_stop(0),
        message_delta(stop_reason),
        STOP,
    )


def tool_use_stream() -> bytes:
    """Text, then one tool_use block with input_json_delta pieces (the published example)."""
    return events(
        message_start(472),
        block_start(0, {"type": "text", "text": ""}),
        text(0, "Okay, let me check."),
        block_stop(0),
        block_start(
            1,
            {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather"}
            | {"input": {}},
        ),
        delta(1, {"type": "input_json_delta", "partial_json": ""}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"city":'}),
        delta(1, {"type": "input_json_delta", "partial_json": ' "Paris"}'}),
        block_stop(1),
        message_delta("tool_use", 89),
        STOP,
    )


def parallel_stream() -> bytes:
    """Two tool_use blocks."""
    return events(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"tz": "CET"}'}),
        block_stop(1),
        message_delta("tool_use"),
        STOP,
    )


def thinking_stream() -> bytes:
    """Extended thinking: thinking deltas, a signature_delta, then text; cache usage."""
    return events(
        message_start(100, read=2000, written=300),
        block_start(0, {"type": "thinking", "thinking": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me add: "}),
        delta(0, {"type": "thinking_delta", "thinking": "2+2=4."}),
        delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"}),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        text(2, "4"),
        block_stop(2),
        message_delta("end_turn", 40),
        STOP,
    )


def error_midstream() -> bytes:
    """Text, then an overloaded_error event."""
    return events(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        text(0, "Hel"),
        record("error", error={"type": "overloaded_error", "message": "Overloaded"}),
    )


def malformed_stream() -> bytes:
    """A data line that is not JSON."""
    return events(message_start(), 'event: content_block_start\ndata: {"type": "content_bl')
