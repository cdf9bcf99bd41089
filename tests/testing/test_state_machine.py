"""AgentStateMachine runs against agentloop's own components (dogfooding)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, Phase

from agentloop import (
    AgentBuilder,
    Allow,
    FileSystemWrite,
    Item,
    ItemKind,
    MutationContext,
    MutatorError,
    PermissionDecision,
    PermissionRequest,
    RequireApproval,
    ToolContext,
    ToolRegistry,
    ToolRequest,
    ToolSpec,
    TranscriptCursor,
)
from agentloop.testing import AgentStateMachine

SETTINGS = hypothesis.settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Echo:
    spec = ToolSpec(
        "echo",
        "Echo a value",
        {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
    )

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        return request.input["value"]


class WriteNote:
    spec = ToolSpec(
        "write_note",
        "Write a note",
        {"type": "object", "properties": {"path": {"type": "string", "maxLength": 12}}},
    )

    def proposed_requests(self, request: ToolRequest) -> list[PermissionRequest]:
        return [FileSystemWrite(str(request.input.get("path", "/notes/default")))]

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        return "written"


class AskBeforeWriting:
    def evaluate(self, request: PermissionRequest) -> PermissionDecision:
        if isinstance(request, FileSystemWrite):
            return RequireApproval("sensitive_path", request.summary)
        return Allow()


class KeepLastTurn:
    """A correct compaction mutator: keeps the last user turn only."""

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        starts = [i for i, item in enumerate(cursor) if item.kind is ItemKind.USER]
        if len(starts) > 1:
            cursor[: starts[-1]] = [Item.text(ItemKind.CONTEXT, "earlier turns, compacted")]


def default_configuration(builder: AgentBuilder) -> AgentBuilder:
    """The builder's defaults (SimpleTaskManager, no mutators) plus tools and approvals."""
    registry = ToolRegistry().with_tool(Echo()).with_tool(WriteNote())
    return builder.add_tool_source(registry).permissions(AskBeforeWriting())


def compaction_configuration(builder: AgentBuilder) -> AgentBuilder:
    """The default configuration with a compaction mutator rewriting history."""
    return default_configuration(builder).mutator(KeepLastTurn())


# Hook: add agent configurations here (e.g. "async_task_manager": a function that
# calls builder.task_manager(AsyncTaskManager(...))); every one runs on both backends.
CONFIGURATIONS: dict[str, Callable[[AgentBuilder], AgentBuilder]] = {
    "default": default_configuration,
    "compaction": compaction_configuration,
}


def machine_for(name: str, backend: str) -> type[AgentStateMachine]:
    configure = CONFIGURATIONS[name]

    class Machine(AgentStateMachine):
        def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
            return configure(builder)

    Machine.backend = backend
    Machine.__name__ = f"{name}_{backend}_machine"
    return Machine


@pytest.mark.parametrize("configuration", sorted(CONFIGURATIONS))
def test_agent_state_machine(configuration: str, anyio_backend: str) -> None:
    machine_for(configuration, anyio_backend).run(settings=SETTINGS)


class _BreaksPairs:
    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        if any(cursor[0].tool_results()) or len(cursor) < 3:
            return
        for index, item in enumerate(cursor):
            if any(item.tool_calls()):
                del cursor[index]
                return


def test_the_machine_reports_a_mutator_that_breaks_pairs(anyio_backend: str) -> None:
    class Broken(AgentStateMachine):
        def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
            return default_configuration(builder).mutator(_BreaksPairs())

    Broken.backend = anyio_backend
    # Generation only: shrinking a failing machine works but takes a minute or two.
    quick = hypothesis.settings(
        SETTINGS, max_examples=100, database=None, derandomize=True, phases=[Phase.generate]
    )
    with pytest.raises(MutatorError, match="broke the transcript: orphaned tool_result"):
        Broken.run(settings=quick)


def test_probe_tool_is_advertised_and_can_be_disabled(anyio_backend: str) -> None:
    class WithProbes(AgentStateMachine):
        pass

    class WithoutProbes(AgentStateMachine):
        probes = False

    for machine_class, expected in ((WithProbes, ["agentloop_probe"]), (WithoutProbes, [])):
        machine_class.backend = anyio_backend
        machine = machine_class()
        try:
            assert [spec.name for spec in machine.tool_specs()] == expected
        finally:
            machine.teardown()
