"""Malformed-but-valid-JSON chunks, corrupt bodies: always a typed ProviderError.

Every case runs against the loopback server speaking the real wire format of
each provider; a hypothesis test mutates one value anywhere in a valid stream
and checks that the adapter either finishes the turn or raises ProviderError,
never a raw TypeError/AttributeError/ValueError/KeyError/httpx error.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import ProviderError
from agentloop.model import ModelTurnResult
from agentloop.providers import (
    AnthropicModel,
    GeminiModel,
    OpenAIChatModel,
    ProviderErrorKind,
)

from . import _anthropic_streams as anthropic_streams
from . import _gemini_streams as gemini_streams
from . import _openai_streams as openai_streams
from ._helpers import WEATHER, collect, fast_retry, turn, user
from ._server import ReplayServer, Reply, events, sse

pytestmark = pytest.mark.anyio

KEY = "sk-malformed-test-key-0001"


def openai(server: ReplayServer, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4o-mini", base_url=f"{server.url}/v1", api_key=KEY, retry=fast_retry(), **options
    )


def anthropic(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key=KEY, retry=fast_retry())


def gemini(server: ReplayServer) -> GeminiModel:
    return GeminiModel("gemini-2.5-flash", base_url=server.url, api_key=KEY, retry=fast_retry())


Factory = Callable[[ReplayServer], Any]

STREAMS: list[tuple[str, Factory, bytes]] = [
    ("openai-text", openai, openai_streams.text_stream()),
    ("openai-tool", openai, openai_streams.tool_call_stream()),
    ("openai-parallel", openai, openai_streams.parallel_calls_stream()),
    ("openai-reasoning", openai, openai_streams.reasoning_stream()),
    ("anthropic-text", anthropic, anthropic_streams.text_stream()),
    ("anthropic-tool", anthropic, anthropic_streams.tool_use_stream()),
    ("anthropic-thinking", anthropic, anthropic_streams.thinking_stream()),
    ("gemini-text", gemini, gemini_streams.text_stream()),
    ("gemini-call", gemini, gemini_streams.call_stream()),
    ("gemini-thinking", gemini, gemini_streams.thinking_stream()),
]


async def outcome(factory: Factory, reply: Reply) -> ModelTurnResult | ProviderError:
    """The turn's result, or the ProviderError it raised (anything else fails the test)."""
    async with ReplayServer([reply]) as server:
        try:
            events = await collect(factory(server), turn([user("hi")], [WEATHER]))
        except ProviderError as error:
            return error
    assert isinstance(events[-1], ModelTurnResult)
    return events[-1]


# -- hypothesis: one value anywhere in a valid stream replaced by any JSON value -------------

RECORD_SPLIT = re.compile(rb"(\r?\n\r?\n)")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indices) inside a JSON value, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(copy[head], rest, new)
    return copy


def data_records(stream: bytes) -> list[tuple[int, Any]]:
    """``(piece index, parsed data)`` of every record with JSON data."""
    pieces = RECORD_SPLIT.split(stream)
    found = []
    for index, piece in enumerate(pieces):
        match = re.search(rb"^data: (.*)$", piece, re.M)
        if match is None:
            continue
        try:
            found.append((index, json.loads(match.group(1))))
        except json.JSONDecodeError:
            continue
    return found


def mutated(stream: bytes, piece_index: int, document: Any) -> bytes:
    pieces = RECORD_SPLIT.split(stream)
    data = json.dumps(document).encode()
    pieces[piece_index] = re.sub(
        rb"^data: .*$", lambda _: b"data: " + data, pieces[piece_index], count=1, flags=re.M
    )
    return b"".join(pieces)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(STREAMS), choice=st.data())
async def test_any_wrong_value_in_any_chunk_is_a_provider_error_or_a_result(
    case: tuple[str, Factory, bytes], choice: st.DataObject
) -> None:
    _name, factory, stream = case
    records = data_records(stream)
    piece_index, document = choice.draw(st.sampled_from(records))
    path = choice.draw(st.sampled_from(paths(document)))
    new = choice.draw(json_values)
    result = await outcome(
        factory, sse(mutated(stream, piece_index, replaced(document, path, new)))
    )
    if isinstance(result, ProviderError):
        assert str(result)
        assert isinstance(result.kind, ProviderErrorKind)
        assert KEY not in str(result)


# -- precise messages ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (
            events('data: {"choices": [{"index": 0, "delta": []}]}'),
            "OpenAI: malformed response: expected chunk.choices[0].delta to be an object or "
            "null, got array []",
        ),
        (
            events('data: {"choices": {"index": 0}}'),
            "OpenAI: malformed response: expected chunk.choices to be an array or null, "
            "got object {'index': 0}",
        ),
        (
            events('data: {"choices": [{"index": 0, "delta": {"content": 5}}]}'),
            "OpenAI: malformed response: expected chunk.choices[0].delta.content to be a string "
            "or null, got int 5",
        ),
        (
            events('data: {"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]}'),
            "OpenAI: malformed response: expected chunk.choices[0].delta.tool_calls[0].index to "
            "be a non-negative integer, got string '0'",
        ),
        (
            events('data: {"choices": [], "usage": [1, 2]}'),
            "OpenAI: malformed response: expected chunk.usage to be an object, got array [1, 2]",
        ),
        (
            events("data: [1, 2]"),
            "OpenAI: malformed response: expected a stream chunk to be an object, got array [1, 2]",
        ),
    ],
)
async def test_openai_wrong_types_name_the_field(stream: bytes, message: str) -> None:
    result = await outcome(openai, sse(stream))
    assert isinstance(result, ProviderError)
    assert str(result) == message
    assert result.kind is ProviderErrorKind.INVALID_RESPONSE
    assert result.error_type == "malformed_stream"


async def test_openai_non_streamed_completion_with_a_wrong_message_type() -> None:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "message": "hi"}]}
    reply = Reply(
        chunks=(json.dumps(body).encode(),), headers=(("Content-Type", "application/json"),)
    )
    result = await outcome(lambda server: openai(server, stream=False), reply)
    assert isinstance(result, ProviderError)
    assert str(result) == (
        "OpenAI: malformed response: expected completion.choices[0].message to be an object "
        "or null, got string 'hi'"
    )


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            anthropic_streams.record("content_block_start", index=0, content_block="text"),
            "Anthropic: malformed response: expected content_block_start.content_block to be "
            "an object or null, got string 'text'",
        ),
        (
            anthropic_streams.record(
                "content_block_start", index=0, content_block={"type": "text", "text": ["a"]}
            ),
            "Anthropic: malformed response: expected content_block_start.content_block.text to "
            "be a string or null, got array ['a']",
        ),
        (
            anthropic_streams.record("content_block_delta", index=True, delta={}),
            "Anthropic: malformed response: expected content_block_delta.index to be a "
            "non-negative integer, got boolean True",
        ),
        (
            anthropic_streams.record(
                "content_block_start",
                index=0,
                content_block={"type": "tool_use", "id": "t", "name": "f", "input": [1]},
            ),
            "Anthropic: malformed response: expected content_block_start.content_block.input "
            "to be an object, got array [1]",
        ),
        (
            anthropic_streams.record("message_delta", delta={"stop_reason": 3}),
            "Anthropic: malformed response: expected message_delta.delta.stop_reason to be a "
            "string or null, got int 3",
        ),
        (
            anthropic_streams.record("message_start", message={"usage": "many"}),
            "Anthropic: malformed response: expected message_start.message.usage to be an "
            "object, got string 'many'",
        ),
    ],
)
async def test_anthropic_wrong_types_name_the_field(record: str, message: str) -> None:
    stream = events(anthropic_streams.message_start(), record)
    result = await outcome(anthropic, sse(stream))
    assert isinstance(result, ProviderError)
    assert str(result) == message
    assert result.kind is ProviderErrorKind.INVALID_RESPONSE


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            'data: {"candidates": [{"content": {"parts": {"text": "x"}}}]}',
            "Gemini: malformed response: expected chunk.candidates[0].content.parts to be an "
            "array or null, got object {'text': 'x'}",
        ),
        (
            'data: {"candidates": [{"content": {"parts": [{"text": 7}]}}]}',
            "Gemini: malformed response: expected chunk.candidates[0].content.parts[0].text to "
            "be a string or null, got int 7",
        ),
        (
            'data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", '
            '"args": "x"}}]}}]}',
            "Gemini: malformed response: expected "
            "chunk.candidates[0].content.parts[0].functionCall.args to be an object or null, "
            "got string 'x'",
        ),
        (
            'data: {"candidates": [{"content": {"parts": [{"text": "a", "thought": "yes"}]}}]}',
            "Gemini: malformed response: expected chunk.candidates[0].content.parts[0].thought "
            "to be a boolean or null, got string 'yes'",
        ),
        (
            'data: {"candidates": "none"}',
            "Gemini: malformed response: expected chunk.candidates to be an array or null, "
            "got string 'none'",
        ),
        (
            'data: {"promptFeedback": {"blockReason": 1}}',
            "Gemini: malformed response: expected chunk.promptFeedback.blockReason to be a "
            "string or null, got int 1",
        ),
    ],
)
async def test_gemini_wrong_types_name_the_field(record: str, message: str) -> None:
    result = await outcome(gemini, sse(gemini_streams.gemini_events(record)))
    assert isinstance(result, ProviderError)
    assert str(result) == message
    assert result.kind is ProviderErrorKind.INVALID_RESPONSE


# -- corrupt bodies -----------------------------------------------------------------------------

GARBAGE = b"\x1f\x8b\x08\x00this is not deflate data at all" * 4


@pytest.mark.parametrize(
    "factory", [openai, anthropic, gemini], ids=["openai", "anthropic", "gemini"]
)
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_corrupt_compressed_stream_is_a_provider_error(
    factory: Factory, encoding: str
) -> None:
    reply = Reply(
        chunks=(GARBAGE,),
        headers=(("Content-Type", "text/event-stream"), ("Content-Encoding", encoding)),
    )
    result = await outcome(factory, reply)
    assert isinstance(result, ProviderError)
    provider = {openai: "OpenAI", anthropic: "Anthropic", gemini: "Gemini"}[factory]
    assert str(result).startswith(
        f"{provider}: cannot decode the response body: it is marked Content-Encoding: "
        f"'{encoding}' but does not decode ("
    )
    assert result.kind is ProviderErrorKind.INVALID_RESPONSE


async def test_a_corrupt_compressed_whole_body_is_a_provider_error() -> None:
    reply = Reply(
        chunks=(GARBAGE,),
        headers=(("Content-Type", "application/json"), ("Content-Encoding", "gzip")),
    )
    result = await outcome(lambda server: openai(server, stream=False), reply)
    assert isinstance(result, ProviderError)
    assert "cannot decode the response body" in str(result)


async def test_a_corrupt_compressed_error_body_keeps_the_status() -> None:
    reply = Reply(
        status=400,
        chunks=(GARBAGE,),
        headers=(("Content-Type", "application/json"), ("Content-Encoding", "gzip")),
    )
    result = await outcome(openai, reply)
    assert isinstance(result, ProviderError)
    assert str(result) == (
        "OpenAI request failed with status 400: (the error body could not be decoded: "
        "corrupt Content-Encoding)"
    )
    assert (result.status, result.kind) == (400, ProviderErrorKind.INVALID_REQUEST)


async def test_a_valid_gzip_stream_still_works() -> None:
    reply = Reply(
        chunks=(gzip.compress(openai_streams.text_stream()),),
        headers=(("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip")),
    )
    result = await outcome(openai, reply)
    assert isinstance(result, ModelTurnResult)
    assert result.output_items[0].text_content == "Hello wörld 🌍"


COMPLETION = {
    "id": "chatcmpl-9",
    "object": "chat.completion",
    "model": "smollm2",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 22, "completion_tokens": 12, "total_tokens": 34},
}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(choice=st.data())
async def test_any_wrong_value_in_a_whole_completion_is_a_provider_error_or_a_result(
    choice: st.DataObject,
) -> None:
    path = choice.draw(st.sampled_from(paths(COMPLETION)))
    body = json.dumps(replaced(COMPLETION, path, choice.draw(json_values))).encode()
    reply = Reply(chunks=(body,), headers=(("Content-Type", "application/json"),))
    result = await outcome(lambda server: openai(server, stream=False), reply)
    if isinstance(result, ProviderError):
        assert str(result)
        assert isinstance(result.kind, ProviderErrorKind)
