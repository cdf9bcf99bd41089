"""OpenAIChatModel against a local SSE replay server: real sockets, real wire format."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from agentloop import (
    Agent,
    AppendText,
    BeginPart,
    CancellationController,
    CommitPart,
    Finished,
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
from agentloop.providers import OpenAIChatModel
from agentloop.tools._executor import RAW_ARGUMENTS_KEY

from . import _openai_streams as streams
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

KEY = "sk-test-0123456789abcdef"
STAMP = ("openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "chatcmpl-123")


def model_for(server: ReplayServer, **options: Any) -> OpenAIChatModel:
    options.setdefault("retry", fast_retry())
    return OpenAIChatModel("gpt-4o-mini", base_url=f"{server.url}/v1", api_key=KEY, **options)


async def run(replies: list[Reply], request: Any = None, **options: Any) -> list[Any]:
    return await replay(lambda s: model_for(s, **options), replies, request or turn([user("hi")]))


async def test_text_only_with_utf8_and_sse_lines_split_across_chunks() -> None:
    data = streams.text_stream()
    cuts = (
        split_inside(data, "data: {", 3),  # inside the "data:" field name
        split_inside(data, "ö", 1),  # between the two bytes of ö
        split_inside(data, "🌍", 2),  # in the middle of a 4-byte character
        data.index(b"\n\n") + 1,  # between the two newlines ending a record
    )
    async with ReplayServer([sse(*split_at(data, *sorted(cuts)))]) as server:
        events = await collect(model_for(server), turn([user("hi")]))
        assert server.requests[0].path == "/v1/chat/completions"
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    usage = Usage(input_tokens=9, output_tokens=12)
    final = TextPart("Hello wörld 🌍")
    assert events[:-1] == [
        BeginPart("part-0", PartKind.TEXT),
        AppendText("part-0", "Hello"),
        AppendText("part-0", " wörld"),
        AppendText("part-0", " 🌍"),
        CommitPart("part-0", final),
        usage,
    ]
    result = result_of(events)
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.output_items == (stamped((final,), *STAMP),)
    assert result.usage == usage
    assert result.model == "gpt-4o-mini-2024-07-18"
    assert result.response_id == "chatcmpl-123"
    assert result.metadata == {"agentloop.provider_finish_reason": "stop"}


async def test_one_tool_call_is_assembled_from_fragments() -> None:
    events = await run([sse(streams.tool_call_stream())], turn([user("hi")], [WEATHER]))
    call = ToolCallPart("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", {"city": "Paris"})
    assert events[:-1] == [
        BeginPart("part-0", PartKind.TOOL_CALL),
        AppendText("part-0", '{"ci'),
        AppendText("part-0", 'ty": "Par'),
        AppendText("part-0", 'is"}'),
        call,
        CommitPart("part-0", call),
        Usage(input_tokens=30, output_tokens=17),
    ]
    result = result_of(events)
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.output_items == (stamped((call,), *STAMP),)


async def test_parallel_tool_calls_keep_their_index_order() -> None:
    events = await run([sse(streams.parallel_calls_stream())], turn([user("hi")], [TIME, WEATHER]))
    result = result_of(events)
    assert result.output_items[0].parts == (
        ToolCallPart("call_a", "get_weather", {"city": "Paris"}),
        ToolCallPart("call_b", "get_time", {"tz": "CET"}),
    )
    announced = [event for event in events if isinstance(event, ToolCallPart)]
    assert [call.id for call in announced] == ["call_a", "call_b"]
    assert result.usage is None


async def test_reasoning_content_usage_and_cached_tokens() -> None:
    events = await run([sse(streams.reasoning_stream())])
    result = result_of(events)
    assert result.output_items[0].parts == (ReasoningPart("Think: 2+2 is 4."), TextPart("4"))
    assert result.usage == Usage(
        input_tokens=10, output_tokens=20, reasoning_tokens=15, cache_read_tokens=6
    )
    assert events[0] == BeginPart("part-0", PartKind.REASONING)


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("stop", FinishReason.COMPLETED),
        ("length", FinishReason.MAX_TOKENS),
        ("content_filter", FinishReason.BLOCKED),
        ("tool_calls", FinishReason.TOOL_CALL),
        ("function_call", FinishReason.TOOL_CALL),
        ("cancelled", FinishReason.CANCELLED),
        ("something_new", FinishReason.OTHER),
    ],
)
async def test_each_finish_reason_is_mapped(wire: str, expected: FinishReason) -> None:
    result = result_of(await run([sse(streams.text_stream(wire))]))
    assert result.finish_reason is expected
    assert result.metadata == {"agentloop.provider_finish_reason": wire}


async def test_429_with_retry_after_then_success() -> None:
    recorder = SleepRecorder()
    limited = json_error(
        429,
        {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}},
        ("Retry-After", "2"),
    )
    async with ReplayServer([limited, sse(streams.text_stream())]) as server:
        events = await collect(model_for(server, retry=fast_retry(recorder)), turn([user("x")]))
        assert len(server.requests) == 2
    assert recorder.delays == [2.0]
    assert result_of(events).output_items[0].text_content == "Hello wörld 🌍"


async def test_500_three_times_then_failure_with_status() -> None:
    recorder = SleepRecorder()
    failure = json_error(500, {"error": {"message": "boom", "type": "server_error"}})
    async with ReplayServer([failure, failure, failure]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server, retry=fast_retry(recorder)), turn([user("x")]))
        assert len(server.requests) == 3
    assert caught.value.status == 500
    assert caught.value.error_type == "server_error"
    assert str(caught.value) == (
        "OpenAI request failed with status 500 (server_error): boom (gave up after 3 attempts)"
    )
    assert len(recorder.delays) == 2
    assert all(0 < delay <= 0.002 for delay in recorder.delays)


async def test_400_is_not_retried() -> None:
    bad = json_error(400, {"error": {"message": "bad model", "type": "invalid_request_error"}})
    async with ReplayServer([bad]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
        assert len(server.requests) == 1
    assert (caught.value.status, caught.value.error_type) == (400, "invalid_request_error")
    assert str(caught.value) == (
        "OpenAI request failed with status 400 (invalid_request_error): bad model"
    )


async def test_connection_refused_is_retried_then_fails() -> None:
    async with ReplayServer([]) as server:
        port = server.port
    recorder = SleepRecorder()
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", retry=fast_retry(recorder))
    with pytest.raises(ProviderError) as caught:
        await collect(model, turn([user("x")]))
    assert caught.value.error_type == "connection"
    assert caught.value.status is None
    assert "gave up after 3 attempts" in str(caught.value)
    assert len(recorder.delays) == 2


async def test_stream_cut_mid_event_is_a_provider_error() -> None:
    data = streams.text_stream()
    cut = split_inside(data, "wörld", 2)
    with pytest.raises(ProviderError) as caught:
        await run([sse(data[:cut], cut=True)])
    assert caught.value.error_type == "stream_broken"
    assert "the response stream broke after it started" in str(caught.value)


async def test_stream_closed_cleanly_without_done_is_a_provider_error() -> None:
    data = streams.text_stream()
    with pytest.raises(ProviderError) as caught:
        await run([sse(data[: data.index(b"data: [DONE]")])])
    assert caught.value.error_type == "incomplete_stream"
    assert "ended before 'data: [DONE]'" in str(caught.value)


async def test_error_event_mid_stream() -> None:
    with pytest.raises(ProviderError) as caught:
        await run([sse(streams.error_midstream())])
    assert caught.value.error_type == "server_error"
    assert str(caught.value) == "OpenAI: stream error (server_error): The server had an error"


async def test_malformed_json_chunk() -> None:
    with pytest.raises(ProviderError) as caught:
        await run([sse(streams.malformed_stream())])
    assert caught.value.error_type == "malformed_stream"
    assert str(caught.value).startswith("OpenAI: malformed JSON in a stream event")


async def test_cancelling_the_consumer_closes_the_connection() -> None:
    first = streams.chunk({"content": "Hel"}) + "\n\n"
    async with ReplayServer([sse(first.encode(), hang=True)]) as server:
        seen = await cancel_at_first_text(model_for(server), turn([user("x")]))
        with anyio.fail_after(5):
            await server.disconnected.wait()
    assert seen == [BeginPart("part-0", PartKind.TEXT), AppendText("part-0", "Hel")]


async def test_turn_cancellation_ends_with_a_cancelled_result_and_closes() -> None:
    controller = CancellationController()
    cancellation = controller.handle().snapshot()
    records = (streams.chunk({"content": "Hel"}) + "\n\n").encode()
    more = (streams.chunk({"content": "lo"}) + "\n\n").encode()
    async with ReplayServer([sse(records, more, hang=True)]) as server:
        session = await model_for(server).start_session(SessionConfig("s1"))
        stream = await session.begin_turn(turn([user("x")]), cancellation)
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, AppendText):
                controller.interrupt()
        with anyio.fail_after(5):
            await server.disconnected.wait()
    result = result_of(events)
    assert result.finish_reason is FinishReason.CANCELLED
    assert result.output_items == (stamped((TextPart("Hel"),), *STAMP),)


async def test_request_body_for_a_multi_turn_transcript_with_tool_results() -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = model_for(server, tool_choice="get_weather", max_tokens=256)
        await collect(model, turn(multi_turn_transcript(), [TIME, WEATHER]))
        body = server.requests[0].json
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and time in CET?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": '{"tz":"CET"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18°C, cloudy"},
            {"role": "tool", "tool_call_id": "call_2", "content": '{"error":"unknown tz"}'},
            {
                "role": "user",
                "content": "<system-reminder>\nBackground task 7 finished.\n</system-reminder>",
            },
            {"role": "user", "content": "Thanks. Summarise."},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "description": "Current time in a timezone",
                    "parameters": TIME.input_schema,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER.input_schema,
                },
            },
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_tokens": 256,
    }


async def test_tool_only_assistant_message_sends_empty_string_content() -> None:
    transcript = [
        user("x"),
        Item(ItemKind.ASSISTANT, (ToolCallPart("c1", "get_weather", {"city": "Oslo"}),)),
        Item(ItemKind.TOOL, ()),
    ]
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server, tool_choice="required"), turn(transcript, [WEATHER]))
        body = server.requests[0].json
    assert body["messages"][1]["content"] == ""
    assert body["tool_choice"] == "required"


async def test_repeated_function_name_is_not_concatenated() -> None:
    result = result_of(await run([sse(streams.repeated_name_stream())]))
    assert result.output_items[0].parts == (ToolCallPart("call__0_add_cmpl-1", "add", {"a": 1}),)


async def test_unparsable_arguments_keep_the_raw_text() -> None:
    result = result_of(await run([sse(streams.bad_arguments_stream())]))
    (call,) = result.output_items[0].parts
    assert call == ToolCallPart(
        "call_x", "get_weather", '{"city": Par', metadata={RAW_ARGUMENTS_KEY: '{"city": Par'}
    )


async def test_api_key_is_redacted_from_repr_and_errors() -> None:
    echo = json_error(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    async with ReplayServer([echo]) as server:
        model = model_for(server)
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("x")]))
    assert KEY not in repr(model)
    assert KEY not in str(caught.value)
    assert "Incorrect API key provided: [REDACTED]" in str(caught.value)


# -- end to end ------------------------------------------------------------------------------


def openai_responder(request: Recorded) -> Reply:
    """Round 1: call for Paris; round 2: call for Rome; then the answer."""
    messages = request.json["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        arguments = json.dumps({"city": "Paris"})
        call = {"index": 0, "id": "call_p", "type": "function"}
        return sse(
            streams.events(
                streams.chunk({"tool_calls": [{**call, "function": {"name": "get_weather"}}]}),
                streams.chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
                streams.chunk({}, "tool_calls"),
                streams.DONE,
            )
        )
    if len(results) == 1:
        call = {"index": 0, "id": "call_r", "type": "function"}
        function = {"name": "get_weather", "arguments": '{"city": "Rome"}'}
        return sse(
            streams.events(
                streams.chunk({"tool_calls": [{**call, "function": function}]}),
                streams.chunk({}, "tool_calls"),
                streams.DONE,
            )
        )
    answer = f"Paris {results[0]}, Rome {results[1]}."
    return sse(
        streams.events(streams.chunk({"content": answer}), streams.chunk({}, "stop"), streams.DONE)
    )


async def test_agent_end_to_end_two_tool_rounds() -> None:
    async with ReplayServer(openai_responder) as server:
        with anyio.fail_after(10):
            step, driver, pauses = await run_agent(
                model_for(server), "Weather in Paris, then Rome?", [Weather()]
            )
        assert len(server.requests) == 3
    assert pauses == 2
    assert step.result.finish_reason is FinishReason.COMPLETED
    transcript = driver.snapshot().transcript
    assert [item.kind for item in transcript] == [
        ItemKind.USER,
        ItemKind.ASSISTANT,
        ItemKind.TOOL,
        ItemKind.ASSISTANT,
        ItemKind.TOOL,
        ItemKind.ASSISTANT,
    ]
    assert transcript[-1].text_content == "Paris 18C, Rome 24C."
    assert [r.output for item in transcript for r in item.tool_results()] == ["18C", "24C"]


async def test_agent_interrupt_mid_stream_closes_the_connection() -> None:
    controller = CancellationController()
    first = (streams.chunk({"content": "Hel"}) + "\n\n").encode()
    async with ReplayServer([sse(first, hang=True)]) as server:
        agent = (
            Agent.builder()
            .model(model_for(server))
            .cancellation(controller.handle())
            .input([user("hi")])
            .build()
        )
        driver = await agent.start(SessionConfig("s1"))
        steps: list[Any] = []

        async def drive() -> None:
            steps.append(await driver.next())

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(drive)
                while not server.requests:  # noqa: ASYNC110 - polls the test server
                    await anyio.sleep(0.01)
                await anyio.sleep(0.05)
                controller.interrupt()
            await server.disconnected.wait()
    assert isinstance(steps[0], Finished)
    assert steps[0].result.finish_reason is FinishReason.CANCELLED
