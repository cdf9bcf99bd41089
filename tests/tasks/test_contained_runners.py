"""A runner that raises anything, or returns no result, fails its call under either manager."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

import pytest
import sniffio

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class Broken:
    """An executor whose ``invoke`` misbehaves in the way ``behaviour`` names."""

    def __init__(self, behaviour: Any) -> None:
        self.inner = al.tools.BasicToolExecutor(
            [al.ToolRegistry().with_tool(al.tool(lambda: "ok", name="t"))]
        )
        self.behaviour = behaviour

    def specs(self) -> list[al.ToolSpec]:
        return self.inner.specs()

    def drain_catalog_events(self) -> list[al.tools.ToolCatalogEvent]:
        return self.inner.drain_catalog_events()

    def prepare(self, request: al.ToolRequest, permissions: Any, *, approved: Any) -> Any:
        return self.inner.prepare(request, permissions, approved=approved)

    async def invoke(self, call: al.tools.PreparedCall, ctx: al.ToolContext) -> Any:
        if isinstance(self.behaviour, BaseException):
            raise self.behaviour
        return self.behaviour


def _cases() -> list[tuple[Any, str]]:
    return [
        (SystemExit(2), "tool 't' failed: SystemExit: 2"),
        (KeyboardInterrupt(), "tool 't' failed: KeyboardInterrupt"),
        (ValueError("bad"), "tool 't' failed: ValueError: bad"),
        ("not a result", "tool 't' failed: its runner returned str, expected a ToolResultPart"),
    ]


@pytest.mark.parametrize("manager", ["simple", "async"])
@pytest.mark.parametrize(("behaviour", "text"), _cases())
async def test_a_misbehaving_runner_fails_its_call_and_the_session_goes_on(
    manager: str, behaviour: Any, text: str
) -> None:
    async with AsyncExitStack() as stack:
        tasks: Any = al.tasks.SimpleTaskManager()
        if manager == "async":
            tasks = await stack.enter_async_context(al.tasks.AsyncTaskManager())
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("t", {}, id="c1")), "done"]))
            .tool_executor(Broken(behaviour))
            .task_manager(tasks)
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        driver = await agent.start("s1")
        step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
        assert step.result.finish_reason is al.FinishReason.COMPLETED
        results = [p for item in driver.snapshot().transcript for p in item.tool_results()]
        assert [(r.output, r.metadata) for r in results] == [
            (text, {al.tools.OUTCOME_KEY: "failed"})
        ]


async def test_a_stray_cancellation_from_a_runner_is_a_failed_call() -> None:
    if sniffio.current_async_library() != "asyncio":
        pytest.skip("only asyncio's CancelledError can be raised by user code")
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([tool_calls(call("t", {}, id="c1")), "done"]))
        .tool_executor(Broken(asyncio.CancelledError("stray")))
        .input([al.Item.text(al.ItemKind.USER, "go")])
        .build()
    )
    driver = await agent.start("s1")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    results = [p.output for item in driver.snapshot().transcript for p in item.tool_results()]
    assert results == ["tool 't' failed: CancelledError: stray"]
