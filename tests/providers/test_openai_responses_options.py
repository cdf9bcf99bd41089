"""OpenAIResponsesModel's options: from_string, keys, tool choice, strict, caching, content."""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import (
    FilePart,
    InvalidInputError,
    Item,
    ItemKind,
    MediaPart,
    ProviderError,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentloop.model import AfterTools, PromptCacheRequest, PromptCacheRetention
from agentloop.providers import OpenAIResponsesModel, from_string

from . import _responses_streams as streams
from ._helpers import TIME, WEATHER, collect, fast_retry, turn, user
from ._server import ReplayServer, sse

pytestmark = pytest.mark.anyio

STRICT = ToolSpec(
    "lookup",
    "Look a term up",
    {
        "type": "object",
        "properties": {
            "term": {"type": "string", "description": "what to look up"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
        },
        "required": ["term", "tags", "limit"],
        "additionalProperties": False,
    },
)


async def body_for(request: Any, **options: Any) -> dict[str, Any]:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = OpenAIResponsesModel(
            "gpt-5", base_url=f"{server.url}/v1", api_key="k", retry=fast_retry(), **options
        )
        await collect(model, request)
        body: dict[str, Any] = server.requests[0].json
    return body


def test_from_string_builds_the_responses_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    model = from_string("openai-responses:gpt-5", reasoning_effort="low")
    assert isinstance(model, OpenAIResponsesModel)
    assert (model.model_name, model.base_url) == ("gpt-5", "https://api.openai.com/v1")
    assert model.endpoint().url == "https://api.openai.com/v1/responses"
    assert model.endpoint().headers["Authorization"] == "Bearer sk-from-the-environment"
    assert model.reasoning_effort == "low"
    routed = from_string("openai-responses:https://openrouter.ai/api/v1#openai/gpt-oss-20b")
    assert isinstance(routed, OpenAIResponsesModel)
    assert (routed.model_name, routed.base_url) == (
        "openai/gpt-oss-20b",
        "https://openrouter.ai/api/v1",
    )
    assert "Authorization" not in routed.endpoint().headers  # the env key stays with OpenAI
    with pytest.raises(InvalidInputError) as caught:
        from_string("openai-responses:http://127.0.0.1:8080/v1")
    assert str(caught.value) == (
        "from_string: 'openai-responses:http://127.0.0.1:8080/v1' names no model; expected "
        "'openai-responses:MODEL' or 'openai-responses:BASE_URL#MODEL'"
    )


def test_a_key_is_required_for_openai_and_options_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError) as missing:
        OpenAIResponsesModel("gpt-5")
    assert str(missing.value) == (
        "OpenAIResponsesModel: no API key: pass api_key=... or set OPENAI_API_KEY"
    )
    with pytest.raises(InvalidInputError) as caught:
        OpenAIResponsesModel("gpt-5", api_key="k", tool_choice=" auto")
    assert str(caught.value) == (
        "OpenAIResponsesModel: tool_choice must be 'auto', 'none', 'required' or a tool name, "
        "got ' auto'"
    )
    with pytest.raises(InvalidInputError) as caught:
        OpenAIResponsesModel("gpt-5", api_key="k", reasoning_effort="")
    assert str(caught.value) == (
        "OpenAIResponsesModel: reasoning_effort must be a non-empty string or None, got ''"
    )
    with pytest.raises(InvalidInputError):
        OpenAIResponsesModel("", api_key="k")


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_time", {"type": "function", "name": "get_time"}),
    ],
)
async def test_tool_choice_on_the_wire(choice: str, wire: Any) -> None:
    body = await body_for(turn([user("x")], [TIME, WEATHER]), tool_choice=choice)
    assert body["tool_choice"] == wire
    no_tools = await body_for(turn([user("x")]), tool_choice=choice)
    assert "tool_choice" not in no_tools
    assert "tools" not in no_tools


async def test_a_tool_choice_naming_no_offered_tool_is_refused_before_sending() -> None:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = OpenAIResponsesModel("gpt-5", base_url=server.url, tool_choice="search")
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("x")], [WEATHER]))
        assert server.requests == []
    assert str(caught.value) == (
        "OpenAI: tool_choice names tool 'search', which is not among this turn's tools "
        "['get_weather']; name one of them or use 'auto', 'none' or 'required'"
    )


@pytest.mark.parametrize(
    ("strict_tools", "expected"),
    [(None, [True, False]), (True, [True, True]), (False, [False, False])],
)
async def test_strict_is_sent_for_schemas_that_fit_strict_mode(
    strict_tools: bool | None, expected: list[bool]
) -> None:
    body = await body_for(
        turn([user("x")], [STRICT, WEATHER]),
        strict_tools=strict_tools,
        parallel_tool_calls=False,
        temperature=0.2,
    )
    assert [tool["strict"] for tool in body["tools"]] == expected
    assert body["tools"][0] == {
        "type": "function",
        "name": "lookup",
        "description": "Look a term up",
        "parameters": STRICT.input_schema,
        "strict": expected[0],
    }
    assert (body["parallel_tool_calls"], body["temperature"]) == (False, 0.2)


async def test_prompt_cache_key_and_retention_and_a_required_breakpoint() -> None:
    cache = PromptCacheRequest(key="tenant-7", retention=PromptCacheRetention.EXTENDED)
    body = await body_for(turn([user("x")], cache=cache))
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("tenant-7", "24h")
    request = PromptCacheRequest.explicit_required([AfterTools()])
    with pytest.raises(ProviderError) as caught:
        await body_for(turn([user("x")], cache=request))
    assert str(caught.value) == (
        "OpenAI: cannot honour a required explicit prompt cache: the Responses API caches "
        "prefixes automatically and takes no breakpoints; use PromptCacheRequest.automatic()"
    )


async def test_user_content_parts_become_input_content() -> None:
    item = Item(
        ItemKind.USER,
        (
            TextPart("Look:"),
            MediaPart("image/png", data="iVBORw0KGgo="),
            MediaPart("image/jpeg", uri="https://example.com/cat.jpg"),
            MediaPart("audio/wav", data="UklGRg=="),
            FilePart("report.pdf", mime_type="application/pdf", data="JVBERi0="),
            FilePart(None, uri="https://example.com/notes.txt"),
            StructuredPart({"k": [1, 2]}),
        ),
    )
    body = await body_for(turn([item]), extra_body={"service_tier": "flex", "store": True})
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look:"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBORw0KGgo=",
                    "detail": "auto",
                },
                {
                    "type": "input_image",
                    "image_url": "https://example.com/cat.jpg",
                    "detail": "auto",
                },
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {
                    "type": "input_file",
                    "file_data": "data:application/pdf;base64,JVBERi0=",
                    "filename": "report.pdf",
                },
                {"type": "input_file", "file_url": "https://example.com/notes.txt"},
                {"type": "input_text", "text": '{"k":[1,2]}'},
            ],
        }
    ]
    assert (body["service_tier"], body["store"]) == ("flex", True)  # extra_body wins


async def test_a_part_a_message_cannot_carry_is_refused_before_sending() -> None:
    item = Item(ItemKind.USER, (MediaPart("video/mp4", data="AAAA"),))
    async with ReplayServer([sse(streams.text_stream())]) as server:
        model = OpenAIResponsesModel("gpt-5", base_url=server.url)
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([item]))
        assert server.requests == []
    assert str(caught.value) == (
        "OpenAI: cannot send transcript item 0 (user): it holds a MediaPart, which a user "
        "message cannot carry for this provider; drop or convert the part with a mutator"
    )


async def test_a_call_renamed_by_admission_goes_back_under_the_providers_id() -> None:
    call = ToolCallPart(
        "call_1_2",
        "get_weather",
        {"city": "Oslo"},
        metadata={"agentloop.provider_call_id": "call_1"},
    )
    transcript = [
        user("x"),
        Item(ItemKind.ASSISTANT, (call,)),
        Item(ItemKind.TOOL, (ToolResultPart("call_1_2", "3°C"),)),
    ]
    body = await body_for(turn(transcript, [WEATHER]))
    assert body["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "3°C"},
    ]
