"""OpenAIChatModel options on the wire: non-streaming, tool_choice, same-role merging."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop import (
    AppendText,
    BeginPart,
    CommitPart,
    FinishReason,
    InvalidInputError,
    Item,
    ItemKind,
    PartKind,
    ProviderError,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agentloop.providers import OpenAIChatModel

from . import _openai_streams as streams
from ._helpers import TIME, WEATHER, collect, fast_retry, replay, result_of, stamped, turn, user
from ._server import ReplayServer, Reply, sse

pytestmark = pytest.mark.anyio


def model_for(server: ReplayServer, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "smollm2", base_url=f"{server.url}/v1", api_key="k", retry=fast_retry(), **options
    )


def completion(message: dict[str, Any], finish: str, **extra: Any) -> Reply:
    """A non-streamed ``chat.completion`` reply (llama-cpp-python's shape)."""
    body = {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "smollm2",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 22, "completion_tokens": 12, "total_tokens": 34},
        **extra,
    }
    return Reply(
        chunks=(json.dumps(body).encode(),), headers=(("Content-Type", "application/json"),)
    )


async def test_non_streaming_text_gives_the_same_events_as_a_stream() -> None:
    reply = completion({"role": "assistant", "content": "Hello wörld"}, "stop")
    async with ReplayServer([reply]) as server:
        events = await collect(model_for(server, stream=False), turn([user("hi")]))
        request = server.requests[0]
    assert request.json["stream"] is False
    assert "stream_options" not in request.json
    assert request.headers["accept"] == "application/json"
    usage = Usage(input_tokens=22, output_tokens=12)
    assert events[:-1] == [
        BeginPart("part-0", PartKind.TEXT),
        AppendText("part-0", "Hello wörld"),
        CommitPart("part-0", TextPart("Hello wörld")),
        usage,
    ]
    result = result_of(events)
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.output_items == (
        stamped((TextPart("Hello wörld"),), "openai", "smollm2", "smollm2", "chatcmpl-9"),
    )
    assert (result.model, result.response_id) == ("smollm2", "chatcmpl-9")
    assert result.metadata == {"agentloop.provider_finish_reason": "stop"}


async def test_non_streaming_tool_call_with_null_content_and_legacy_function_call() -> None:
    function = {"name": "get_weather", "arguments": '{ "city":"Paris"}'}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call__0_get_weather_cmpl-1", "type": "function", "function": function}
        ],
        "function_call": function,
    }
    events = await replay(
        lambda server: model_for(server, stream=False, tool_choice="get_weather"),
        [completion(message, "tool_calls")],
        turn([user("Weather in Paris?")], [WEATHER]),
    )
    call = ToolCallPart("call__0_get_weather_cmpl-1", "get_weather", {"city": "Paris"})
    result = result_of(events)
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.output_items == (stamped((call,), "openai", "smollm2", "smollm2", "chatcmpl-9"),)
    assert [type(event).__name__ for event in events] == [
        "BeginPart",
        "AppendText",
        "ToolCallPart",
        "CommitPart",
        "Usage",
        "ModelTurnResult",
    ]


async def test_non_streaming_parallel_calls_keep_their_order() -> None:
    calls = [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    events = await replay(
        lambda server: model_for(server, stream=False),
        [completion({"role": "assistant", "content": "", "tool_calls": calls}, "tool_calls")],
        turn([user("x")], [WEATHER, TIME]),
    )
    (item,) = result_of(events).output_items
    assert item.parts == (
        ToolCallPart("a", "get_weather", {}),
        ToolCallPart("b", "get_time", {}),
    )


async def test_non_streaming_malformed_body_is_a_provider_error() -> None:
    reply = Reply(chunks=(b"<html>oops</html>",), headers=(("Content-Type", "text/html"),))
    with pytest.raises(ProviderError) as caught:
        await replay(lambda server: model_for(server, stream=False), [reply], turn([user("x")]))
    assert str(caught.value) == (
        "OpenAI: malformed JSON in the response body: Expecting value in '<html>oops</html>'"
    )


async def test_non_streaming_error_object_is_a_provider_error() -> None:
    body = {"error": {"message": "context too long", "type": "invalid_request_error"}}
    reply = Reply(chunks=(json.dumps(body).encode(),))
    with pytest.raises(ProviderError) as caught:
        await replay(lambda server: model_for(server, stream=False), [reply], turn([user("x")]))
    assert str(caught.value) == "OpenAI: stream error (invalid_request_error): context too long"


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
async def test_tool_choice_modes_pass_through(choice: str) -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server, tool_choice=choice), turn([user("x")], [WEATHER]))
        assert server.requests[0].json["tool_choice"] == choice


async def test_tool_choice_is_left_out_without_tools() -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server, tool_choice="get_weather"), turn([user("x")]))
        assert "tool_choice" not in server.requests[0].json


async def test_tool_choice_naming_an_absent_tool_is_refused_before_sending() -> None:
    async with ReplayServer([]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server, tool_choice="add"), turn([user("x")], [WEATHER]))
        assert server.requests == []
    assert str(caught.value) == (
        "OpenAI: tool_choice names tool 'add', which is not among this turn's tools "
        "['get_weather']; name one of them or use 'auto', 'none' or 'required'"
    )


@pytest.mark.parametrize("choice", ["", " auto", 3])
def test_malformed_tool_choice_is_refused(choice: Any) -> None:
    with pytest.raises(InvalidInputError) as caught:
        OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", tool_choice=choice)
    assert str(caught.value) == (
        "OpenAIChatModel: tool_choice must be 'auto', 'none', 'required' or a tool name, "
        f"got {choice!r}"
    )


def merge_transcript() -> list[Item]:
    return [
        Item.text(ItemKind.SYSTEM, "Be terse."),
        Item.text(ItemKind.DEVELOPER, "Use tools."),
        user("Weather?"),
        Item.notification("Task done."),
        Item(ItemKind.ASSISTANT, (TextPart("Looking."),)),
        Item(ItemKind.ASSISTANT, (ToolCallPart("c1", "get_weather", {"city": "Oslo"}),)),
        Item(ItemKind.TOOL, (ToolResultPart("c1", "5C"), ToolResultPart("c2", "x"))),
        user("Thanks."),
    ]


async def test_merge_same_role_gives_strict_alternation() -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = model_for(server, merge_same_role=True)
        await collect(model, turn(merge_transcript(), [WEATHER]))
        messages = server.requests[0].json["messages"]
    function = {"name": "get_weather", "arguments": '{"city":"Oslo"}'}
    call = {"id": "c1", "type": "function", "function": function}
    assert messages == [
        {"role": "system", "content": "Be terse.\n\nUse tools."},
        {
            "role": "user",
            "content": "Weather?\n\n<system-reminder>\nTask done.\n</system-reminder>",
        },
        {"role": "assistant", "content": "Looking.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "5C"},
        {"role": "tool", "tool_call_id": "c2", "content": "x"},
        {"role": "user", "content": "Thanks."},
    ]


async def test_same_role_messages_stay_apart_by_default() -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server), turn(merge_transcript(), [WEATHER]))
        roles = [message["role"] for message in server.requests[0].json["messages"]]
    assert roles == [
        *("system", "system", "user", "user", "assistant", "assistant"),
        *("tool", "tool", "user"),
    ]
