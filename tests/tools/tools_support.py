"""Helpers for the tool and permission tests: run one tool round through the driver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import agentloop as al
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import tool_calls


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


def results_of(driver: al.LoopDriver) -> list[al.ToolResultPart]:
    """Every tool result in the driver's transcript, in order."""
    return [part for item in driver.snapshot().transcript for part in item.tool_results()]


def outcome(result: al.ToolResultPart) -> Any:
    return result.metadata.get(al.tools.OUTCOME_KEY)


async def start(
    tools: Sequence[al.Tool] = (),
    calls: Sequence[al.ToolCallPart] = (),
    *,
    permissions: al.permissions.PermissionChecker | None = None,
    limits: al.LoopLimits | None = None,
    resources: Any = None,
    executor: al.tools.ToolExecutor | None = None,
    sources: Sequence[al.tools.ToolSource] = (),
) -> tuple[al.LoopDriver, al.testing.ScriptedModel]:
    """A driver whose model asks for ``calls`` once, then answers "done"."""
    model = al.testing.ScriptedModel([tool_calls(*calls), "done"])
    registry = al.ToolRegistry()
    for tool in tools:
        registry.with_tool(tool)
    builder = al.Agent.builder().model(model).input([user("go")]).resources(resources)
    for source in (registry, *sources):
        builder.add_tool_source(source)
    if permissions is not None:
        builder.permissions(permissions)
    if executor is not None:
        builder.tool_executor(executor)
    config = al.SessionConfig("s1", limits=limits or al.LoopLimits())
    return await builder.build().start(config), model


async def run_round(
    tools: Sequence[al.Tool] = (),
    calls: Sequence[al.ToolCallPart] = (),
    **options: Any,
) -> list[al.ToolResultPart]:
    """Run the round to the end of the turn; return its results (transcript checked)."""
    driver, model = await start(tools, calls, **options)
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished), step
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    al.transcript.validate_transcript(driver.snapshot().transcript)
    model.assert_complete()
    return results_of(driver)


async def run_one(tool: al.Tool, call_input: Any, **options: Any) -> al.ToolResultPart:
    """Run one call of ``tool`` with ``call_input``; return its result."""
    (result,) = await run_round(
        [tool], [al.ToolCallPart("call-1", tool.spec.name, call_input)], **options
    )
    return result
