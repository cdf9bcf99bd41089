"""AnthropicModel against a local SSE replay server: real sockets, real wire format."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from agentloop import (
    AppendText,
    BeginPart,
    CommitPart,
    FinishReason,
    InvalidInputError,
    PartKind,
    ProviderError,
    ReasoningPart,
    SessionConfig,
    TextPart,
    ToolCallPart,
    Usage,
)
from agentloop.model import PromptCacheRequest
from agentloop.model._session_config import AfterItem, AfterTools, PromptCacheRetention
from agentloop.model._session_config import AfterPart as PartEnd
from agentloop.providers import AnthropicModel

from . import _anthropic_streams as streams
from ._helpers import (
    TIME,
    WEATHER,
    SleepRecorder,
    Weather,
    cancel_at_first_text,
    collect,
    fast_retry,
    multi_turn_transcript,
    replay,
    result_of,
    run_agent,
    stamped,
    turn,
    user,
)
from ._server import Recorded, ReplayServer, Reply, events, json_error, split_at, split_inside, sse

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789"


def model_for(server: ReplayServer, **options: Any) -> AnthropicModel:
    options.setdefault("retry", fast_retry())
    options.setdefault("max_tokens", 1024)
    return AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key=KEY, **options)


async def run(replies: list[Reply], request: Any = None, **options: Any) -> list[Any]:
    return await replay(lambda s: model_for(s, **options), replies, request or turn([user("hi")]))


async def body_for(request: Any, **options: Any) -> Any:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server, **options), request)
        return server.requests[0].json


async def test_text_only_with_utf8_and_sse_lines_split_across_chunks() -> None:
    data = streams.text_stream()
    cuts = (
        split_inside(data, "event: content_block_delta", 9),
        split_inside(data, "ö", 1),
        split_inside(data, "🌍", 3),
    )
    async with ReplayServer([sse(*split_at(data, *sorted(cuts)))]) as server:
        events_ = await collect(model_for(server), turn([user("hi")]))
        recorded = server.requests[0]
    assert recorded.path == "/v1/messages"
    assert recorded.headers["x-api-key"] == KEY
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    final = TextPart("Hello wörld 🌍")
    usage = Usage(input_tokens=25, output_tokens=15)
    assert events_[:-1] == [
        BeginPart("part-0", PartKind.TEXT),
        AppendText("part-0", "Hello"),
        AppendText("part-0", " wörld"),
        AppendText("part-0", " 🌍"),
        CommitPart("part-0", final),
        usage,
    ]
    result = result_of(events_)
    assert result.finish_reason is FinishReason.COMPLETED
    stamp = (
        "anthropic",
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
    )
    assert result.output_items == (stamped((final,), *stamp),)
    assert (result.model, result.response_id) == (
        "claude-sonnet-4-5-20250929",
        "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
    )


async def test_one_tool_call() -> None:
    events_ = await run([sse(streams.tool_use_stream())], turn([user("hi")], [WEATHER]))
    call = ToolCallPart("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"city": "Paris"})
    result = result_of(events_)
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.output_items[0].parts == (TextPart("Okay, let me check."), call)
    assert call in events_
    assert result.usage == Usage(input_tokens=472, output_tokens=89)


async def test_parallel_tool_calls() -> None:
    result = result_of(await run([sse(streams.parallel_stream())]))
    assert result.output_items[0].parts == (
        ToolCallPart("toolu_a", "get_weather", {"city": "Paris"}),
        ToolCallPart("toolu_b", "get_time", {"tz": "CET"}),
    )


async def test_thinking_signature_redacted_thinking_and_cache_usage() -> None:
    result = result_of(await run([sse(streams.thinking_stream())]))
    assert result.output_items[0].parts == (
        ReasoningPart(
            "Let me add: 2+2=4.",
            metadata={"anthropic.thinking_signature": "EqQBCgIYAhIM1gbcDa9GJwZA"},
        ),
        ReasoningPart(
            "", redacted=True, metadata={"anthropic.redacted_data": "EmwKAhgBEgy3va3pzix"}
        ),
        TextPart("4"),
    )
    assert result.usage == Usage(
        input_tokens=2400, output_tokens=40, cache_read_tokens=2000, cache_write_tokens=300
    )


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("end_turn", FinishReason.COMPLETED),
        ("stop_sequence", FinishReason.COMPLETED),
        ("tool_use", FinishReason.TOOL_CALL),
        ("max_tokens", FinishReason.MAX_TOKENS),
        ("refusal", FinishReason.BLOCKED),
        ("pause_turn", FinishReason.OTHER),
    ],
)
async def test_each_stop_reason_is_mapped(wire: str, expected: FinishReason) -> None:
    result = result_of(await run([sse(streams.text_stream(wire))]))
    assert result.finish_reason is expected
    assert result.metadata == {"agentloop.provider_finish_reason": wire}


async def test_429_with_retry_after_then_success() -> None:
    recorder = SleepRecorder()
    limited = json_error(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        ("retry-after", "3"),
    )
    async with ReplayServer([limited, sse(streams.text_stream())]) as server:
        events_ = await collect(model_for(server, retry=fast_retry(recorder)), turn([user("x")]))
        assert len(server.requests) == 2
    assert recorder.delays == [3.0]
    assert result_of(events_).finish_reason is FinishReason.COMPLETED


async def test_overloaded_529_three_times_then_failure() -> None:
    failure = json_error(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    async with ReplayServer([failure] * 3) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
        assert len(server.requests) == 3
    assert (caught.value.status, caught.value.error_type) == (529, "overloaded_error")
    assert str(caught.value) == (
        "Anthropic request failed with status 529 (overloaded_error): Overloaded "
        "(gave up after 3 attempts)"
    )


async def test_500_three_times_then_failure() -> None:
    failure = json_error(500, {"type": "error", "error": {"type": "api_error", "message": "x"}})
    with pytest.raises(ProviderError) as caught:
        await run([failure] * 3)
    assert caught.value.status == 500


async def test_stream_cut_mid_event() -> None:
    data = streams.text_stream()
    with pytest.raises(ProviderError) as caught:
        await run([sse(data[: split_inside(data, "wörld", 3)], cut=True)])
    assert caught.value.error_type == "stream_broken"


async def test_stream_without_message_stop_is_a_provider_error() -> None:
    data = streams.text_stream()
    with pytest.raises(ProviderError) as caught:
        await run([sse(data[: data.index(b"event: message_stop")])])
    assert caught.value.error_type == "incomplete_stream"
    assert "ended before 'message_stop'" in str(caught.value)


async def test_error_event_mid_stream() -> None:
    with pytest.raises(ProviderError) as caught:
        await run([sse(streams.error_midstream())])
    assert caught.value.error_type == "overloaded_error"
    assert caught.value.retryable is True
    assert str(caught.value) == "Anthropic: stream error (overloaded_error): Overloaded"


async def test_malformed_json_event() -> None:
    with pytest.raises(ProviderError) as caught:
        await run([sse(streams.malformed_stream())])
    assert str(caught.value).startswith(
        "Anthropic: malformed JSON in a stream event 'content_block_start'"
    )


async def test_cancelling_the_consumer_closes_the_connection() -> None:
    first = events(streams.message_start(), streams.block_start(0, {"type": "text", "text": ""}))
    more = events(streams.text(0, "Hel"))
    async with ReplayServer([sse(first, more, hang=True)]) as server:
        await cancel_at_first_text(model_for(server), turn([user("x")]))
        with anyio.fail_after(5):
            await server.disconnected.wait()


async def test_request_body_for_a_multi_turn_transcript_with_tool_results() -> None:
    body = await body_for(turn(multi_turn_transcript(), [TIME, WEATHER]), tool_choice="get_weather")
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather in Paris and time in CET?"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two lookups.", "signature": "sig-1"},
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_2",
                        "name": "get_time",
                        "input": {"tz": "CET"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "18°C, cloudy"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": '{"error":"unknown tz"}',
                        "is_error": True,
                    },
                    {
                        "type": "text",
                        "text": (
                            "<system-reminder>\nBackground task 7 finished.\n</system-reminder>"
                        ),
                    },
                    {"type": "text", "text": "Thanks. Summarise."},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_time",
                "description": "Current time in a timezone",
                "input_schema": TIME.input_schema,
            },
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "input_schema": WEATHER.input_schema,
            },
        ],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "stream": True,
    }


async def test_automatic_cache_marks_the_last_tool_and_the_last_block() -> None:
    cache = PromptCacheRequest.automatic().with_retention(PromptCacheRetention.EXTENDED)
    body = await body_for(turn(multi_turn_transcript(), [TIME, WEATHER], cache=cache))
    marked = {"type": "ephemeral", "ttl": "1h"}
    assert body["tools"][-1]["cache_control"] == marked
    assert "cache_control" not in body["tools"][0]
    assert body["messages"][-1]["content"][-1] == {
        "type": "text",
        "text": "Thanks. Summarise.",
        "cache_control": marked,
    }
    assert json.dumps(body).count("cache_control") == 2


async def test_explicit_cache_marks_exact_item_and_part_blocks() -> None:
    cache = PromptCacheRequest.explicit([AfterTools(), AfterItem(0), PartEnd(2, 2)])
    body = await body_for(turn(multi_turn_transcript(), [WEATHER], cache=cache))
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][1]["content"][2]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(body).count("cache_control") == 3


async def test_required_cache_that_cannot_be_honoured_is_an_error() -> None:
    cache = PromptCacheRequest.explicit_required([AfterTools()])
    async with ReplayServer([]) as server:
        session = await model_for(server).start_session(SessionConfig("s1"))
        with pytest.raises(ProviderError) as caught:
            await session.begin_turn(turn([user("x")], cache=cache), None)
        assert server.requests == []
    assert caught.value.error_type == "cache_unsupported"
    assert "AfterTools() names no cacheable block" in str(caught.value)


async def test_best_effort_cache_drops_what_cannot_be_cached() -> None:
    cache = PromptCacheRequest.explicit([AfterTools(), AfterItem(9)])
    body = await body_for(turn([user("x")], cache=cache))
    assert "cache_control" not in json.dumps(body)


async def test_thinking_budget_must_be_below_max_tokens() -> None:
    with pytest.raises(InvalidInputError, match=r"max_tokens \(1024\) must exceed"):
        AnthropicModel("claude", api_key="k", max_tokens=1024, thinking_budget=2048)


async def test_api_key_is_redacted_from_repr_and_errors() -> None:
    echo = json_error(401, {"type": "error", "error": {"type": "auth", "message": f"bad {KEY}"}})
    async with ReplayServer([echo]) as server:
        model = model_for(server)
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("x")]))
    assert KEY not in repr(model)
    assert str(caught.value) == "Anthropic request failed with status 401 (auth): bad [REDACTED]"


def anthropic_responder(request: Recorded) -> Reply:
    """Round 1: call for Paris; round 2: call for Rome; then the answer."""
    blocks = [b for m in request.json["messages"] for b in m["content"]]
    results = [b["content"] for b in blocks if b["type"] == "tool_result"]
    if len(results) < 2:
        city = "Paris" if not results else "Rome"
        tool = {"type": "tool_use", "id": f"toolu_{city}", "name": "get_weather", "input": {}}
        arguments = {"type": "input_json_delta", "partial_json": json.dumps({"city": city})}
        return sse(
            events(
                streams.message_start(),
                streams.block_start(0, tool),
                streams.delta(0, arguments),
                streams.block_stop(0),
                streams.message_delta("tool_use"),
                streams.STOP,
            )
        )
    return sse(
        events(
            streams.message_start(),
            streams.block_start(0, {"type": "text", "text": ""}),
            streams.text(0, f"Paris {results[0]}, Rome {results[1]}."),
            streams.block_stop(0),
            streams.message_delta("end_turn"),
            streams.STOP,
        )
    )


async def test_agent_end_to_end_two_tool_rounds() -> None:
    async with ReplayServer(anthropic_responder) as server:
        with anyio.fail_after(10):
            step, driver, _ = await run_agent(
                model_for(server), "Weather in Paris, then Rome?", [Weather()]
            )
        assert len(server.requests) == 3
        last_body = server.requests[-1].json
    assert step.result.finish_reason is FinishReason.COMPLETED
    transcript = driver.snapshot().transcript
    assert transcript[-1].text_content == "Paris 18C, Rome 24C."
    assert [m["role"] for m in last_body["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
