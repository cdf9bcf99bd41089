"""Each adapter's native structured-output request on the loopback wire.

The bodies are compared whole, and the output fields byte for byte as the adapter
writes them (compact JSON), against each provider's documented form:
OpenAI ``response_format: {type: json_schema, json_schema: {name, schema, strict}}``,
OpenAI Responses ``text: {format: {type: json_schema, name, schema, strict}}``,
Anthropic ``output_config: {format: {type: json_schema, schema}}``, Gemini
``generationConfig: {responseMimeType: application/json, responseJsonSchema}``.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

import agentloop as al
from agentloop.providers import AnthropicModel, GeminiModel, OpenAIChatModel, OpenAIResponsesModel

from . import _anthropic_streams as anthropic
from . import _gemini_streams as gemini
from . import _openai_streams as openai
from . import _responses_streams as responses
from ._helpers import fast_retry
from ._server import ReplayServer, events, sse

pytestmark = pytest.mark.anyio


@attrs.frozen
class Weather:
    """The weather in a city."""

    city: str
    celsius: int


SCHEMA = {
    "type": "object",
    "description": "The weather in a city.",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
ANSWER = '{"city": "Paris", "celsius": 18}'


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def openai_answer() -> bytes:
    return events(
        openai.chunk({"role": "assistant", "content": ""}),
        openai.chunk({"content": ANSWER[:10]}),
        openai.chunk({"content": ANSWER[10:]}),
        openai.chunk({}, "stop"),
        openai.usage_chunk(),
        openai.DONE,
    )


def anthropic_answer() -> bytes:
    return events(
        anthropic.message_start(),
        anthropic.block_start(0, {"type": "text", "text": ""}),
        anthropic.text(0, ANSWER),
        anthropic.block_stop(0),
        anthropic.message_delta("end_turn"),
        anthropic.STOP,
    )


def gemini_answer() -> bytes:
    return gemini.gemini_events(gemini.chunk([{"text": ANSWER}], "STOP", gemini.FINAL_USAGE))


async def ask(model: Any) -> al.RunResult[Weather]:
    agent = al.Agent.builder().model(model).output(Weather).build()
    return await al.run(agent, "Weather in Paris?")


async def test_openai_compatible_sends_a_strict_json_schema_response_format() -> None:
    async with ReplayServer([sse(openai_answer())]) as server:
        model = OpenAIChatModel("smollm2", base_url=f"{server.url}/v1", retry=fast_retry())
        result = await ask(model)
        request = server.requests[0]
    assert result.output == Weather("Paris", 18)
    response_format = {
        "type": "json_schema",
        "json_schema": {
            "name": "Weather",
            "description": "The weather in a city.",
            "schema": SCHEMA,
            "strict": True,
        },
    }
    assert request.json == {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": response_format,
    }
    assert request.body.endswith(b',"response_format":' + compact(response_format) + b"}")


async def test_the_responses_api_sends_a_strict_json_schema_text_format() -> None:
    async with ReplayServer([sse(responses.text_stream(ANSWER))]) as server:
        model = OpenAIResponsesModel("gpt-4o", base_url=f"{server.url}/v1", api_key="k")
        result = await ask(model)
        request = server.requests[0]
    assert result.output == Weather("Paris", 18)
    text = {
        "format": {
            "type": "json_schema",
            "name": "Weather",
            "description": "The weather in a city.",
            "schema": SCHEMA,
            "strict": True,
        }
    }
    body = request.json
    assert body["text"] == text
    assert body["input"] == [{"type": "message", "role": "user", "content": "Weather in Paris?"}]
    assert b'"text":' + compact(text) in request.body


async def test_anthropic_sends_output_config_format() -> None:
    async with ReplayServer([sse(anthropic_answer())]) as server:
        model = AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key="k")
        result = await ask(model)
        request = server.requests[0]
    assert result.output == Weather("Paris", 18)
    output_config = {"format": {"type": "json_schema", "schema": SCHEMA}}
    body = request.json
    assert body["output_config"] == output_config
    assert sorted(body) == ["max_tokens", "messages", "model", "output_config", "stream"]
    assert b'"output_config":' + compact(output_config) in request.body
    assert "anthropic-beta" not in request.headers  # the generally available form


async def test_gemini_sends_a_response_json_schema() -> None:
    async with ReplayServer([sse(gemini_answer())]) as server:
        model = GeminiModel("gemini-2.5-flash", base_url=server.url, api_key="k")
        result = await ask(model)
        request = server.requests[0]
    assert result.output == Weather("Paris", 18)
    generation = {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA}
    assert request.json == {
        "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
        "generationConfig": generation,
    }
    assert request.body.endswith(b'"generationConfig":' + compact(generation) + b"}")


async def test_a_non_strict_schema_is_sent_with_strict_false_and_extra_body_wins() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    async with ReplayServer([sse(openai_answer()), sse(openai_answer())]) as server:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", retry=fast_retry())
        agent = al.Agent.builder().model(model).output(schema, name="loose").build()
        await al.run(agent, "a?")
        custom = OpenAIChatModel(
            "m",
            base_url=f"{server.url}/v1",
            retry=fast_retry(),
            extra_body={"response_format": {"type": "json_object"}},
        )
        agent = al.Agent.builder().model(custom).output(schema, name="loose").build()
        await al.run(agent, "a?")
        first, second = (request.json for request in server.requests)
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "loose", "schema": schema, "strict": False},
    }
    assert second["response_format"] == {"type": "json_object"}


async def test_tool_mode_forced_sends_no_native_fields_and_offers_the_answer_tool() -> None:
    call = openai.chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "final_answer", "arguments": ANSWER},
                }
            ],
        }
    )
    stream = events(call, openai.chunk({}, "tool_calls"), openai.usage_chunk(), openai.DONE)
    async with ReplayServer([sse(stream)]) as server:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", retry=fast_retry())
        agent = al.Agent.builder().model(model).output(Weather, mode="tool").build()
        result = await al.run(agent, "Weather in Paris?")
        body = server.requests[0].json
    assert result.output == Weather("Paris", 18)
    assert "response_format" not in body
    assert [tool["function"]["name"] for tool in body["tools"]] == ["final_answer"]
    assert body["tools"][0]["function"]["parameters"] == SCHEMA
