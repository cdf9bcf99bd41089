"""A resumed session's next request is byte for byte the one it would have sent anyway.

A provider's prompt cache is keyed by the request's prefix: a resume that changes
one byte of it (a reordered key, a re-rendered tool argument, a lost reasoning
signature, a timestamp) makes every later call a cold one. For each HTTP adapter,
on the loopback wire: a turn with a tool round, then a second user message. Run
once straight through, and once checkpointed (at the pause after the tool round,
or after the turn), written as JSON text, restored by a new agent with a new
adapter object and continued: every request after the restore equals the
straight run's, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.tools
from agentloop.providers import (
    AnthropicModel,
    GeminiModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
)

from . import _anthropic_streams as anthropic
from . import _gemini_streams as gemini
from . import _openai_streams as openai
from . import _responses_streams as responses
from ._helpers import Weather
from ._server import ReplayServer, sse

pytestmark = pytest.mark.anyio

Factory = Callable[[ReplayServer], Any]


def _responses_call() -> bytes:
    stream = responses.Stream().created()
    stream.call(0, "get_weather", '{"city": "Paris"}', "call_W1")
    return stream.completed().body()


ADAPTERS: dict[str, tuple[Factory, bytes, bytes]] = {
    "openai": (
        lambda server: OpenAIChatModel(
            "m", base_url=f"{server.url}/v1", api_key="k", retry=RetryPolicy.never()
        ),
        openai.tool_call_stream(),
        openai.text_stream(),
    ),
    "responses": (
        lambda server: OpenAIResponsesModel(
            "gpt-4o", base_url=f"{server.url}/v1", api_key="k", retry=RetryPolicy.never()
        ),
        _responses_call(),
        responses.text_stream("It is 18C in Paris."),
    ),
    "anthropic": (
        lambda server: AnthropicModel(
            "claude-sonnet-4-5", base_url=server.url, api_key="k", retry=RetryPolicy.never()
        ),
        anthropic.tool_use_stream(),
        anthropic.text_stream(),
    ),
    "gemini": (
        lambda server: GeminiModel(
            "gemini-2.5-flash", base_url=server.url, api_key="k", retry=RetryPolicy.never()
        ),
        gemini.call_stream(),
        gemini.text_stream(),
    ),
}


def agent(model: Any) -> al.Agent:
    tools = al.ToolRegistry().with_tool(Weather())
    system = al.Item.text(al.ItemKind.SYSTEM, "You answer about the weather.")
    return al.Agent.builder().model(model).add_tool_source(tools).transcript([system]).build()


async def session(name: str, first: str, second: str, restore_at: str | None) -> list[bytes]:
    """Every request body of the session, restoring at ``restore_at`` (None: straight)."""
    factory, call_stream, text_stream = ADAPTERS[name]
    replies = [sse(call_stream), sse(text_stream), sse(text_stream)]
    async with ReplayServer(replies) as server:
        driver = await agent(factory(server)).start("s")
        driver.submit_input(first)
        with anyio.fail_after(10):
            step = await driver.next()
            assert isinstance(step, al.AfterToolResult)
            if restore_at == "pause":
                driver = await restored(driver, factory(server))
            assert isinstance(await driver.run_until_blocked(), al.Finished)
            if restore_at == "turn":
                driver = await restored(driver, factory(server))
            driver.submit_input(second)
            assert isinstance(await driver.run_until_blocked(), al.Finished)
        return [request.body for request in server.requests]


async def restored(driver: al.LoopDriver, model: Any) -> al.LoopDriver:
    """``driver``'s session continued by another agent from the checkpoint's JSON text."""
    text = json.dumps(driver.checkpoint())
    return await agent(model).resume(json.loads(text))


PROMPTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=PROMPTS, second=PROMPTS, restore_at=st.sampled_from(["pause", "turn"]))
async def test_the_request_after_a_restore_is_the_straight_runs(
    name: str, first: str, second: str, restore_at: str
) -> None:
    straight = await session(name, first, second, None)
    resumed = await session(name, first, second, restore_at)
    assert len(straight) == len(resumed) == 3
    assert resumed == straight
