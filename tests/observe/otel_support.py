"""An in-memory OpenTelemetry pipeline and a span-tree printer for the tests."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def pipeline() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def tree(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[Any]:
    """The spans as nested ``(name, attributes, events, status, children)``, in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {span.context.span_id for span in spans if span.context is not None}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)

    def render(span: ReadableSpan) -> Any:
        assert span.context is not None
        return (
            span.name,
            dict(span.attributes or {}),
            [(event.name, dict(event.attributes or {})) for event in span.events],
            span.status.status_code.name,
            [render(child) for child in by_parent.get(span.context.span_id, [])],
        )

    return [render(span) for span in by_parent.get(None, [])]
