"""A failed model call followed by new input: the transcript holds ``user, user``.

Anthropic's Messages API and Gemini's ``contents`` need user and assistant turns to
alternate, so their request rendering merges consecutive user messages into one
(the transcript itself keeps both items). The failure is a real 400 body of each
provider (Anthropic's ``invalid_request_error``, Gemini's ``INVALID_ARGUMENT``, see
test_error_kinds); the answer after it is the usual replayed stream.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentloop import Agent, Finished, Item, ItemKind, SessionConfig, ToolCallPart, ToolResultPart
from agentloop.providers import AnthropicModel, GeminiModel, RetryPolicy

from . import _anthropic_streams as anthropic_streams
from . import _gemini_streams as gemini_streams
from ._helpers import WEATHER, collect, turn, user
from ._server import ReplayServer, Reply, json_error, sse

pytestmark = pytest.mark.anyio


async def fail_then_answer(model_for: Any, failure: Reply, answer: bytes) -> tuple[Any, Any]:
    """The second request's body and the transcript after: fail, new input, answer."""
    async with ReplayServer([failure, sse(answer)]) as server:
        agent = Agent.builder().model(model_for(server)).input([user("first")]).build()
        driver = await agent.start(SessionConfig("s1"))
        with anyio.fail_after(10):
            assert isinstance(await driver.next(), Finished)
            driver.submit_input("second")
            assert isinstance(await driver.next(), Finished)
        assert len(server.requests) == 2
        body = server.requests[1].json
    return body, driver.snapshot().transcript


def anthropic(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("m", base_url=server.url, api_key="k", retry=RetryPolicy.never())


def gemini(server: ReplayServer) -> GeminiModel:
    return GeminiModel("m", base_url=server.url, api_key="k", retry=RetryPolicy.never())


async def test_anthropic_gets_one_user_message_after_a_failed_call() -> None:
    failure = json_error(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    )
    body, transcript = await fail_then_answer(anthropic, failure, anthropic_streams.text_stream())
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        }
    ]
    assert [item.kind for item in transcript] == [ItemKind.USER, ItemKind.USER, ItemKind.ASSISTANT]
    assert [item.text_content for item in transcript[:2]] == ["first", "second"]


async def test_gemini_gets_one_user_content_after_a_failed_call() -> None:
    failure = json_error(
        400, {"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}
    )
    body, transcript = await fail_then_answer(gemini, failure, gemini_streams.text_stream())
    assert body["contents"] == [{"role": "user", "parts": [{"text": "first"}, {"text": "second"}]}]
    assert [item.kind for item in transcript] == [ItemKind.USER, ItemKind.USER, ItemKind.ASSISTANT]
    assert [item.text_content for item in transcript[:2]] == ["first", "second"]


TOOL_ROUND = [
    user("weather?"),
    Item(ItemKind.ASSISTANT, [ToolCallPart("call_1", "get_weather", {"city": "Paris"})]),
    Item(ItemKind.TOOL, [ToolResultPart("call_1", "18C")]),
    Item.text(ItemKind.USER, "and Rome?"),
]


async def test_anthropic_puts_a_tool_result_and_new_input_in_one_user_message() -> None:
    async with ReplayServer([sse(anthropic_streams.text_stream())]) as server:
        await collect(anthropic(server), turn(TOOL_ROUND, [WEATHER]))
        body = server.requests[0].json
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
                {"type": "text", "text": "and Rome?"},
            ],
        },
    ]


async def test_gemini_puts_a_tool_result_and_new_input_in_one_user_content() -> None:
    async with ReplayServer([sse(gemini_streams.text_stream())]) as server:
        await collect(gemini(server), turn(TOOL_ROUND, [WEATHER]))
        body = server.requests[0].json
    assert [content["role"] for content in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][2]["parts"][1:] == [{"text": "and Rome?"}]
    assert list(body["contents"][2]["parts"][0]) == ["functionResponse"]
