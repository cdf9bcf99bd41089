"""OpenTelemetry: a child agent's ``invoke_agent`` span sits under the parent's
``execute_tool`` span of the call that runs it (each agent with its own observer)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from agents_support import EchoTool, child_agent, echo_then, user
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.observe import OtelObserver
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def names(spans: tuple[ReadableSpan, ...]) -> list[Any]:
    """The span tree as nested (name, children), in start order."""
    ids = {span.context.span_id for span in spans if span.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)

    def render(span: ReadableSpan) -> Any:
        assert span.context is not None
        return (span.name, [render(child) for child in children.get(span.context.span_id, [])])

    return [render(span) for span in children.get(None, [])]


async def test_the_childs_turn_span_is_under_the_parents_tool_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OtelObserver(provider)
    child_observer = OtelObserver(provider, agent_name="child")
    async with al.tasks.AsyncTaskManager() as manager:
        child = child_agent(echo_then("child done"), EchoTool(), manager=manager)
        child = attrs.evolve(
            child, observers=(child_observer,), transcript_observers=(child_observer,)
        )
        parent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(
                [tool_calls(call("helper", {"input": "go"}, id="p-1")), "parent done"]))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .observer(observer)
            .transcript_observer(observer)
            .input([user("go")])
            .build()
        )  # fmt: skip
        driver = await parent.start("top")
        step = await driver.next()
        step.approve()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert names(exporter.get_finished_spans()) == [
        ("invoke_agent agentloop", [
            ("chat", []),
            ("execute_tool helper", [
                ("invoke_agent child", [
                    ("chat", []),
                    ("execute_tool echo", []),
                    ("chat", []),
                ]),
            ]),
            ("chat", []),
        ]),
    ]  # fmt: skip
