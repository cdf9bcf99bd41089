"""StructlogObserver, JsonlEventReporter and UsageTotals on real driver sessions."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
import structlog

import agentloop as al
import agentloop.observe
import agentloop.observe as observe
import agentloop.testing
import agentloop.tools
from agentloop.observe import JsonlEventReporter, StructlogObserver, UsageTotals, event_fields
from agentloop.testing import call, chunked, tool_calls

pytestmark = pytest.mark.anyio

USAGE = al.Usage(input_tokens=10, output_tokens=3, cache_read_tokens=4, cost=0.25)


class Echo:
    spec = al.ToolSpec("echo", "Echo.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "x" * 500


async def run(*observers: Any, session: str = "s1") -> al.LoopDriver:
    model = al.testing.ScriptedModel(
        [tool_calls(call("echo", {}, id="c1"), usage=USAGE), chunked("a", "b", usage=USAGE)]
    )
    builder = al.Agent.builder().model(model).add_tool_source(al.ToolRegistry().with_tool(Echo()))
    for observer in observers:
        builder = builder.observer(observer)
        if hasattr(observer, "on_item_appended"):
            builder = builder.transcript_observer(observer)
    agent = builder.input([al.Item.text(al.ItemKind.USER, "hi")]).build()
    driver = await agent.start(session)
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    return driver


def test_public_surface_is_sorted_and_documented() -> None:
    def order(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert observe.__all__ == sorted(observe.__all__, key=order)
    for name in observe.__all__:
        value = getattr(observe, name)
        assert not isinstance(value, type) or value.__doc__, name
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        observe.Nope  # noqa: B018


async def test_structlog_json_lines_one_per_event_without_deltas() -> None:
    out = io.StringIO()
    await run(StructlogObserver.to_stream(out, format="json"))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == [
        "agentloop.run_started",
        "agentloop.turn_started",
        "agentloop.model_call_started",
        "agentloop.tool_call_requested",
        "agentloop.model_call_finished",
        "agentloop.tool_execution_started",
        "agentloop.tool_execution_finished",
        "agentloop.tool_result_received",
        "agentloop.model_call_started",
        "agentloop.usage_updated",
        "agentloop.model_call_finished",
        "agentloop.turn_finished",
        "agentloop.agent_ended",
    ]
    assert all(line["session_id"] == "s1" and line["timestamp"].endswith("Z") for line in lines)
    result = lines[7]["result"]
    assert result["output"] == "x" * 200 + "..."
    finished = lines[-2]["result"]
    assert (finished["finish_reason"], finished["items"]) == ("completed", 4)


async def test_structlog_console_format_and_the_default_logger() -> None:
    out = io.StringIO()
    await run(StructlogObserver.to_stream(out, format="console", deltas=True))
    lines = out.getvalue().splitlines()
    assert len(lines) == 17  # 13 events and 4 deltas (begin, two chunks, commit)
    assert [line.split()[1] for line in lines[9:13]] == ["agentloop.content_delta"] * 4
    assert lines[0].endswith("agentloop.run_started          session_id=s1")
    configured = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    try:
        quiet = io.StringIO()
        await run(StructlogObserver.to_stream(quiet))  # its own logger ignores the host's level
        assert len(quiet.getvalue().splitlines()) == 13
        with structlog.testing.capture_logs() as captured:
            await run(StructlogObserver())
        assert captured == []  # the library's logger is as quiet as the host made it
        structlog.configure(wrapper_class=structlog.BoundLogger)
        with structlog.testing.capture_logs() as captured:
            await run(StructlogObserver())
    finally:
        structlog.configure(**configured)
    logged = [entry["event"] for entry in captured if entry["event"].startswith("agentloop.")]
    assert logged[:2] == [
        "agentloop.run_started",
        "agentloop.turn_started",
    ]
    assert all(entry["log_level"] == "info" for entry in captured if "session_id" in entry)


async def test_jsonl_reporter_writes_whole_events_and_keeps_write_errors() -> None:
    out = io.StringIO()
    reporter = JsonlEventReporter(out)
    await run(reporter)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 17
    assert {line["session_id"] for line in lines} == {"s1"}
    events = [al.structure(line["event"], al.observe.AgentEvent) for line in lines]  # type: ignore[type-abstract]
    received = [e for e in events if isinstance(e, al.observe.ToolResultReceived)]
    assert received == [al.observe.ToolResultReceived(al.ToolResultPart("c1", "x" * 500))]

    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("disk full")

    broken = JsonlEventReporter(Broken())
    await run(broken)
    assert len(broken.errors) == 17
    assert all(str(error) == "disk full" for error in broken.errors)


async def test_usage_totals_count_each_model_call_once_per_session() -> None:
    totals = UsageTotals()
    await run(totals, session="a")
    await run(totals, session="b")
    twice = al.Usage(input_tokens=20, output_tokens=6, cache_read_tokens=8, cost=0.5)
    assert totals.session("a") == observe.SessionUsage("a", 2, twice)
    assert totals.sessions() == [
        observe.SessionUsage("a", 2, twice),
        observe.SessionUsage("b", 2, twice),
    ]
    assert totals.total == twice + twice
    assert totals.session("never") == observe.SessionUsage("never")


def test_event_fields_compact_items_and_long_text() -> None:
    event = al.observe.TurnFinished(
        al.TurnResult("t1", al.FinishReason.COMPLETED, [al.Item.text(al.ItemKind.ASSISTANT, "y")])
    )
    assert event_fields(event) == {
        "result": {
            "turn_id": "t1",
            "finish_reason": "completed",
            "items": 1,
            "usage": None,
            "metadata": {},
            "tool_calls": [],
            "model_calls": [],
            "error": None,
        }
    }
    assert event_fields(al.observe.LoopWarning("w" * 300)) == {"message": "w" * 200 + "..."}
