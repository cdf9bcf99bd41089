"""Recoverable turns against a real adapter: the OpenAI-compatible client and a loopback
server (tests/providers/_server.py) that fails at each point of a turn."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from providers import _anthropic_streams as anthropic
from providers import _gemini_streams as gemini
from providers import _openai_streams as openai
from providers._openai_streams import text_stream, tool_call_stream
from providers._server import ReplayServer, Reply, json_error, split_inside, sse

import agentloop as al
import agentloop.observe
import agentloop.permissions
import agentloop.tools
import agentloop.transcript
from agentloop.providers import AnthropicModel, GeminiModel, OpenAIChatModel, RetryPolicy

pytestmark = pytest.mark.anyio

Kind = al.ProviderErrorKind

OVERFLOW = json_error(
    400,
    {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130211 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
)
OVERLOADED = json_error(503, {"error": {"message": "overloaded", "type": "server_error"}})
# Cut inside the second content delta: "Hello" has streamed, then the connection drops.
CUT = sse(text_stream()[: split_inside(text_stream(), " wörld")], cut=True)


class Weather:
    spec = al.ToolSpec(
        "get_weather",
        "Current weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )

    def __init__(self, approval: bool) -> None:
        self.approval = approval

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead("/weather")] if self.approval else []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"sunny in {request.input['city']}"


class AskForReads:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("weather", request.summary)


class Deltas:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        if isinstance(event, al.observe.ContentDelta) and isinstance(event.delta, al.AppendText):
            self.texts.append(event.delta.text)


async def test_a_stream_cut_after_some_text_keeps_none_of_it() -> None:
    deltas = Deltas()
    async with ReplayServer([CUT, sse(text_stream())]) as server:
        agent = agent_for(server.url)
        driver = await attrs.evolve(agent, observers=(deltas,)).start("s")
        failed = await driver.next()
        assert isinstance(failed, al.Finished)
        assert failed.result.error is not None
        assert failed.result.error.kind is Kind.RETRYABLE
        assert deltas.texts == ["Hello"]
        assert [item.kind for item in driver.snapshot().transcript] == [
            al.ItemKind.SYSTEM,
            al.ItemKind.USER,
        ]
        done = await driver.retry()
        assert isinstance(done, al.Finished)
        assert done.result.final_items[0].text_content == "Hello wörld 🌍"


def agent_for(url: str, *, approval: bool = False) -> al.Agent:
    model = OpenAIChatModel(
        "gpt-4o-mini", base_url=f"{url}/v1", api_key="k", retry=RetryPolicy.never()
    )
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Weather(approval)))
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "Be brief.")])
        .input([al.Item.text(al.ItemKind.USER, "Weather in Paris?")])
    )
    if approval:
        builder = builder.permissions(AskForReads())
    return builder.build()


async def until_finished(driver: al.LoopDriver, step: al.Step | None = None) -> al.Finished:
    step = step or await driver.next()
    while not isinstance(step, al.Finished):
        if isinstance(step, al.ApprovalRequest):
            step.approve()
        step = await driver.next()
    return step


def messages(server: ReplayServer) -> list[Any]:
    return [request.json["messages"] for request in server.requests]


CASES = {
    # point: (replies before the failure, failure, expected kind, approval)
    "first_call_503": ([], OVERLOADED, Kind.RETRYABLE, False),
    "first_call_overflow": ([], OVERFLOW, Kind.CONTEXT_OVERFLOW, False),
    "mid_stream_cut": ([], CUT, Kind.RETRYABLE, False),
    "after_tool_round": ([sse(tool_call_stream())], OVERLOADED, Kind.RETRYABLE, False),
    "after_tool_round_cut": ([sse(tool_call_stream())], CUT, Kind.RETRYABLE, False),
    "after_approval": ([sse(tool_call_stream())], OVERFLOW, Kind.CONTEXT_OVERFLOW, True),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_failing_server_ends_the_turn_and_retry_sends_the_same_request(
    case: str,
) -> None:
    before, failure, kind, approval = CASES[case]
    replies: list[Reply] = [*before, failure, sse(text_stream())]
    async with ReplayServer(replies) as server:
        driver = await agent_for(server.url, approval=approval).start("s")
        failed = await until_finished(driver)
        assert failed.result.finish_reason is al.FinishReason.ERROR
        assert failed.result.error is not None
        assert failed.result.error.kind is kind
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert transcript[-1].kind in (al.ItemKind.USER, al.ItemKind.TOOL)
        assert not any("Hello" in item.text_content for item in transcript)
        checkpoint = driver.checkpoint()
        assert checkpoint["retry_point"]["error"]["kind"] == kind.value

        done = await until_finished(driver, await driver.retry())

        assert done.result.finish_reason is al.FinishReason.COMPLETED
        assert done.result.final_items[0].text_content == "Hello wörld 🌍"
        sent = messages(server)
        assert len(sent) == len(before) + 2
        assert sent[-1] == sent[-2]
        al.transcript.validate_transcript(driver.snapshot().transcript)


async def test_a_restored_driver_retries_against_the_server() -> None:
    async with ReplayServer([sse(tool_call_stream()), OVERLOADED, sse(text_stream())]) as server:
        agent = agent_for(server.url)
        driver = await agent.start("s")
        await until_finished(driver)
        document = driver.checkpoint()
        restored = await agent.resume(document)
        done = await restored.retry()
        assert isinstance(done, al.Finished)
        assert done.result.finish_reason is al.FinishReason.COMPLETED
        sent = messages(server)
        assert sent[1] == sent[2]
        assert [m["role"] for m in sent[2]] == ["system", "user", "assistant", "tool"]


async def test_usage_is_priced_from_the_response_model() -> None:
    async with ReplayServer([sse(text_stream())]) as server:
        driver = await agent_for(server.url).start("s")
        done = await driver.next()
        assert isinstance(done, al.Finished)
        usage = done.result.usage
        assert usage is not None
        # 9 prompt and 12 completion tokens of gpt-4o-mini (0.15 / 0.60 per million).
        assert usage.cost == pytest.approx((9 * 0.15 + 12 * 0.60) / 1_000_000)


def provider_cases() -> list[Any]:
    never = RetryPolicy.never()
    return [
        pytest.param(
            lambda url: OpenAIChatModel("m", base_url=f"{url}/v1", api_key="k", retry=never),
            openai.tool_call_stream(),
            openai.error_midstream(),
            openai.text_stream(),
            id="openai",
        ),
        pytest.param(
            lambda url: AnthropicModel("m", base_url=url, api_key="k", retry=never),
            anthropic.tool_use_stream(),
            anthropic.error_midstream(),
            anthropic.text_stream(),
            id="anthropic",
        ),
        pytest.param(
            lambda url: GeminiModel("m", base_url=url, api_key="k", retry=never),
            gemini.call_stream(),
            gemini.error_midstream(),
            gemini.text_stream(),
            id="gemini",
        ),
    ]


@pytest.mark.parametrize(("factory", "tools", "broken", "answer"), provider_cases())
async def test_each_provider_fails_mid_stream_after_a_tool_round_and_retries(
    factory: Any, tools: bytes, broken: bytes, answer: bytes
) -> None:
    async with ReplayServer([sse(tools), sse(broken), sse(answer)]) as server:
        agent = attrs.evolve(agent_for(server.url), model=factory(server.url))
        driver = await agent.start("s")
        failed = await until_finished(driver)
        assert failed.result.finish_reason is al.FinishReason.ERROR
        assert failed.result.error is not None
        assert failed.result.error.kind is Kind.RETRYABLE
        assert [call.tool_name for call in failed.result.tool_calls] == ["get_weather"]
        assert [r.finish_reason for r in failed.result.model_calls] == [
            al.FinishReason.TOOL_CALL,
            al.FinishReason.ERROR,
        ]
        transcript = driver.snapshot().transcript
        al.transcript.validate_transcript(transcript)
        assert transcript[-1].kind is al.ItemKind.TOOL
        done = await driver.retry()
        assert isinstance(done, al.Finished)
        assert done.result.final_items[0].text_content == "Hello wörld 🌍"
        bodies = [request.json for request in server.requests]
        assert len(bodies) == 3
        assert bodies[1] == bodies[2]
