"""OpenAIResponsesModel on the loopback server: the request it sends, the stream it reads.

The request is checked against OpenAI's ``POST /v1/responses`` reference (openai-python's
``types/responses/response_create_params.py`` and the input item params): ``input``
items, ``instructions``, flat function tools with ``strict``, ``tool_choice``,
``store: false``, ``include`` and ``stream: true``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from agentloop import (
    AppendText,
    BeginPart,
    CancellationController,
    CommitPart,
    FinishReason,
    Item,
    ItemKind,
    PartKind,
    SessionConfig,
    TextPart,
    ToolCallPart,
    Usage,
)
from agentloop.providers import OpenAIResponsesModel

from . import _responses_streams as streams
from ._helpers import (
    TIME,
    WEATHER,
    Weather,
    cancel_at_first_text,
    collect,
    fast_retry,
    multi_turn_transcript,
    result_of,
    run_agent,
    stamped,
    turn,
    user,
)
from ._server import Recorded, ReplayServer, Reply, split_at, split_inside, sse

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
STAMP = ("openai", "gpt-5", streams.MODEL, streams.RESPONSE_ID)


def model_for(server: ReplayServer, **options: Any) -> OpenAIResponsesModel:
    options.setdefault("retry", fast_retry())
    return OpenAIResponsesModel("gpt-5", base_url=f"{server.url}/v1", api_key=KEY, **options)


async def test_a_text_answer_streams_in_deltas_split_anywhere_on_the_wire() -> None:
    data = streams.text_stream()
    cuts = (
        split_inside(data, "data: {", 3),
        split_inside(data, "ö", 1),  # between the two bytes of ö
        split_inside(data, "🌍", 2),  # inside a 4-byte character
        data.index(b"\n\n") + 1,
    )
    async with ReplayServer([sse(*split_at(data, *sorted(cuts)))]) as server:
        events = await collect(model_for(server), turn([user("hi")]))
        request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    final = TextPart("Hello wörld 🌍", metadata={"openai.item_id": "msg_1"})
    usage = Usage(input_tokens=36, output_tokens=87)
    assert events[:-1] == [
        BeginPart("part-0", PartKind.TEXT),
        AppendText("part-0", "Hello "),
        AppendText("part-0", "wörld 🌍"),
        CommitPart("part-0", final),
        usage,
    ]
    result = result_of(events)
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.output_items == (stamped((final,), *STAMP),)
    assert (result.model, result.response_id) == (streams.MODEL, streams.RESPONSE_ID)
    assert result.usage == usage
    assert result.metadata == {"agentloop.provider_finish_reason": "completed"}


async def test_the_request_for_a_multi_turn_transcript_byte_for_byte() -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = model_for(server, tool_choice="get_weather", max_tokens=256)
        await collect(model, turn(multi_turn_transcript(), [TIME, WEATHER]))
        raw = server.requests[0].body
    expected = {
        "model": "gpt-5",
        "instructions": "You are terse.",
        "input": [
            {"type": "message", "role": "user", "content": "Weather in Paris and time in CET?"},
            # the Anthropic-signed reasoning is not OpenAI's: it is not sent
            {"type": "message", "role": "assistant", "content": "Checking."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_time",
                "arguments": '{"tz":"CET"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18°C, cloudy"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": '{"error":"unknown tz"}',
            },
            {
                "type": "message",
                "role": "user",
                "content": "<system-reminder>\nBackground task 7 finished.\n</system-reminder>",
            },
            {"type": "message", "role": "user", "content": "Thanks. Summarise."},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_time",
                "description": "Current time in a timezone",
                "parameters": TIME.input_schema,
                "strict": False,  # not closed with additionalProperties: false
            },
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER.input_schema,
                "strict": False,
            },
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 256,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "stream": True,
    }
    assert raw == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()


async def test_instructions_take_the_leading_system_items_and_later_ones_stay_in_place() -> None:
    transcript = [
        Item.text(ItemKind.SYSTEM, "Be brief."),
        Item.text(ItemKind.SYSTEM, "Answer in French."),
        user("hi"),
        Item.text(ItemKind.DEVELOPER, "Now use metric units."),
        Item.text(ItemKind.CONTEXT, "The user is in Lyon."),
        user("weather?"),
    ]
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server), turn(transcript))
        body = server.requests[0].json
    assert body["instructions"] == "Be brief.\n\nAnswer in French."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "developer", "content": "Now use metric units."},
        {"type": "message", "role": "system", "content": "The user is in Lyon."},
        {"type": "message", "role": "user", "content": "weather?"},
    ]


async def test_a_function_call_is_assembled_and_announced() -> None:
    stream = streams.Stream().created()
    stream.call(0, "get_weather", '{"city": "Paris"}', "call_abc", item_id="fc_9")
    async with ReplayServer([sse(stream.completed().body())]) as server:
        events = await collect(model_for(server), turn([user("hi")], [WEATHER]))
    call = ToolCallPart(
        "call_abc", "get_weather", {"city": "Paris"}, metadata={"openai.item_id": "fc_9"}
    )
    assert events[:-1] == [
        BeginPart("part-0", PartKind.TOOL_CALL),
        AppendText("part-0", '{"cit'),
        AppendText("part-0", 'y": "'),
        AppendText("part-0", 'Paris"}'),
        call,
        CommitPart("part-0", call),
        Usage(input_tokens=36, output_tokens=87),
    ]
    result = result_of(events)
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.output_items == (stamped((call,), *STAMP),)


async def test_parallel_calls_and_text_keep_their_output_order() -> None:
    stream = streams.Stream().created()
    stream.message(0, "Looking both up.", item_id="msg_a")
    stream.call(1, "get_weather", '{"city":"Paris"}', "call_w", item_id="fc_w")
    stream.call(2, "get_time", '{"tz":"CET"}', "call_t", item_id="fc_t")
    async with ReplayServer([sse(stream.completed().body())]) as server:
        result = result_of(await collect(model_for(server), turn([user("hi")], [TIME, WEATHER])))
    assert result.output_items[0].parts == (
        TextPart("Looking both up.", metadata={"openai.item_id": "msg_a"}),
        ToolCallPart(
            "call_w", "get_weather", {"city": "Paris"}, metadata={"openai.item_id": "fc_w"}
        ),
        ToolCallPart("call_t", "get_time", {"tz": "CET"}, metadata={"openai.item_id": "fc_t"}),
    )


async def test_usage_reads_cached_and_reasoning_tokens() -> None:
    stream = streams.Stream().created().message(0, "4")
    usage = streams.make_usage(input_tokens=2006, output_tokens=300, cached=1920, reasoning=256)
    usage["input_tokens_details"]["cache_write_tokens"] = 86
    async with ReplayServer([sse(stream.completed(usage).body())]) as server:
        result = result_of(await collect(model_for(server), turn([user("2+2")])))
    assert result.usage == Usage(
        input_tokens=2006,
        output_tokens=300,
        reasoning_tokens=256,
        cache_read_tokens=1920,
        cache_write_tokens=86,
    )


async def test_a_refusal_is_text_marked_as_one_and_blocks_the_turn() -> None:
    stream = streams.Stream().created()
    added = {"type": "message", "id": "msg_r", "status": "in_progress", "role": "assistant"}
    stream.event("response.output_item.added", output_index=0, item={**added, "content": []})
    where = {"item_id": "msg_r", "output_index": 0, "content_index": 0}
    stream.event("response.refusal.delta", **where, delta="I can't help")
    stream.event("response.refusal.done", **where, refusal="I can't help with that.")
    content = [{"type": "refusal", "refusal": "I can't help with that."}]
    done = {**added, "status": "completed", "content": content}
    stream.event("response.output_item.done", output_index=0, item=done)
    async with ReplayServer([sse(stream.completed().body())]) as server:
        events = await collect(model_for(server), turn([user("x")]))
    result = result_of(events)
    assert result.finish_reason is FinishReason.BLOCKED
    refusal = TextPart(
        "I can't help with that.", metadata={"openai.item_id": "msg_r", "openai.refusal": True}
    )
    assert result.output_items[0].parts == (refusal,)
    assert [e for e in events if isinstance(e, AppendText)] == [
        AppendText("part-0", "I can't help"),
        AppendText("part-0", " with that."),  # what the done event adds to the deltas
    ]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("max_output_tokens", FinishReason.MAX_TOKENS),
        ("content_filter", FinishReason.BLOCKED),
        ("something_new", FinishReason.OTHER),
    ],
)
async def test_an_incomplete_response_ends_with_its_reason(
    reason: str, expected: FinishReason
) -> None:
    stream = streams.Stream().created()
    added = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant"}
    stream.event("response.output_item.added", output_index=0, item={**added, "content": []})
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    stream.event("response.output_text.delta", **where, delta="One, two, thr")
    async with ReplayServer([sse(stream.incomplete(reason).body())]) as server:
        result = result_of(await collect(model_for(server), turn([user("count")])))
    assert result.finish_reason is expected
    assert result.metadata == {"agentloop.provider_finish_reason": reason}
    assert result.output_items == (
        stamped((TextPart("One, two, thr", metadata={"openai.item_id": "msg_1"}),), *STAMP),
    )


async def test_cancelling_the_consumer_closes_the_connection() -> None:
    stream = streams.Stream().created()
    added = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant"}
    stream.event("response.output_item.added", output_index=0, item={**added, "content": []})
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    stream.event("response.output_text.delta", **where, delta="Hel")
    async with ReplayServer([sse(stream.body(), hang=True)]) as server:
        seen = await cancel_at_first_text(model_for(server), turn([user("x")]))
        with anyio.fail_after(5):
            await server.disconnected.wait()
    assert seen == [BeginPart("part-0", PartKind.TEXT), AppendText("part-0", "Hel")]


async def test_turn_cancellation_keeps_the_text_and_closes_the_stream() -> None:
    controller = CancellationController()
    stream = streams.Stream().created()
    added = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant"}
    stream.event("response.output_item.added", output_index=0, item={**added, "content": []})
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    stream.event("response.output_text.delta", **where, delta="Hel")
    stream.event("response.output_text.delta", **where, delta="lo")
    async with ReplayServer([sse(stream.body(), hang=True)]) as server:
        session = await model_for(server).start_session(SessionConfig("s1"))
        events = []
        async for event in await session.begin_turn(
            turn([user("x")]), controller.handle().snapshot()
        ):
            events.append(event)
            if isinstance(event, AppendText):
                controller.interrupt()
        with anyio.fail_after(5):
            await server.disconnected.wait()
    result = result_of(events)
    assert result.finish_reason is FinishReason.CANCELLED
    assert result.output_items == (
        stamped((TextPart("Hel", metadata={"openai.item_id": "msg_1"}),), *STAMP),
    )


# -- a real agent loop -----------------------------------------------------------------------


def responder(request: Recorded) -> Reply:
    """Round 1: call for Paris; round 2: call for Rome; then the answer from both outputs."""
    items = request.json["input"]
    outputs = [item["output"] for item in items if item.get("type") == "function_call_output"]
    calls = [item for item in items if item.get("type") == "function_call"]
    assert [call["call_id"] for call in calls] == [f"call_{n}" for n in range(len(outputs))]
    stream = streams.Stream().created()
    if len(outputs) < 2:
        city = ("Paris", "Rome")[len(outputs)]
        stream.call(0, "get_weather", json.dumps({"city": city}), f"call_{len(outputs)}")
    else:
        stream.message(0, f"Paris {outputs[0]}, Rome {outputs[1]}.")
    return sse(stream.completed().body())


async def test_an_agent_runs_two_tool_rounds_pairing_calls_and_outputs_by_call_id() -> None:
    async with ReplayServer(responder) as server:
        with anyio.fail_after(10):
            step, driver, pauses = await run_agent(
                model_for(server), "Weather in Paris, then Rome?", [Weather()]
            )
        bodies = [request.json for request in server.requests]
    assert pauses == 2
    assert step.result.finish_reason is FinishReason.COMPLETED
    transcript = driver.snapshot().transcript
    assert transcript[-1].text_content == "Paris 18C, Rome 24C."
    assert bodies[2]["input"] == [
        {"type": "message", "role": "user", "content": "Weather in Paris, then Rome?"},
        {
            "type": "function_call",
            "call_id": "call_0",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_0", "output": "18C"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Rome"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "24C"},
    ]
    assert all(body["tools"][0]["name"] == "get_weather" for body in bodies)
