"""OpenTelemetry GenAI spans for one session, printed as a tree; plus usage totals.

Run: python examples/observability_spans.py   (needs: pip install 'agentloop[otel]')
"""

from __future__ import annotations

import sys

import anyio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.observe import OtelObserver, StructlogObserver, UsageTotals
from agentloop.testing import Reply, call, text, tool_calls

USAGE = al.Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100)


@al.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@al.tool(destructive=True)
async def delete_note(name: str) -> str:
    """Delete a note (destructive: needs approval)."""
    return f"deleted {name}"


def script(request: al.model.TurnRequest) -> Reply | str:
    replies = [
        tool_calls(
            call("add", {"a": 2, "b": 40}), call("delete_note", {"name": "old"}), usage=USAGE
        ),
        text("2 + 40 = 42, and the old note is gone.", usage=USAGE),
    ]
    return replies[sum(item.kind is al.ItemKind.ASSISTANT for item in request.transcript)]


def print_tree(spans: tuple[ReadableSpan, ...]) -> None:
    """Print each span under its parent with the attributes worth a glance."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent else None
        children.setdefault(parent, []).append(span)
    shown = (
        "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.tool.call.id",
        "gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens", "error.type",
    )  # fmt: skip

    def show(span: ReadableSpan, depth: int) -> None:
        attributes = span.attributes or {}
        details = " ".join(
            f"{key.removeprefix('gen_ai.')}={_text(attributes[key])}"
            for key in shown
            if key in attributes
        )
        print(f"{'  ' * depth}{span.name}  {details}".rstrip())
        for event in span.events:
            print(f"{'  ' * (depth + 1)}* {event.name}")
        assert span.context is not None
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


def _text(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = OtelObserver(provider, agent_name="notes-agent", provider="scripted", model="demo-1")
    usage = UsageTotals()
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(script))
        .add_tool_source(al.ToolRegistry().with_tool(add).with_tool(delete_note))
        .permissions(al.permissions.PolicyChain(al.permissions.ToolPolicy(destructive="approve")))
        .observer(StructlogObserver.to_stream(sys.stderr, format="console"))
    )
    builder = usage.attach(spans.attach(builder))
    agent = builder.input([al.Item.text(al.ItemKind.USER, "Add 2 and 40, drop 'old'.")]).build()
    driver = await agent.start("session-1")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    assert isinstance(await driver.run_until_blocked(), al.Finished)

    print_tree(exporter.get_finished_spans())
    totals = usage.session("session-1")
    print(
        f"usage: {totals.model_calls} model calls, {totals.usage.input_tokens} input tokens "
        f"({totals.usage.cache_read_tokens} cached), {totals.usage.output_tokens} output tokens"
    )


if __name__ == "__main__":
    anyio.run(main)
