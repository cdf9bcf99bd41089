"""Issue 2: cancelling at any await point keeps every model request valid.

For random scripted models (answers, tool-call rounds, calls needing
approval), random host answers and one interrupt injected at a random await
point — the model stream, a running tool, a mutator pass, an approval wait,
an ``AfterToolResult`` pause, or the host cancelling ``next()`` itself —
every ``TurnRequest.transcript`` the model receives passes
``validate_transcript``, the cancelled turn ends ``CANCELLED`` with an
interrupted assistant item, and a new turn afterwards completes normally.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentloop import (
    AfterToolResult,
    Agent,
    ApprovalRequest,
    AwaitingInput,
    CancellationController,
    Finished,
    FinishReason,
    Item,
    ItemKind,
    Step,
    ToolContext,
    ToolRequest,
    ToolSpec,
)
from agentloop.model import TurnRequest
from agentloop.permissions import Allow, AskApproval, FileSystemWrite, PermissionRequest, Verdict
from agentloop.testing import Reply, ScriptedModel, hang, model_scripts
from agentloop.tools import ToolRegistry
from agentloop.transcript import MutationContext, TranscriptCursor, validate_transcript

pytestmark = pytest.mark.anyio

POINTS = ("model", "tool", "mutator", "approval", "pause", "host")
OBJECT: dict[str, Any] = {"type": "object", "properties": {"note": {"type": "string"}}}


@attrs.define
class Injection:
    """Cancel at the ``occurrence``-th time the run reaches ``point``."""

    point: str
    occurrence: int
    seen: int = 0
    fired: bool = False
    reached: anyio.Event = attrs.field(factory=anyio.Event)

    def hit(self, point: str) -> bool:
        if self.fired or point != self.point:
            return False
        self.seen += 1
        if self.seen <= self.occurrence:
            return False
        self.fired = True
        return True


class Echo:
    spec = ToolSpec("echo", "Echo", OBJECT)

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        return "echo"


class Slow:
    """Awaits a release that never comes while it is the injection point."""

    spec = ToolSpec("slow", "A slow tool", OBJECT)

    def __init__(self, injection: Injection) -> None:
        self.injection = injection

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        if self.injection.hit("tool"):
            self.injection.reached.set()
            await anyio.Event().wait()
        await anyio.lowlevel.checkpoint()
        return "slow done"


class Write:
    spec = ToolSpec("write", "Needs approval", OBJECT)

    def proposed_requests(self, request: ToolRequest) -> list[PermissionRequest]:
        return [FileSystemWrite("/tmp/note")]

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        return "written"


class AskForWrites:
    def evaluate(self, request: PermissionRequest) -> Verdict:
        if isinstance(request, FileSystemWrite):
            return AskApproval("sensitive_path", request.summary)
        return Allow()


class Pausing:
    """A mutator with a real await point; stalls while it is the injection point."""

    def __init__(self, injection: Injection) -> None:
        self.injection = injection

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        if self.injection.hit("mutator"):
            self.injection.reached.set()
            await anyio.sleep_forever()
        await anyio.lowlevel.checkpoint()


TOOLS = (Echo.spec, Slow.spec, Write.spec)


@attrs.frozen
class Case:
    script: list[Reply]
    point: str
    occurrence: int
    approvals: list[str]  # "approve" | "approve_with" | "deny", cycled
    interjections: list[bool]  # cycled over AfterToolResult pauses


cases = st.builds(
    Case,
    script=model_scripts(TOOLS, max_turns=2, max_rounds=2),
    point=st.sampled_from(POINTS),
    occurrence=st.integers(0, 1),
    approvals=st.lists(st.sampled_from(["approve", "approve_with", "deny"]), min_size=1),
    interjections=st.lists(st.booleans(), min_size=1),
)


async def run_case(case: Case) -> bool:
    """Play ``case``; return whether the interrupt fired."""
    injection = Injection(case.point, case.occurrence)
    controller = CancellationController()
    replies = list(case.script)
    host_scope: list[anyio.CancelScope] = []

    def answer(request: TurnRequest) -> Reply | str:
        if injection.point in ("model", "host") and injection.hit(injection.point):
            injection.reached.set()
            return hang()
        return replies.pop(0) if replies else "recovered"

    model = ScriptedModel(answer)
    registry = ToolRegistry().with_tool(Echo()).with_tool(Slow(injection)).with_tool(Write())
    agent = (
        Agent.builder()
        .model(model)
        .add_tool_source(registry)
        .permissions(AskForWrites())
        .mutator(Pausing(injection))
        .cancellation(controller.handle())
        .build()
    )
    driver = await agent.start("cancellation-property")

    async def interrupter() -> None:
        await injection.reached.wait()
        if injection.point == "host":
            host_scope[-1].cancel()
        else:
            controller.interrupt()

    async def host_next() -> Step | None:
        with anyio.CancelScope() as scope:
            host_scope.append(scope)
            return await driver.next()
        return None  # the host cancelled next()

    approvals = iter(case.approvals * 20)
    interjections = iter(case.interjections * 20)
    cancelled_turns = 0
    turns_after_cancel: list[FinishReason] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(interrupter)
            for turn in range(len(case.script) + 2):
                if turn > len(case.script) and not injection.fired:
                    break
                driver.submit_input([Item.text(ItemKind.USER, f"turn {turn}")])
                was_fired = injection.fired
                while True:
                    step = await host_next()
                    if step is None or isinstance(step, Finished | AwaitingInput):
                        break
                    if isinstance(step, ApprovalRequest):
                        if injection.hit("approval"):
                            controller.interrupt()
                        else:
                            decision = next(approvals)
                            if decision == "approve":
                                step.approve()
                            elif decision == "approve_with":
                                step.approve_with({"note": "edited"})
                            else:
                                step.deny("no")
                    elif isinstance(step, AfterToolResult):
                        if injection.hit("pause"):
                            controller.interrupt()
                        elif next(interjections):
                            step.submit([Item.text(ItemKind.USER, "also this")])
                cancelled = step is None or (
                    isinstance(step, Finished)
                    and step.result.finish_reason is FinishReason.CANCELLED
                )
                if cancelled:
                    cancelled_turns += 1
                    last = driver.snapshot().transcript[-1]
                    assert last.kind is ItemKind.ASSISTANT
                    assert last.metadata["agentloop.interrupted"] is True
                elif was_fired:
                    assert isinstance(step, Finished)
                    turns_after_cancel.append(step.result.finish_reason)
                    if step.result.finish_reason is FinishReason.ERROR:
                        # The script's next reply was empty: a stated error, not a silent end.
                        assert step.result.error is not None
                        assert step.result.error.error_type == "empty_response"
                    break
            tasks.cancel_scope.cancel()
    for request in model.requests:
        validate_transcript(request.transcript)
    validate_transcript(driver.snapshot().transcript)
    assert cancelled_turns == (1 if injection.fired else 0)
    if injection.fired:
        assert turns_after_cancel in ([FinishReason.COMPLETED], [FinishReason.ERROR])
    return injection.fired


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=cases)
async def test_cancellation_anywhere_keeps_requests_valid_and_the_session_usable(
    case: Case,
) -> None:
    fired = await run_case(case)
    event(f"cancelled at {case.point}" if fired else "no cancellation")


@pytest.mark.parametrize("point", POINTS)
async def test_each_cancellation_point_fires(point: str) -> None:
    """A fixed script reaching every point, so each injection really happens."""
    from agentloop.testing import call, text, tool_calls

    script = [
        tool_calls(call("slow", {}), call("echo", {})),  # a pause follows this round
        tool_calls(call("write", {})),  # an approval; the model is called right after
        text("first answer"),
        text("second answer"),
    ]
    assert await run_case(Case(script, point, 0, ["approve"], [False]))
