"""OtelObserver against the GenAI conventions: what a scripted (non-HTTP) adapter and an
HTTP adapter on a loopback server put on the spans, named by the conventions package."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import server_attributes as server
from otel_support import pipeline, tree
from providers import _openai_streams as openai_streams
from providers._server import ReplayServer, sse

import agentloop as al
import agentloop.model
import agentloop.testing
import agentloop.tools
from agentloop.observe import OtelObserver
from agentloop.providers import OpenAIChatModel
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

USAGE = al.Usage(input_tokens=10, output_tokens=4)


class Add:
    spec = al.ToolSpec("add", "Add two integers.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return str(request.input["a"] + request.input["b"])


def answered(reply_text: str) -> Reply:
    """A reply whose result names the answering model and the response id (no metadata)."""
    item = al.Item(al.ItemKind.ASSISTANT, (al.TextPart(reply_text),))
    result = al.model.ModelTurnResult(
        al.FinishReason.COMPLETED, [item], USAGE, model="demo-1-20261201", response_id="resp_7"
    )
    return Reply.raw([USAGE, result])


async def run_session(observer: OtelObserver, model: al.ModelAdapter) -> None:
    builder = al.Agent.builder().model(model).add_tool_source(al.ToolRegistry().with_tool(Add()))
    agent = observer.attach(builder).input([al.Item.text(al.ItemKind.USER, "hi")]).build()
    driver = await agent.start("s1")
    assert isinstance(await driver.run_until_blocked(), al.Finished)


def chat_span(name: str, attributes: dict[str, Any]) -> Any:
    base = {gen_ai.GEN_AI_OPERATION_NAME: "chat", gen_ai.GEN_AI_CONVERSATION_ID: "s1"}
    return (name, {**base, **attributes}, [], "UNSET", [])


def turn_span(attributes: dict[str, Any], children: list[Any]) -> Any:
    base = {
        gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
        gen_ai.GEN_AI_AGENT_NAME: "agentloop",
        gen_ai.GEN_AI_CONVERSATION_ID: "s1",
        "agentloop.turn.id": "turn-1",
    }
    return ("invoke_agent agentloop", {**base, **attributes}, [], "UNSET", children)


async def test_a_scripted_adapters_labels_and_answers_reach_the_spans() -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider, capture_content=True)
    model = al.testing.ScriptedModel(
        [tool_calls(call("add", {"a": 1, "b": 2}, id="c1"), usage=USAGE), answered("3")],
        model_name="demo-1",
    )
    await run_session(observer, model)

    labels = {gen_ai.GEN_AI_PROVIDER_NAME: "scripted", gen_ai.GEN_AI_REQUEST_MODEL: "demo-1"}
    tokens = {gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 10, gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 4}
    first_input = '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'
    second_input = (
        '[{"role":"user","parts":[{"type":"text","content":"hi"}]},'
        '{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"add",'
        '"arguments":{"a":1,"b":2}}]},'
        '{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"3"}]}]'
    )
    assert tree(exporter.get_finished_spans()) == [
        turn_span(
            {
                **labels,
                "agentloop.finish_reason": "completed",
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 20,
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 8,
            },
            [
                chat_span(
                    "chat demo-1",
                    {
                        **labels,
                        **tokens,
                        gen_ai.GEN_AI_INPUT_MESSAGES: first_input,
                        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_call",),
                        gen_ai.GEN_AI_OUTPUT_MESSAGES: (
                            '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1",'
                            '"name":"add","arguments":{"a":1,"b":2}}],'
                            '"finish_reason":"tool_call"}]'
                        ),
                    },
                ),
                (
                    "execute_tool add",
                    {
                        gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
                        gen_ai.GEN_AI_TOOL_NAME: "add",
                        gen_ai.GEN_AI_TOOL_CALL_ID: "c1",
                        gen_ai.GEN_AI_TOOL_TYPE: "function",
                        gen_ai.GEN_AI_TOOL_DESCRIPTION: "Add two integers.",
                        gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS: '{"a":1,"b":2}',
                        "agentloop.tool.outcome": "completed",
                        gen_ai.GEN_AI_TOOL_CALL_RESULT: '"3"',
                    },
                    [("agentloop.tool.started", {})],
                    "UNSET",
                    [],
                ),
                chat_span(
                    "chat demo-1",
                    {
                        **labels,
                        **tokens,
                        gen_ai.GEN_AI_INPUT_MESSAGES: second_input,
                        gen_ai.GEN_AI_RESPONSE_MODEL: "demo-1-20261201",
                        gen_ai.GEN_AI_RESPONSE_ID: "resp_7",
                        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
                        gen_ai.GEN_AI_OUTPUT_MESSAGES: (
                            '[{"role":"assistant","parts":[{"type":"text","content":"3"}],'
                            '"finish_reason":"stop"}]'
                        ),
                    },
                ),
            ],
        )
    ]


async def test_an_http_adapter_names_its_server_and_the_model_that_answered() -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider)
    async with ReplayServer([sse(openai_streams.text_stream())]) as replay:
        model = OpenAIChatModel("gpt-4o-mini", base_url=f"{replay.url}/v1", api_key="sk-test-1")
        await run_session(observer, model)
        port = replay.port

    labels = {gen_ai.GEN_AI_PROVIDER_NAME: "openai", gen_ai.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"}
    tokens = {
        gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 9,
        gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 12,
        "agentloop.usage.cost": 8.55e-06,  # the default price table's gpt-4o-mini rate
    }
    assert tree(exporter.get_finished_spans()) == [
        turn_span(
            {**labels, "agentloop.finish_reason": "completed", **tokens},
            [
                chat_span(
                    "chat gpt-4o-mini",
                    {
                        **labels,
                        server.SERVER_ADDRESS: "127.0.0.1",
                        server.SERVER_PORT: port,
                        gen_ai.GEN_AI_RESPONSE_MODEL: "gpt-4o-mini-2024-07-18",
                        gen_ai.GEN_AI_RESPONSE_ID: "chatcmpl-123",
                        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
                        **tokens,
                    },
                )
            ],
        )
    ]


class Gateway:
    """A non-HTTP adapter that still declares a base URL (a gateway it names)."""

    provider_name = "gateway"
    model_name = "gw-model"
    base_url = "https://models.example.com/v1"

    def __init__(self) -> None:
        self.scripted = al.testing.ScriptedModel([answered("ok")])

    async def start_session(self, config: al.SessionConfig) -> al.model.ModelSession:
        return await self.scripted.start_session(config)


async def test_a_base_url_without_a_port_gives_the_schemes_port() -> None:
    provider, exporter = pipeline()
    await run_session(OtelObserver(provider), Gateway())
    chat = next(span for span in exporter.get_finished_spans() if span.name.startswith("chat"))
    assert chat.name == "chat gw-model"
    assert {
        key: value
        for key, value in (chat.attributes or {}).items()
        if key.startswith(("server.", "gen_ai.provider", "gen_ai.request", "gen_ai.response"))
    } == {
        gen_ai.GEN_AI_PROVIDER_NAME: "gateway",
        gen_ai.GEN_AI_REQUEST_MODEL: "gw-model",
        server.SERVER_ADDRESS: "models.example.com",
        server.SERVER_PORT: 443,
        gen_ai.GEN_AI_RESPONSE_MODEL: "demo-1-20261201",
        gen_ai.GEN_AI_RESPONSE_ID: "resp_7",
        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
    }


async def test_registered_by_hand_the_spans_keep_what_http_adapters_stamp() -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider)
    async with ReplayServer([sse(openai_streams.text_stream())]) as replay:
        model = OpenAIChatModel("gpt-4o-mini", base_url=f"{replay.url}/v1", api_key="sk-test-1")
        builder = al.Agent.builder().model(model).observer(observer).transcript_observer(observer)
        driver = await builder.input([al.Item.text(al.ItemKind.USER, "hi")]).build().start("s1")
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    chat = next(span for span in exporter.get_finished_spans() if span.name.startswith("chat"))
    assert chat.name == "chat gpt-4o-mini"
    assert {
        key: value
        for key, value in (chat.attributes or {}).items()
        if key.startswith(("server.", "gen_ai.provider", "gen_ai.request", "gen_ai.response"))
    } == {
        gen_ai.GEN_AI_PROVIDER_NAME: "openai",
        gen_ai.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        gen_ai.GEN_AI_RESPONSE_MODEL: "gpt-4o-mini-2024-07-18",
        gen_ai.GEN_AI_RESPONSE_ID: "chatcmpl-123",
        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
    }


def test_attach_before_the_model_is_refused_and_registers_nothing() -> None:
    builder = al.Agent.builder()
    observer = OtelObserver(pipeline()[0])
    with pytest.raises(al.InvalidStateError) as raised:
        observer.attach(builder)
    assert str(raised.value) == (
        "cannot attach OtelObserver: the builder has no model adapter yet; call "
        ".model(adapter) first, then attach(builder)"
    )
    agent = builder.model(al.testing.ScriptedModel(["ok"])).build()
    assert (agent.observers, agent.transcript_observers) == ((), ())
