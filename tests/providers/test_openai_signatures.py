"""Reasoning and thought signatures over Chat Completions, kept and sent back signed.

Stream shapes, as the endpoints document and send them:
- OpenRouter, an Anthropic model with reasoning: ``delta.reasoning`` carries the text
  and ``delta.reasoning_details`` the same text as ``{"type": "reasoning.text", "text",
  "format": "anthropic-claude-v1", "index": 0}``, the signature arriving in a later
  detail with empty text; the next request passes ``reasoning_details`` back on the
  assistant message: https://openrouter.ai/docs/use-cases/reasoning-tokens
- OpenRouter, an OpenAI reasoning model: ``reasoning_details`` entries of type
  ``reasoning.encrypted`` (``data``, ``id``, ``format``), sent back whole; checked on two
  real recorded answers (``recordings/openrouter/``), one streamed and one not
- Gemini's OpenAI-compatible endpoint: a function call carries
  ``extra_content.google.thought_signature``, to be sent back on that tool call:
  https://ai.google.dev/gemini-api/docs/openai#thinking (thought signatures)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop import (
    FinishReason,
    Item,
    ItemKind,
    ProviderError,
    ProviderErrorKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.providers import OpenAIChatModel

from . import _openai_streams as streams
from ._helpers import WEATHER, collect, fast_retry, result_of, turn, user
from ._responses_streams import recorded
from ._server import ReplayServer, Reply, events, sse

pytestmark = pytest.mark.anyio

SIGNATURE = "EqQBCkgIBxABGAIiQPs1a2signature=="
GOOGLE_SIGNATURE = "CiQB0e2Kb+thoughtsignature/A=="


def model_for(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key="k", retry=fast_retry())


def detail(text: str, signature: str | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "type": "reasoning.text",
        "text": text,
        "format": "anthropic-claude-v1",
        "index": 0,
    }
    if signature is not None:
        value["signature"] = signature
    return value


def openrouter_stream() -> bytes:
    return events(
        streams.chunk({"role": "assistant", "content": ""}),
        streams.chunk({"reasoning": "Two plus", "reasoning_details": [detail("Two plus")]}),
        streams.chunk({"reasoning": " two.", "reasoning_details": [detail(" two.")]}),
        streams.chunk({"reasoning_details": [detail("", SIGNATURE)]}),
        streams.chunk({"content": "4"}),
        streams.chunk({}, finish="stop"),
        streams.DONE,
    )


def gemini_stream() -> bytes:
    call = {
        "index": 0,
        "id": "function-call-1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        "extra_content": {"google": {"thought_signature": GOOGLE_SIGNATURE}},
    }
    return events(
        streams.chunk({"role": "assistant", "tool_calls": [call]}),
        streams.chunk({}, finish="tool_calls"),
        streams.DONE,
    )


async def first_and_second(stream: bytes, tools: Any = ()) -> tuple[Item, dict[str, Any]]:
    async with ReplayServer([sse(stream), sse(streams.text_stream())]) as server:
        model = model_for(server)
        answer = result_of(await collect(model, turn([user("hi")], tools))).output_items[0]
        follow: list[Item] = [user("hi"), answer]
        calls = list(answer.tool_calls())
        if calls:
            follow.append(Item(ItemKind.TOOL, [ToolResultPart(calls[0].id, "18°C")]))
        else:
            follow.append(user("and 3+3?"))
        await collect(model, turn(follow, tools))
        body = server.requests[1].json
    return answer, body


async def test_openrouter_reasoning_signature_is_kept_and_sent_back() -> None:
    answer, body = await first_and_second(openrouter_stream())
    assert answer.parts == (
        ReasoningPart(
            "Two plus two.",
            metadata={
                "openai.reasoning_signature": SIGNATURE,
                "openai.reasoning_format": "anthropic-claude-v1",
            },
        ),
        TextPart("4"),
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "4",
        "reasoning_details": [
            {
                "type": "reasoning.text",
                "text": "Two plus two.",
                "signature": SIGNATURE,
                "format": "anthropic-claude-v1",
                "index": 0,
            }
        ],
    }


async def test_gemini_thought_signature_on_a_tool_call_is_kept_and_sent_back() -> None:
    answer, body = await first_and_second(gemini_stream(), [WEATHER])
    call = next(answer.tool_calls())
    assert call == ToolCallPart(
        "function-call-1",
        "get_weather",
        {"city": "Paris"},
        metadata={"openai.google_thought_signature": GOOGLE_SIGNATURE},
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "function-call-1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                "extra_content": {"google": {"thought_signature": GOOGLE_SIGNATURE}},
            }
        ],
    }


async def test_a_thought_signature_on_a_text_delta_goes_back_on_the_message() -> None:
    stream = events(
        streams.chunk({"role": "assistant", "content": "Hi"}),
        streams.chunk(
            {"content": "!", "extra_content": {"google": {"thought_signature": GOOGLE_SIGNATURE}}}
        ),
        streams.chunk({}, finish="stop"),
        streams.DONE,
    )
    answer, body = await first_and_second(stream)
    assert answer.parts == (
        TextPart("Hi!", metadata={"openai.google_thought_signature": GOOGLE_SIGNATURE}),
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "Hi!",
        "extra_content": {"google": {"thought_signature": GOOGLE_SIGNATURE}},
    }


async def test_unsigned_reasoning_is_not_sent_back() -> None:
    stream = events(
        streams.chunk({"reasoning": "hmm", "reasoning_details": [detail("hmm")]}),
        streams.chunk({"content": "ok"}, finish="stop"),
        streams.DONE,
    )
    answer, body = await first_and_second(stream)
    assert answer.parts == (ReasoningPart("hmm"), TextPart("ok"))
    assert body["messages"][1] == {"role": "assistant", "content": "ok"}


async def test_signatures_in_metadata_of_the_wrong_type_are_not_sent() -> None:
    item = Item(
        ItemKind.ASSISTANT,
        [
            ReasoningPart("r", metadata={"openai.reasoning_signature": 5}),
            TextPart("t", metadata={"openai.google_thought_signature": ["x"]}),
        ],
    )
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server), turn([user("a"), item, user("b")]))
        body = server.requests[0].json
    assert body["messages"][1] == {"role": "assistant", "content": "t"}


@pytest.mark.parametrize(
    ("delta", "message"),
    [
        (
            {"reasoning_details": [{"type": "reasoning.text", "signature": 7}]},
            "OpenAI: malformed response: expected chunk.choices[0].delta.reasoning_details[0]"
            ".signature to be a string or null, got int 7",
        ),
        (
            {"reasoning_details": ["sig"]},
            "OpenAI: malformed response: expected chunk.choices[0].delta.reasoning_details[0] "
            "to be an object, got string 'sig'",
        ),
        (
            {"reasoning_details": {"signature": "s"}},
            "OpenAI: malformed response: expected chunk.choices[0].delta.reasoning_details "
            "to be an array or null, got object {'signature': 's'}",
        ),
        (
            {"content": "x", "extra_content": {"google": "sig"}},
            "OpenAI: malformed response: expected chunk.choices[0].delta.extra_content.google "
            "to be an object or null, got string 'sig'",
        ),
        (
            {"content": "x", "extra_content": {"google": {"thought_signature": 1.5}}},
            "OpenAI: malformed response: expected chunk.choices[0].delta.extra_content.google"
            ".thought_signature to be a string or null, got float 1.5",
        ),
    ],
)
async def test_malformed_signatures_are_invalid_responses(
    delta: dict[str, Any], message: str
) -> None:
    stream = events(streams.chunk(delta), streams.chunk({}, finish="stop"), streams.DONE)
    async with ReplayServer([sse(stream)]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("hi")]))
    assert caught.value.kind is ProviderErrorKind.INVALID_RESPONSE
    assert str(caught.value) == message


async def test_a_signature_only_answer_finishes() -> None:
    stream = events(
        streams.chunk({"reasoning_details": [detail("", SIGNATURE)]}),
        streams.chunk({"content": "done"}, finish="stop"),
        streams.DONE,
    )
    async with ReplayServer([sse(stream)]) as server:
        result = result_of(await collect(model_for(server), turn([user("hi")])))
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.output_items[0].parts == (
        ReasoningPart(
            "",
            metadata={
                "openai.reasoning_signature": SIGNATURE,
                "openai.reasoning_format": "anthropic-claude-v1",
            },
        ),
        TextPart("done"),
    )


# -- OpenRouter's encrypted reasoning, from real recorded traffic -----------------------------
# (tests/providers/recordings/README.md names the recordings' origin)

ROUTER_STREAM = "openrouter/test_openrouter_stream_with_reasoning.yaml"
ROUTER_WHOLE = (
    "openrouter/test_eager_input_streaming_sent_to_openrouter[non-anthropic-enabled].yaml"
)


def recorded_details(exchange: Any) -> list[dict[str, Any]]:
    """The ``reasoning_details`` entries of a recorded Chat Completions answer."""
    if exchange.request["stream"]:
        chunks = [
            json.loads(line.removeprefix("data: "))
            for line in exchange.body.splitlines()
            if line.startswith("data: {")
        ]
        deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    else:
        deltas = [choice["message"] for choice in json.loads(exchange.body)["choices"]]
    return [detail for delta in deltas for detail in delta.get("reasoning_details") or []]


async def replay_then_follow(name: str, stream: bool) -> tuple[Item, dict[str, Any]]:
    """The recorded answer as the adapter reads it, and the next request it sends."""
    (exchange,) = recorded(name)
    reply = sse(exchange.body.encode()) if stream else json_reply(exchange.body)
    async with ReplayServer([reply, reply]) as server:
        model = OpenAIChatModel(
            exchange.request["model"],
            base_url=f"{server.url}/api/v1",
            api_key="k",
            retry=fast_retry(),
            stream=stream,
        )
        prompt = [user(message["content"]) for message in exchange.request["messages"]]
        answer = result_of(await collect(model, turn(prompt))).output_items[0]
        await collect(model, turn([*prompt, answer, user("And in French?")]))
        body = server.requests[1].json
    return answer, body


def json_reply(body: str) -> Reply:
    return Reply(chunks=(body.encode(),), headers=(("Content-Type", "application/json"),))


async def test_recorded_openrouter_stream_keeps_its_encrypted_reasoning_and_sends_it_back() -> None:
    (exchange,) = recorded(ROUTER_STREAM)
    (encrypted,) = recorded_details(exchange)
    assert encrypted["type"] == "reasoning.encrypted"
    answer, body = await replay_then_follow(ROUTER_STREAM, stream=True)
    kept = {name: value for name, value in encrypted.items() if name != "index"}
    reasoning, text = answer.parts
    assert reasoning == ReasoningPart("", metadata={"openai.reasoning_encrypted": [kept]})
    assert isinstance(text, TextPart)
    assert text.text.startswith(
        "I\u2019m ChatGPT, a large-language-model assistant created by OpenAI."
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": text.text,
        "reasoning_details": [{**kept, "index": 0}],
    }
    assert body["messages"][1]["reasoning_details"][0]["data"] == encrypted["data"]


async def test_recorded_openrouter_answer_not_streamed_sends_its_encrypted_detail_back() -> None:
    (exchange,) = recorded(ROUTER_WHOLE)
    summary, encrypted = recorded_details(exchange)
    assert (summary["type"], encrypted["type"]) == ("reasoning.summary", "reasoning.encrypted")
    answer, body = await replay_then_follow(ROUTER_WHOLE, stream=False)
    kept = {name: value for name, value in encrypted.items() if name != "index"}
    assert answer.parts == (
        ReasoningPart(summary["summary"], metadata={"openai.reasoning_encrypted": [kept]}),
        TextPart("Hello! How can I help you today?"),
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "Hello! How can I help you today?",
        "reasoning_details": [{**kept, "index": 0}],
    }


async def test_signed_text_and_encrypted_details_go_back_in_order() -> None:
    encrypted = {"type": "reasoning.encrypted", "data": "gAAAA-1", "id": "rs_1", "format": "f"}
    stream = events(
        streams.chunk({"reasoning": "Hm.", "reasoning_details": [detail("Hm.")]}),
        streams.chunk({"reasoning_details": [detail("", SIGNATURE)]}),
        streams.chunk({"reasoning_details": [{**encrypted, "index": 1}]}),
        streams.chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": ""}]}),
        streams.chunk({"content": "4"}, finish="stop"),
        streams.DONE,
    )
    answer, body = await first_and_second(stream)
    assert answer.parts[0] == ReasoningPart(
        "Hm.",
        metadata={
            "openai.reasoning_signature": SIGNATURE,
            "openai.reasoning_format": "anthropic-claude-v1",
            "openai.reasoning_encrypted": [encrypted],  # the empty one is dropped
        },
    )
    assert body["messages"][1]["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "text": "Hm.",
            "signature": SIGNATURE,
            "format": "anthropic-claude-v1",
            "index": 0,
        },
        {**encrypted, "index": 1},
    ]


async def test_encrypted_details_of_the_wrong_shape_in_metadata_are_not_sent() -> None:
    kept = [{"data": 5}, "x", {"type": "reasoning.encrypted", "data": ""}, {"data": "ok"}]
    item = Item(
        ItemKind.ASSISTANT, [ReasoningPart("", metadata={"openai.reasoning_encrypted": kept})]
    )
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server), turn([user("a"), item, user("b")]))
        body = server.requests[0].json
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",
        "reasoning_details": [{"data": "ok", "type": "reasoning.encrypted", "index": 0}],
    }
