"""OtelObserver: exact GenAI span trees from real driver sessions (in-memory exporter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from otel_support import pipeline, tree

import agentloop as al
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

    def proposed_requests(self, request: al.ToolRequest) -> Sequence[al.PermissionRequest]:
        return [al.FileSystemRead("/notes/todo")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "buy milk"


class Boom:
    spec = al.ToolSpec("boom", "Always fails.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        raise RuntimeError("kaput")


class AskForReads:
    def evaluate(self, request: al.PermissionRequest) -> al.PermissionVerdict:
        if request.kind == "filesystem.read":
            return al.AskApproval("sensitive_path", request.summary)
        return al.Allow()


def stamped(reply_text: str) -> Reply:
    """A reply whose assistant item carries the metadata provider adapters stamp."""
    item = al.Item(
        al.ItemKind.ASSISTANT,
        (al.TextPart(reply_text),),
        metadata={
            "agentloop.provider": "anthropic",
            "agentloop.model": "claude-x-2026",
            "agentloop.response_id": "msg_01",
        },
    )
    return Reply.raw([USAGE, al.ModelTurnResult(al.FinishReason.COMPLETED, [item], USAGE)])


def agent(model: al.ScriptedModel, observer: OtelObserver, **extra: Any) -> al.Agent:
    registry = al.ToolRegistry().with_tool(Add()).with_tool(ReadNote()).with_tool(Boom())
    builder = al.Agent.builder().model(model).add_tool_source(registry).permissions(AskForReads())
    if "cancellation" in extra:
        builder = builder.cancellation(extra["cancellation"])
    builder = observer.attach(builder)
    return builder.input([al.Item.text(al.ItemKind.USER, "hi")]).build()


def chat(name: str, extra: dict[str, Any], status: str = "UNSET") -> Any:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "s1"}
    attributes.update(extra)
    return (name, attributes, [], status, [])


CONFIGURED = {
    "gen_ai.provider.name": "scripted",
    "gen_ai.system": "scripted",
    "gen_ai.request.model": "script-1",
}
TOKENS = {
    "gen_ai.usage.input_tokens": 100,
    "gen_ai.usage.output_tokens": 20,
    "gen_ai.usage.cache_read.input_tokens": 60,
    "gen_ai.usage.reasoning.output_tokens": 5,
}


async def test_span_tree_of_a_tool_round_an_approval_and_failures() -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider, agent_name="helper", provider="scripted", model="script-1")
    model = al.ScriptedModel(
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

    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"}
    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_agent helper",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "helper",
                "gen_ai.conversation.id": "s1",
                "agentloop.turn.id": "turn-1",
                "gen_ai.provider.name": "anthropic",
                "agentloop.finish_reason": "completed",
                "gen_ai.usage.input_tokens": 200,
                "gen_ai.usage.output_tokens": 40,
                "gen_ai.usage.cache_read.input_tokens": 120,
                "gen_ai.usage.reasoning.output_tokens": 10,
            },
            [],
            "UNSET",
            [
                chat(
                    "chat script-1",
                    {**CONFIGURED, **TOKENS, "gen_ai.response.finish_reasons": ("tool_call",)},
                ),
                (
                    "execute_tool add",
                    {**tool, "gen_ai.tool.name": "add", "gen_ai.tool.call.id": "c1",
                     "agentloop.tool.outcome": "completed"},
                    [("agentloop.tool.started", {})],
                    "UNSET",
                    [],
                ),
                (
                    "execute_tool read_note",
                    {**tool, "gen_ai.tool.name": "read_note", "gen_ai.tool.call.id": "c2",
                     "agentloop.tool.outcome": "completed"},
                    [
                        ("agentloop.approval.required", {
                            "agentloop.approval.kind": "filesystem.read",
                            "agentloop.approval.reason": "sensitive_path",
                            "agentloop.approval.summary": "Read /notes/todo",
                        }),
                        ("agentloop.approval.resolved", {
                            "agentloop.approval.approved": True,
                            "agentloop.approval.patched": False,
                        }),
                        ("agentloop.tool.started", {}),
                    ],
                    "UNSET",
                    [],
                ),
                (
                    "execute_tool boom",
                    {**tool, "gen_ai.tool.name": "boom", "gen_ai.tool.call.id": "c3",
                     "agentloop.tool.outcome": "failed", "error.type": "failed"},
                    [("agentloop.tool.started", {})],
                    "ERROR",
                    [],
                ),
                chat(
                    "chat script-1",
                    {
                        **CONFIGURED,
                        **TOKENS,
                        "gen_ai.provider.name": "anthropic",
                        "gen_ai.system": "anthropic",
                        "gen_ai.response.model": "claude-x-2026",
                        "gen_ai.response.id": "msg_01",
                        "gen_ai.response.finish_reasons": ("stop",),
                    },
                ),
            ],
        ),
        (
            "invoke_agent helper",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "helper",
                "gen_ai.conversation.id": "s1",
                "agentloop.turn.id": "turn-2",
                "gen_ai.provider.name": "scripted",
                "error.type": "ProviderError",
            },
            [],
            "ERROR",
            [chat("chat script-1", {**CONFIGURED, "error.type": "ProviderError"}, "ERROR")],
        ),
    ]  # fmt: skip
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

    def script(request: al.TurnRequest) -> Reply | str:
        if request.turn_id == "turn-1":
            streaming.set()
            return hang(al.BeginPart("t", al.PartKind.TEXT), al.AppendText("t", "thinking"))
        return tool_calls(call("wait", {}, id="w1"))

    blocking = Blocking()
    registry = al.ToolRegistry().with_tool(blocking)
    builder = (
        al.Agent.builder()
        .model(al.ScriptedModel(script))
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

    turn = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agentloop",
            "gen_ai.conversation.id": "s1", "agentloop.finish_reason": "cancelled"}  # fmt: skip
    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_agent agentloop",
            {**turn, "agentloop.turn.id": "turn-1"},
            [],
            "UNSET",
            [
                (
                    "chat",
                    {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "s1",
                     "gen_ai.response.finish_reasons": ("cancelled",), "error.type": "cancelled"},
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
                chat("chat", {"gen_ai.response.finish_reasons": ("tool_call",)}),
                (
                    "execute_tool wait",
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function",
                     "gen_ai.tool.name": "wait", "gen_ai.tool.call.id": "w1",
                     "agentloop.tool.outcome": "cancelled", "error.type": "cancelled"},
                    [("agentloop.tool.started", {})],
                    "ERROR",
                    [],
                ),
            ],
        ),
    ]  # fmt: skip


async def test_host_span_parents_turns_and_tool_tasks_keep_their_parents() -> None:
    provider, exporter = pipeline()
    tracer = trace.get_tracer("host", tracer_provider=provider)
    observer = OtelObserver(provider, model="m")
    model = al.ScriptedModel(
        [
            tool_calls(
                call("add", {"a": 1, "b": 1}, id="c1"), call("add", {"a": 2, "b": 2}, id="c2")
            ),
            "ok",
        ]
    )
    registry = al.ToolRegistry().with_tool(Add())
    async with al.AsyncTaskManager() as manager:
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
            [("invoke_agent agentloop", [("chat m", []), ("execute_tool add", []),
                                         ("execute_tool add", []), ("chat m", [])])],
        )
    ]  # fmt: skip
    tool_spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool add"]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tool_spans) == ["c1", "c2"]  # type: ignore[index]


async def test_content_is_captured_only_when_asked() -> None:
    for capture in (False, True):
        provider, exporter = pipeline()
        observer = OtelObserver(provider, capture_content=capture)
        model = al.ScriptedModel([tool_calls(call("add", {"a": 1, "b": 2}, id="c1")), text("3!")])
        driver = await agent(model, observer).start("s1")
        assert isinstance(await driver.run_until_blocked(), al.Finished)
        content_keys = {
            key
            for span in exporter.get_finished_spans()
            for key in (span.attributes or {})
            if key in {"gen_ai.input.messages", "gen_ai.output.messages",
                       "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
        }  # fmt: skip
        if not capture:
            assert content_keys == set()
            continue
        spans = {(s.name, s.start_time): s.attributes or {} for s in exporter.get_finished_spans()}
        chats = [
            attributes
            for (name, _), attributes in sorted(spans.items(), key=lambda kv: kv[0][1] or 0)
            if name == "chat"
        ]
        tool = next(a for (name, _), a in spans.items() if name == "execute_tool add")
        assert tool["gen_ai.tool.call.arguments"] == '{"a":1,"b":2}'
        assert tool["gen_ai.tool.call.result"] == '"3"'
        assert chats[0]["gen_ai.input.messages"] == (
            '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'
        )
        assert chats[0]["gen_ai.output.messages"] == (
            '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"add",'
            '"arguments":{"a":1,"b":2}}]}]'
        )
        assert chats[1]["gen_ai.output.messages"] == (
            '[{"role":"assistant","parts":[{"type":"text","content":"3!"}]}]'
        )
        assert '"type":"tool_call_response","id":"c1","response":"3"' in str(
            chats[1]["gen_ai.input.messages"]
        )


def test_attribute_names_are_the_semantic_conventions() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

    from agentloop.observe import _otel

    for name in ("OPERATION_NAME", "PROVIDER_NAME", "SYSTEM", "REQUEST_MODEL", "RESPONSE_MODEL",
                 "RESPONSE_ID", "RESPONSE_FINISH_REASONS", "USAGE_INPUT_TOKENS",
                 "USAGE_OUTPUT_TOKENS", "USAGE_CACHE_READ_INPUT_TOKENS",
                 "USAGE_CACHE_CREATION_INPUT_TOKENS", "USAGE_REASONING_OUTPUT_TOKENS",
                 "AGENT_NAME", "CONVERSATION_ID", "TOOL_NAME", "TOOL_CALL_ID", "TOOL_TYPE",
                 "TOOL_CALL_ARGUMENTS", "TOOL_CALL_RESULT", "INPUT_MESSAGES",
                 "OUTPUT_MESSAGES"):  # fmt: skip
        ours = {
            "OPERATION_NAME": "OPERATION", "PROVIDER_NAME": "PROVIDER",
            "RESPONSE_FINISH_REASONS": "FINISH_REASONS", "USAGE_INPUT_TOKENS": "INPUT_TOKENS",
            "USAGE_OUTPUT_TOKENS": "OUTPUT_TOKENS",
            "USAGE_CACHE_READ_INPUT_TOKENS": "CACHE_READ_TOKENS",
            "USAGE_CACHE_CREATION_INPUT_TOKENS": "CACHE_CREATION_TOKENS",
            "USAGE_REASONING_OUTPUT_TOKENS": "REASONING_TOKENS",
            "TOOL_CALL_ARGUMENTS": "TOOL_ARGUMENTS",
            "TOOL_CALL_RESULT": "TOOL_RESULT",
        }.get(name, name)  # fmt: skip
        assert getattr(_otel, ours) == getattr(gen_ai, "GEN_AI_" + name), name
