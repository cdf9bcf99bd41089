"""GeminiModel against a local SSE replay server: real sockets, real wire format."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentloop import (
    AppendText,
    BeginPart,
    CommitPart,
    FinishReason,
    Item,
    ItemKind,
    PartKind,
    ProviderError,
    ReasoningPart,
    SessionConfig,
    TextPart,
    ToolCallPart,
    Usage,
)
from agentloop.model import PromptCacheRequest
from agentloop.model._session_config import AfterTools
from agentloop.providers import GeminiModel

from . import _gemini_streams as streams
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
from ._server import Recorded, ReplayServer, Reply, json_error, split_at, split_inside, sse

pytestmark = pytest.mark.anyio

KEY = "AIza-test-0123456789"


class Ids:
    """Deterministic call ids for calls Gemini sent without one."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"gen_{self.count}"


def model_for(server: ReplayServer, **options: Any) -> GeminiModel:
    options.setdefault("retry", fast_retry())
    options.setdefault("new_call_id", Ids())
    return GeminiModel("gemini-2.5-flash", base_url=server.url, api_key=KEY, **options)


async def run(replies: list[Reply], request: Any = None, **options: Any) -> list[Any]:
    return await replay(lambda s: model_for(s, **options), replies, request or turn([user("hi")]))


async def test_text_only_with_utf8_and_crlf_split_across_chunks() -> None:
    data = streams.text_stream()
    cuts = (
        data.index(b"\r\n\r\n") + 1,  # between \r and \n
        split_inside(data, "ö", 1),
        split_inside(data, "🌍", 1),
        split_inside(data, "data: ", 2),
    )
    async with ReplayServer([sse(*split_at(data, *sorted(set(cuts))))]) as server:
        events_ = await collect(model_for(server), turn([user("hi")]))
        recorded = server.requests[0]
    assert recorded.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert recorded.headers["x-goog-api-key"] == KEY
    final = TextPart("Hello wörld 🌍")
    usage = Usage(input_tokens=9, output_tokens=12)
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
    stamp = ("gemini", "gemini-2.5-flash", "gemini-2.5-flash", "mVYQaLDiFsKrnvgPlKWj8Qc")
    assert result.output_items == (stamped((final,), *stamp),)
    assert (result.model, result.response_id) == ("gemini-2.5-flash", "mVYQaLDiFsKrnvgPlKWj8Qc")


async def test_one_function_call_gets_a_generated_id() -> None:
    result = result_of(await run([sse(streams.call_stream())], turn([user("hi")], [WEATHER])))
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.output_items[0].parts == (
        ToolCallPart(
            "gen_1", "get_weather", {"city": "Paris"}, metadata={"gemini.generated_id": True}
        ),
    )
    assert result.usage == Usage(input_tokens=40, output_tokens=7)


async def test_parallel_function_calls_keep_ids_and_signatures() -> None:
    result = result_of(await run([sse(streams.parallel_stream())]))
    assert result.output_items[0].parts == (
        ToolCallPart(
            "fc_1",
            "get_weather",
            {"city": "Paris"},
            metadata={"gemini.thought_signature": "CiQBVKhc7ijr"},
        ),
        ToolCallPart("fc_2", "get_time", {"tz": "CET"}),
    )


async def test_thought_summary_signature_usage_and_cached_tokens() -> None:
    result = result_of(await run([sse(streams.thinking_stream())]))
    assert result.output_items[0].parts == (
        ReasoningPart("Adding 2 and 2."),
        TextPart("4", metadata={"gemini.thought_signature": "Cs4BAdHtim9"}),
    )
    assert result.usage == Usage(
        input_tokens=120, output_tokens=31, reasoning_tokens=30, cache_read_tokens=100
    )


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("STOP", FinishReason.COMPLETED),
        ("MAX_TOKENS", FinishReason.MAX_TOKENS),
        ("SAFETY", FinishReason.BLOCKED),
        ("RECITATION", FinishReason.BLOCKED),
        ("PROHIBITED_CONTENT", FinishReason.BLOCKED),
        ("MALFORMED_FUNCTION_CALL", FinishReason.ERROR),
        ("OTHER", FinishReason.OTHER),
    ],
)
async def test_each_finish_reason_is_mapped(wire: str, expected: FinishReason) -> None:
    result = result_of(await run([sse(streams.text_stream(wire))]))
    assert result.finish_reason is expected
    assert result.metadata == {"agentloop.provider_finish_reason": wire}


async def test_prompt_blocked_without_candidates() -> None:
    blocked = streams.gemini_events(
        'data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": '
        '{"promptTokenCount": 5, "totalTokenCount": 5}}'
    )
    result = result_of(await run([sse(blocked)]))
    assert result.finish_reason is FinishReason.BLOCKED
    assert result.output_items == ()


async def test_a_blocked_prompt_keeps_the_response_id_and_model() -> None:
    # the shape Gemini sends for a blocked prompt: no candidates, the block reason,
    # usage, modelVersion and responseId in one chunk
    blocked = streams.gemini_events(
        'data: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": '
        '{"promptTokenCount": 7, "totalTokenCount": 7}, "modelVersion": "gemini-2.5-flash", '
        '"responseId": "bWQtaN-blocked"}'
    )
    result = result_of(await run([sse(blocked)]))
    assert result.finish_reason is FinishReason.BLOCKED
    assert result.response_id == "bWQtaN-blocked"
    assert result.model == "gemini-2.5-flash"
    assert result.metadata == {"agentloop.provider_finish_reason": "PROHIBITED_CONTENT"}
    assert result.output_items == ()


async def test_429_with_retry_after_then_success() -> None:
    recorder = SleepRecorder()
    limited = json_error(
        429,
        {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}},
        ("Retry-After", "1"),
    )
    async with ReplayServer([limited, sse(streams.text_stream())]) as server:
        events_ = await collect(model_for(server, retry=fast_retry(recorder)), turn([user("x")]))
        assert len(server.requests) == 2
    assert recorder.delays == [1.0]
    assert result_of(events_).finish_reason is FinishReason.COMPLETED


async def test_500_three_times_then_failure() -> None:
    failure = json_error(500, {"error": {"code": 500, "message": "Internal", "status": "INTERNAL"}})
    async with ReplayServer([failure] * 3) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
        assert len(server.requests) == 3
    assert (caught.value.status, caught.value.error_type) == (500, "INTERNAL")
    assert str(caught.value) == (
        "Gemini request failed with status 500 (INTERNAL): Internal (gave up after 3 attempts)"
    )


async def test_stream_cut_mid_event() -> None:
    data = streams.text_stream()
    with pytest.raises(ProviderError) as caught:
        await run([sse(data[: split_inside(data, "wörld", 2)], cut=True)])
    assert caught.value.error_type == "stream_broken"


async def test_stream_ending_without_finish_reason_is_a_provider_error() -> None:
    data = streams.text_stream()
    with pytest.raises(ProviderError) as caught:
        await run([sse(data[: data.rindex(b"data: ")])])
    assert caught.value.error_type == "incomplete_stream"
    assert "ended before a chunk with a finishReason" in str(caught.value)


async def test_error_object_mid_stream() -> None:
    with pytest.raises(ProviderError) as caught:
        await run([sse(streams.error_midstream())])
    assert (caught.value.status, caught.value.error_type) == (503, "UNAVAILABLE")
    assert str(caught.value) == "Gemini: stream error (UNAVAILABLE): The model is overloaded."


async def test_malformed_json_chunk() -> None:
    with pytest.raises(ProviderError) as caught:
        await run([sse(streams.malformed_stream())])
    assert str(caught.value).startswith("Gemini: malformed JSON in a stream event")


async def test_cancelling_the_consumer_closes_the_connection() -> None:
    first = streams.gemini_events(streams.chunk([{"text": "Hel"}]))
    async with ReplayServer([sse(first, hang=True)]) as server:
        await cancel_at_first_text(model_for(server), turn([user("x")]))
        with anyio.fail_after(5):
            await server.disconnected.wait()


async def test_request_body_for_a_multi_turn_transcript_with_tool_results() -> None:
    transcript = multi_turn_transcript()
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = model_for(server, tool_choice="required", max_tokens=512, thinking_budget=128)
        await collect(model, turn(transcript, [TIME, WEATHER]))
        body = server.requests[0].json
    assert body == {
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris and time in CET?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    {
                        "functionCall": {
                            "name": "get_weather",
                            "args": {"city": "Paris"},
                            "id": "call_1",
                        }
                    },
                    {"functionCall": {"name": "get_time", "args": {"tz": "CET"}, "id": "call_2"}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "response": {"output": "18°C, cloudy"},
                            "id": "call_1",
                        }
                    },
                    {
                        "functionResponse": {
                            "name": "get_time",
                            "response": {"error": {"error": "unknown tz"}},
                            "id": "call_2",
                        }
                    },
                    {"text": "<system-reminder>\nBackground task 7 finished.\n</system-reminder>"},
                    {"text": "Thanks. Summarise."},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_time",
                        "description": "Current time in a timezone",
                        "parametersJsonSchema": TIME.input_schema,
                    },
                    {
                        "name": "get_weather",
                        "description": "Current weather for a city",
                        "parametersJsonSchema": WEATHER.input_schema,
                    },
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {
            "maxOutputTokens": 512,
            "thinkingConfig": {"thinkingBudget": 128, "includeThoughts": True},
        },
    }


async def test_generated_ids_are_not_sent_back() -> None:
    call = ToolCallPart(
        "gen_1", "get_weather", {"city": "Oslo"}, metadata={"gemini.generated_id": True}
    )
    transcript = [
        user("x"),
        Item(ItemKind.ASSISTANT, (call,)),
        Item(ItemKind.TOOL, (ToolResultPartFor("gen_1"),)),
    ]
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server, tool_choice="get_weather"), turn(transcript, [WEATHER]))
        body = server.requests[0].json
    assert body["contents"][1]["parts"] == [
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}
    ]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"output": "ok"}}}
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }


def ToolResultPartFor(call_id: str) -> Any:
    from agentloop import ToolResultPart

    return ToolResultPart(call_id, "ok")


async def test_required_explicit_cache_is_an_error() -> None:
    async with ReplayServer([]) as server:
        session = await model_for(server).start_session(SessionConfig("s1"))
        cache = PromptCacheRequest.explicit_required([AfterTools()])
        with pytest.raises(ProviderError, match="cannot honour a required explicit prompt cache"):
            await session.begin_turn(turn([user("x")], cache=cache), None)


async def test_api_key_read_from_environment_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    echo = json_error(400, {"error": {"code": 400, "message": f"API key {KEY} not valid"}})
    async with ReplayServer([echo]) as server:
        model = GeminiModel(
            "gemini-2.5-flash", base_url=server.url, retry=fast_retry(), use_env_key=True
        )
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("x")]))
        assert server.requests[0].headers["x-goog-api-key"] == KEY
    assert KEY not in repr(model)
    assert (
        str(caught.value) == "Gemini request failed with status 400: API key [REDACTED] not valid"
    )


def gemini_responder(request: Recorded) -> Reply:
    """Round 1: call for Paris; round 2: call for Rome; then the answer."""
    parts = [p for c in request.json["contents"] for p in c["parts"]]
    results = [
        p["functionResponse"]["response"]["output"] for p in parts if "functionResponse" in p
    ]
    if len(results) < 2:
        city = "Paris" if not results else "Rome"
        call = {"functionCall": {"name": "get_weather", "args": {"city": city}}}
        return sse(streams.gemini_events(streams.chunk([call], "STOP")))
    answer = f"Paris {results[0]}, Rome {results[1]}."
    return sse(streams.gemini_events(streams.chunk([{"text": answer}], "STOP")))


async def test_agent_end_to_end_two_tool_rounds() -> None:
    async with ReplayServer(gemini_responder) as server:
        with anyio.fail_after(10):
            step, driver, _ = await run_agent(
                model_for(server), "Weather in Paris, then Rome?", [Weather()]
            )
        assert len(server.requests) == 3
    assert step.result.finish_reason is FinishReason.COMPLETED
    transcript = driver.snapshot().transcript
    assert transcript[-1].text_content == "Paris 18C, Rome 24C."
    calls = [call.id for item in transcript for call in item.tool_calls()]
    assert calls == ["gen_1", "gen_2"]
