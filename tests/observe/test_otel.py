"""OtelObserver: exact GenAI span trees from real driver sessions (in-memory exporter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes as error
from otel_support import pipeline, tree

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.observe import OtelObserver
from agentloop.testing import Reply, call, fail, hang, text, tool_calls

pytestmark = pytest.mark.anyio

USAGE = al.Usage(input_tokens=100, output_tokens=20, cache_read_tokens=60, reasoning_tokens=5)


class Add:
    spec = al.ToolSpec(
        "add",
        "Add two integers.",
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return str(request.input["a"] + request.input["b"])


class ReadNote:
    spec = al.ToolSpec("read_note", "Read a note.", {"type": "object"})

    def proposed_requests(
        self, request: al.ToolRequest
    ) -> Sequence[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead("/notes/todo")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "buy milk"


class Boom:
    spec = al.ToolSpec("boom", "Always fails.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        raise RuntimeError("kaput")


class AskForReads:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def stamped(reply_text: str) -> Reply:
    """A reply whose assistant item carries the metadata HTTP provider adapters stamp."""
    item = al.Item(
        al.ItemKind.ASSISTANT,
        (al.TextPart(reply_text),),
        metadata={
            "agentloop.provider": "anthropic",
            "agentloop.model": "claude-x",
            "agentloop.response_model": "claude-x-20261201",
            "agentloop.response_id": "msg_01",
        },
    )
    return Reply.raw([USAGE, al.model.ModelTurnResult(al.FinishReason.COMPLETED, [item], USAGE)])


def agent(model: al.testing.ScriptedModel, observer: OtelObserver, **extra: Any) -> al.Agent:
    registry = al.ToolRegistry().with_tool(Add()).with_tool(ReadNote()).with_tool(Boom())
    builder = al.Agent.builder().model(model).add_tool_source(registry).permissions(AskForReads())
    if "cancellation" in extra:
        builder = builder.cancellation(extra["cancellation"])
    builder = observer.attach(builder)
    return builder.input([al.Item.text(al.ItemKind.USER, "hi")]).build()


def chat(name: str, extra: dict[str, Any], status: str = "UNSET") -> Any:
    attributes = {gen_ai.GEN_AI_OPERATION_NAME: "chat", gen_ai.GEN_AI_CONVERSATION_ID: "s1"}
    attributes.update(extra)
    return (name, attributes, [], status, [])


CONFIGURED = {gen_ai.GEN_AI_PROVIDER_NAME: "scripted", gen_ai.GEN_AI_REQUEST_MODEL: "script-1"}
ADAPTER = {gen_ai.GEN_AI_PROVIDER_NAME: "scripted", gen_ai.GEN_AI_REQUEST_MODEL: "scripted-model"}
"""What a ScriptedModel declares (``provider_name``, ``model_name``), read by ``attach``."""
TOKENS = {
    gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 100,
    gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 20,
    gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 60,
    gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 5,
}


async def test_span_tree_of_a_tool_round_an_approval_and_failures() -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider, agent_name="helper", provider="scripted", model="script-1")
    model = al.testing.ScriptedModel(
        [
            tool_calls(
                call("add", {"a": 2, "b": 3}, id="c1"),
                call("read_note", {}, id="c2"),
                call("boom", {}, id="c3"),
                usage=USAGE,
            ),
            stamped("done"),
            fail(al.ProviderError("upstream 503")),
        ]
    )
    driver = await agent(model, observer).start("s1")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    driver.submit_input([al.Item.text(al.ItemKind.USER, "again")])
    failed = await driver.run_until_blocked()  # a failed model call ends the turn
    assert isinstance(failed, al.Finished)
    assert failed.result.finish_reason is al.FinishReason.ERROR

    tool = {gen_ai.GEN_AI_OPERATION_NAME: "execute_tool", gen_ai.GEN_AI_TOOL_TYPE: "function"}
    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_agent helper",
            {
                gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
                gen_ai.GEN_AI_AGENT_NAME: "helper",
                gen_ai.GEN_AI_CONVERSATION_ID: "s1",
                "agentloop.turn.id": "turn-1",
                gen_ai.GEN_AI_REQUEST_MODEL: "script-1",
                gen_ai.GEN_AI_PROVIDER_NAME: "anthropic",
                "agentloop.finish_reason": "completed",
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 200,
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 40,
                gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 120,
                gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 10,
            },
            [],
            "UNSET",
            [
                chat(
                    "chat script-1",
                    {**CONFIGURED, **TOKENS, gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_call",)},
                ),
                (
                    "execute_tool add",
                    {
                        **tool,
                        gen_ai.GEN_AI_TOOL_NAME: "add",
                        gen_ai.GEN_AI_TOOL_CALL_ID: "c1",
                        gen_ai.GEN_AI_TOOL_DESCRIPTION: "Add two integers.",
                        "agentloop.tool.outcome": "completed",
                    },
                    [("agentloop.tool.started", {})],
                    "UNSET",
                    [],
                ),
                (
                    "execute_tool read_note",
                    {
                        **tool,
                        gen_ai.GEN_AI_TOOL_NAME: "read_note",
                        gen_ai.GEN_AI_TOOL_CALL_ID: "c2",
                        gen_ai.GEN_AI_TOOL_DESCRIPTION: "Read a note.",
                        "agentloop.tool.outcome": "completed",
                    },
                    [
                        (
                            "agentloop.approval.required",
                            {
                                "agentloop.approval.kind": "filesystem.read",
                                "agentloop.approval.reason": "sensitive_path",
                                "agentloop.approval.summary": "Read /notes/todo",
                            },
                        ),
                        (
                            "agentloop.approval.resolved",
                            {
                                "agentloop.approval.approved": True,
                                "agentloop.approval.patched": False,
                            },
                        ),
                        ("agentloop.tool.started", {}),
                    ],
                    "UNSET",
                    [],
                ),
                (
                    "execute_tool boom",
                    {
                        **tool,
                        gen_ai.GEN_AI_TOOL_NAME: "boom",
                        gen_ai.GEN_AI_TOOL_CALL_ID: "c3",
                        gen_ai.GEN_AI_TOOL_DESCRIPTION: "Always fails.",
                        "agentloop.tool.outcome": "failed",
                        error.ERROR_TYPE: "failed",
                    },
                    [("agentloop.tool.started", {})],
                    "ERROR",
                    [],
                ),
                chat(
                    "chat script-1",
                    {
                        **CONFIGURED,
                        **TOKENS,
                        gen_ai.GEN_AI_PROVIDER_NAME: "anthropic",
                        gen_ai.GEN_AI_RESPONSE_MODEL: "claude-x-20261201",
                        gen_ai.GEN_AI_RESPONSE_ID: "msg_01",
                        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
                    },
                ),
            ],
        ),
        (
            "invoke_agent helper",
            {
                gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
                gen_ai.GEN_AI_AGENT_NAME: "helper",
                gen_ai.GEN_AI_CONVERSATION_ID: "s1",
                "agentloop.turn.id": "turn-2",
                gen_ai.GEN_AI_PROVIDER_NAME: "scripted",
                gen_ai.GEN_AI_REQUEST_MODEL: "script-1",
                error.ERROR_TYPE: "ProviderError",
            },
            [],
            "ERROR",
            [chat("chat script-1", {**CONFIGURED, error.ERROR_TYPE: "ProviderError"}, "ERROR")],
        ),
    ]
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert spans["execute_tool boom"].status.description == (
        "tool 'boom' failed: RuntimeError: kaput"
    )


class Blocking:
    """A tool that waits until cancelled."""

    spec = al.ToolSpec("wait", "Wait forever.", {"type": "object"})

    def __init__(self) -> None:
        self.entered = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.entered.set()
        await anyio.sleep_forever()
        return "never"


async def interrupt_when(
    driver: al.LoopDriver, controller: al.CancellationController, ready: anyio.Event
) -> al.Step:
    steps: list[al.Step] = []

    async def drive() -> None:
        steps.append(await driver.run_until_blocked())

    async with anyio.create_task_group() as group:
        group.start_soon(drive)
        await ready.wait()
        controller.interrupt()
    return steps[0]


async def test_cancelled_model_call_and_cancelled_tool_call() -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider)
    controller = al.CancellationController()
    streaming = anyio.Event()

    def script(request: al.model.TurnRequest) -> Reply | str:
        if request.turn_id == "turn-1":
            streaming.set()
            return hang(al.BeginPart("t", al.PartKind.TEXT), al.AppendText("t", "thinking"))
        return tool_calls(call("wait", {}, id="w1"))

    blocking = Blocking()
    registry = al.ToolRegistry().with_tool(blocking)
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(script))
        .add_tool_source(registry)
        .cancellation(controller.handle())
    )
    driver = (
        await observer.attach(builder)
        .input([al.Item.text(al.ItemKind.USER, "hi")])
        .build()
        .start("s1")
    )
    step = await interrupt_when(driver, controller, streaming)
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    driver.submit_input([al.Item.text(al.ItemKind.USER, "again")])
    step = await interrupt_when(driver, controller, blocking.entered)
    assert isinstance(step, al.Finished)

    turn = {gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent", gen_ai.GEN_AI_AGENT_NAME: "agentloop",
            gen_ai.GEN_AI_CONVERSATION_ID: "s1", "agentloop.finish_reason": "cancelled",
            **ADAPTER}  # fmt: skip
    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_agent agentloop",
            {**turn, "agentloop.turn.id": "turn-1"},
            [],
            "UNSET",
            [
                (
                    "chat scripted-model",
                    {
                        gen_ai.GEN_AI_OPERATION_NAME: "chat",
                        gen_ai.GEN_AI_CONVERSATION_ID: "s1",
                        **ADAPTER,
                        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("cancelled",),
                        error.ERROR_TYPE: "cancelled",
                    },
                    [],
                    "UNSET",
                    [],
                )
            ],
        ),
        (
            "invoke_agent agentloop",
            {**turn, "agentloop.turn.id": "turn-2"},
            [],
            "UNSET",
            [
                chat(
                    "chat scripted-model",
                    {**ADAPTER, gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_call",)},
                ),
                (
                    "execute_tool wait",
                    {
                        gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
                        gen_ai.GEN_AI_TOOL_TYPE: "function",
                        gen_ai.GEN_AI_TOOL_NAME: "wait",
                        gen_ai.GEN_AI_TOOL_CALL_ID: "w1",
                        gen_ai.GEN_AI_TOOL_DESCRIPTION: "Wait forever.",
                        "agentloop.tool.outcome": "cancelled",
                        error.ERROR_TYPE: "cancelled",
                    },
                    [("agentloop.tool.started", {})],
                    "ERROR",
                    [],
                ),
            ],
        ),
    ]


async def test_host_span_parents_turns_and_tool_tasks_keep_their_parents() -> None:
    provider, exporter = pipeline()
    tracer = trace.get_tracer("host", tracer_provider=provider)
    observer = OtelObserver(provider, model="m")
    model = al.testing.ScriptedModel(
        [
            tool_calls(
                call("add", {"a": 1, "b": 1}, id="c1"), call("add", {"a": 2, "b": 2}, id="c2")
            ),
            "ok",
        ]
    )
    registry = al.ToolRegistry().with_tool(Add())
    async with al.tasks.AsyncTaskManager() as manager:
        builder = al.Agent.builder().model(model).add_tool_source(registry).task_manager(manager)
        driver = (
            await observer.attach(builder)
            .input([al.Item.text(al.ItemKind.USER, "hi")])
            .build()
            .start("s1")
        )
        with tracer.start_as_current_span("host request"):
            steps: list[al.Step] = []

            async def drive() -> None:  # in a task of its own: no ambient context is relied on
                steps.append(await driver.run_until_blocked())

            async with anyio.create_task_group() as group:
                group.start_soon(drive)
    assert isinstance(steps[0], al.Finished)

    def names(node: Any) -> Any:
        return (node[0], [names(child) for child in node[4]])

    assert [names(root) for root in tree(exporter.get_finished_spans())] == [
        (
            "host request",
            [
                (
                    "invoke_agent agentloop",
                    [
                        ("chat m", []),
                        ("execute_tool add", []),
                        ("execute_tool add", []),
                        ("chat m", []),
                    ],
                )
            ],
        )
    ]
    tool_spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool add"]
    assert sorted(s.attributes[gen_ai.GEN_AI_TOOL_CALL_ID] for s in tool_spans) == ["c1", "c2"]  # type: ignore[index]


async def test_content_is_captured_only_when_asked() -> None:
    for capture in (False, True):
        provider, exporter = pipeline()
        observer = OtelObserver(provider, capture_content=capture)
        model = al.testing.ScriptedModel(
            [tool_calls(call("add", {"a": 1, "b": 2}, id="c1")), text("3!")]
        )
        driver = await agent(model, observer).start("s1")
        assert isinstance(await driver.run_until_blocked(), al.Finished)
        content_keys = {
            key
            for span in exporter.get_finished_spans()
            for key in (span.attributes or {})
            if key in {gen_ai.GEN_AI_INPUT_MESSAGES, gen_ai.GEN_AI_OUTPUT_MESSAGES,
                       gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS, gen_ai.GEN_AI_TOOL_CALL_RESULT}
        }  # fmt: skip
        if not capture:
            assert content_keys == set()
            continue
        spans = {(s.name, s.start_time): s.attributes or {} for s in exporter.get_finished_spans()}
        chats = [
            attributes
            for (name, _), attributes in sorted(spans.items(), key=lambda kv: kv[0][1] or 0)
            if name == "chat scripted-model"
        ]
        tool = next(a for (name, _), a in spans.items() if name == "execute_tool add")
        assert tool[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"a":1,"b":2}'
        assert tool[gen_ai.GEN_AI_TOOL_CALL_RESULT] == '"3"'
        assert chats[0][gen_ai.GEN_AI_INPUT_MESSAGES] == (
            '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'
        )
        assert chats[0][gen_ai.GEN_AI_OUTPUT_MESSAGES] == (
            '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"add",'
            '"arguments":{"a":1,"b":2}}],"finish_reason":"tool_call"}]'
        )
        assert chats[1][gen_ai.GEN_AI_OUTPUT_MESSAGES] == (
            '[{"role":"assistant","parts":[{"type":"text","content":"3!"}],"finish_reason":"stop"}]'
        )
        assert '"type":"tool_call_response","id":"c1","response":"3"' in str(
            chats[1][gen_ai.GEN_AI_INPUT_MESSAGES]
        )


def test_attribute_names_are_the_semantic_conventions_packages() -> None:
    from opentelemetry.semconv.attributes import server_attributes as server

    from agentloop.observe import _otel

    pairs = [
        (_otel.OPERATION, gen_ai.GEN_AI_OPERATION_NAME),
        (_otel.PROVIDER, gen_ai.GEN_AI_PROVIDER_NAME),
        (_otel.REQUEST_MODEL, gen_ai.GEN_AI_REQUEST_MODEL),
        (_otel.RESPONSE_MODEL, gen_ai.GEN_AI_RESPONSE_MODEL),
        (_otel.RESPONSE_ID, gen_ai.GEN_AI_RESPONSE_ID),
        (_otel.FINISH_REASONS, gen_ai.GEN_AI_RESPONSE_FINISH_REASONS),
        (_otel.INPUT_TOKENS, gen_ai.GEN_AI_USAGE_INPUT_TOKENS),
        (_otel.OUTPUT_TOKENS, gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS),
        (_otel.CACHE_READ_TOKENS, gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        (_otel.CACHE_CREATION_TOKENS, gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        (_otel.REASONING_TOKENS, gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
        (_otel.AGENT_NAME, gen_ai.GEN_AI_AGENT_NAME),
        (_otel.CONVERSATION_ID, gen_ai.GEN_AI_CONVERSATION_ID),
        (_otel.TOOL_NAME, gen_ai.GEN_AI_TOOL_NAME),
        (_otel.TOOL_DESCRIPTION, gen_ai.GEN_AI_TOOL_DESCRIPTION),
        (_otel.TOOL_CALL_ID, gen_ai.GEN_AI_TOOL_CALL_ID),
        (_otel.TOOL_TYPE, gen_ai.GEN_AI_TOOL_TYPE),
        (_otel.TOOL_ARGUMENTS, gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS),
        (_otel.TOOL_RESULT, gen_ai.GEN_AI_TOOL_CALL_RESULT),
        (_otel.INPUT_MESSAGES, gen_ai.GEN_AI_INPUT_MESSAGES),
        (_otel.OUTPUT_MESSAGES, gen_ai.GEN_AI_OUTPUT_MESSAGES),
        (_otel.SERVER_ADDRESS, server.SERVER_ADDRESS),
        (_otel.SERVER_PORT, server.SERVER_PORT),
        (_otel.ERROR_TYPE, error.ERROR_TYPE),
    ]
    assert [ours for ours, _ in pairs] == [theirs for _, theirs in pairs]
    assert not hasattr(_otel, "SYSTEM")  # the deprecated gen_ai.system is not set
