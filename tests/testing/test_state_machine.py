"""AgentStateMachine runs against agentloop's own components (dogfooding)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import anyio
import hypothesis
import pytest
from hypothesis import HealthCheck, Phase
from hypothesis.stateful import invariant

from agentloop import (
    AgentBuilder,
    DriverState,
    Item,
    ItemKind,
    MutatorError,
    ToolContext,
    ToolRequest,
    ToolSpec,
)
from agentloop.permissions import Allow, AskApproval, FileSystemWrite, PermissionRequest, Verdict
from agentloop.tasks import AsyncTaskManager, DetachAfter, RouteByName, TaskKind, TaskRoute
from agentloop.testing import PROBE_TOOL_NAME, AgentStateMachine
from agentloop.tools import ToolRegistry
from agentloop.transcript import MutationContext, TranscriptCursor

SETTINGS = hypothesis.settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CONCURRENT_SETTINGS = hypothesis.settings(SETTINGS, max_examples=40)
"""More examples where timing varies (run with 200 once: no failures, about 12 s each)."""


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
    def evaluate(self, request: PermissionRequest) -> Verdict:
        if isinstance(request, FileSystemWrite):
            return AskApproval("sensitive_path", request.summary)
        return Allow()


class KeepLastTurn:
    """A correct compaction mutator: keeps the last user turn only."""

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        starts = [i for i, item in enumerate(cursor) if item.kind is ItemKind.USER]
        if len(starts) > 1:
            cursor[: starts[-1]] = [Item.text(ItemKind.CONTEXT, "earlier turns, compacted")]


class Sleep:
    """Sleeps a few milliseconds (the model picks how many), so calls really overlap."""

    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(
            name,
            "Sleep a few milliseconds",
            {
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 8}},
            },
        )

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        await anyio.sleep(request.input.get("ms", 1) / 1000)
        return f"slept:{request.call_id}"


class FarFromTheDetachLimit(Sleep):
    """Sleeps no time or 250 ms, never near ``AsyncDetachAfterMachine``'s 50 ms limit:
    whether a call detaches then depends on what hypothesis drew, not on the scheduler
    (a sleep near the limit detached or not with the machine's load, and hypothesis
    replaying the same draws saw other steps: ``FlakyStrategyDefinition``)."""

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        await anyio.sleep(0 if request.input.get("ms", 1) <= 4 else 0.25)
        return f"slept:{request.call_id}"


class SlowWriteNote(WriteNote):
    """A write that needs approval and then takes a while (runs beside other calls)."""

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        await anyio.sleep(0.002)
        return "written slowly"


class DefaultMachine(AgentStateMachine):
    """The builder's defaults (SimpleTaskManager, no mutators) plus tools and approvals."""

    def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
        registry = ToolRegistry().with_tool(Echo()).with_tool(WriteNote())
        return builder.add_tool_source(registry).permissions(AskBeforeWriting())


class CompactionMachine(DefaultMachine):
    """The default configuration with a compaction mutator rewriting history."""

    def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
        return super().configure_agent(builder).mutator(KeepLastTurn())


class AsyncTaskManagerMachine(AgentStateMachine):
    """AsyncTaskManager: concurrent rounds, approvals beside running calls, background
    and detaching calls (the probe tool stays in the foreground)."""

    def task_manager(self) -> AsyncTaskManager:
        routes: dict[str, TaskRoute] = {
            "background_sleep": TaskKind.BACKGROUND,
            "detaching_sleep": DetachAfter(0),
        }
        return AsyncTaskManager(routing=RouteByName(routes))

    sleep_tool: ClassVar[type[Sleep]] = Sleep

    def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
        self.manager = self.enter_async_context(self.task_manager())
        registry = ToolRegistry().with_tool(Echo()).with_tool(SlowWriteNote())
        for name in ("sleep", "background_sleep", "detaching_sleep"):
            registry.add(self.sleep_tool(name))
        return (
            builder.add_tool_source(registry)
            .permissions(AskBeforeWriting())
            .task_manager(self.manager)
        )

    async def settle(self) -> None:
        """Let background calls finish, so every next() drains all of them."""
        handle = self.manager.handle()
        while any(
            task.kind is TaskKind.BACKGROUND and task.tool_name != PROBE_TOOL_NAME
            for task in await handle.list_running()
        ):
            await handle.next_event()  # every task that ends emits one

    @invariant()
    def no_foreground_call_outlives_its_step(self) -> None:
        """Only a pending approval leaves foreground calls running between steps."""
        if self.driver.state is not DriverState.AWAITING_APPROVAL:
            running = self.portal.call(self.manager.handle().list_running)
            assert all(task.kind is TaskKind.BACKGROUND for task in running), running


class AsyncDetachAfterMachine(AsyncTaskManagerMachine):
    """AsyncTaskManager with a global ``detach_after``: any foreground call may detach."""

    sleep_tool: ClassVar[type[Sleep]] = FarFromTheDetachLimit

    def task_manager(self) -> AsyncTaskManager:
        # The probe must not detach: an interrupt it fires would then land between steps.
        routes: dict[str, TaskRoute] = {
            "background_sleep": TaskKind.BACKGROUND,
            PROBE_TOOL_NAME: DetachAfter(60),
        }
        return AsyncTaskManager(routing=RouteByName(routes), detach_after=0.05)


# Every configuration runs on both backends.
CONFIGURATIONS: dict[str, type[AgentStateMachine]] = {
    "default": DefaultMachine,
    "compaction": CompactionMachine,
    "async_task_manager": AsyncTaskManagerMachine,
    "async_detach_after": AsyncDetachAfterMachine,
}


def machine_for(name: str, backend: str) -> type[AgentStateMachine]:
    return type(f"{name}_{backend}_machine", (CONFIGURATIONS[name],), {"backend": backend})


@pytest.mark.parametrize("configuration", sorted(CONFIGURATIONS))
def test_agent_state_machine(configuration: str, anyio_backend: str) -> None:
    concurrent = issubclass(CONFIGURATIONS[configuration], AsyncTaskManagerMachine)
    machine_for(configuration, anyio_backend).run(
        settings=CONCURRENT_SETTINGS if concurrent else SETTINGS
    )


class _BreaksPairs:
    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        if any(cursor[0].tool_results()) or len(cursor) < 3:
            return
        for index, item in enumerate(cursor):
            if any(item.tool_calls()):
                del cursor[index]
                return


def test_the_machine_reports_a_mutator_that_breaks_pairs(anyio_backend: str) -> None:
    class Broken(DefaultMachine):
        def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
            return super().configure_agent(builder).mutator(_BreaksPairs())

    Broken.backend = anyio_backend
    # Generation only: shrinking a failing machine works but takes a minute or two.
    quick = hypothesis.settings(
        SETTINGS, max_examples=100, database=None, derandomize=True, phases=[Phase.generate]
    )
    with pytest.raises(MutatorError, match="broke the transcript: orphaned tool_result"):
        Broken.run(settings=quick)


def test_async_resources_live_as_long_as_the_machine_and_settle_precedes_each_step(
    anyio_backend: str,
) -> None:
    log: list[str] = []

    @asynccontextmanager
    async def resource(name: str) -> AsyncIterator[str]:
        log.append(f"enter {name}")
        try:
            yield name.upper()
        finally:
            log.append(f"exit {name}")

    class WithResources(DefaultMachine):
        def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
            entered = [self.enter_async_context(resource(name)) for name in ("a", "b")]
            log.append("values " + " ".join(entered))
            return super().configure_agent(builder)

        async def settle(self) -> None:
            log.append("settle")

    WithResources.backend = anyio_backend
    WithResources.run(settings=hypothesis.settings(SETTINGS, max_examples=5, database=None))
    runs = " ".join(log).split("exit a")
    assert runs[-1] == ""
    for run in runs[:-1]:
        assert re.fullmatch(r" ?enter a enter b values A B( settle)* exit b ", run), run
    assert "settle" in log


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
