"""Random trees of nested agents keep every transcript valid and every call answered once.

Each agent's model calls, in one round, up to three tools: an echo that needs approval, a
plain tool, a tool that fails, a child agent (down to depth 3), or a trip wire that
interrupts the top driver while the tree runs. Some models fail. The host answers every
approval that surfaces (approve, deny or edit, drawn) and may interrupt the top driver at
a drawn step. Whatever happens, on both backends: the top turn finishes, and the top's
transcript and every child's (``ChildRun.transcript``) pass ``validate_transcript`` with
every call answered by exactly one result.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest
from agents_support import AskReads, EchoTool, assert_answered_once
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.agents
import agentloop.tasks
import agentloop.testing
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

MAX_DEPTH = 3


@attrs.frozen
class Node:
    """One agent: the calls its model makes (kind, child node), and whether it fails."""

    calls: tuple[tuple[str, Node | None], ...]
    model_fails: bool


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0, trips: bool = False) -> Node:
    kinds = ["echo", "plain", "fail"] + (["child"] if depth < MAX_DEPTH else [])
    kinds += ["trip"] if trips else []
    calls = []
    for _ in range(draw(st.integers(0, 3 if depth < 2 else 1))):
        kind = draw(st.sampled_from(kinds))
        child = draw(nodes(depth + 1, trips)) if kind == "child" else None
        calls.append((kind, child))
    return Node(tuple(calls), draw(st.integers(0, 9)) == 0)


@attrs.frozen
class Case:
    tree: Node
    answers: tuple[str, ...]
    interrupt_at: int | None


@st.composite
def cases(draw: st.DrawFn) -> Case:
    trips = draw(st.booleans())
    return Case(
        draw(nodes(0, trips)),
        tuple(draw(st.lists(st.sampled_from(["approve", "deny", "edit"]), min_size=1))),
        draw(st.none() | st.integers(0, 6)),
    )


class Plain:
    spec = al.ToolSpec("plain", "Plain.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await anyio.lowlevel.checkpoint()
        return "plain"


class Fail:
    spec = al.ToolSpec("fail", "Fails.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        raise RuntimeError("tool broke")


class Trip:
    """Interrupts the top driver, then waits until cancelled."""

    spec = al.ToolSpec("trip", "Trips.", {"type": "object"})

    def __init__(self, controller: al.CancellationController) -> None:
        self.controller = controller

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.controller.interrupt()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def script(node: Node) -> Any:
    """The node's model: its calls first, then a text answer (or a failure)."""

    def answer(request: al.model.TurnRequest) -> Any:
        if node.model_fails:
            raise al.ProviderError("model down", kind=al.ProviderErrorKind.INVALID_REQUEST)
        if not any(item.kind is al.ItemKind.TOOL for item in request.transcript) and node.calls:
            return tool_calls(*(
                call(kind if child is None else f"child_{n}", {"value": "v"}
                     if kind == "echo" else ({"input": "go"} if child else {}), id=f"c{n}")
                for n, (kind, child) in enumerate(node.calls)
            ))  # fmt: skip
        return "done"

    return answer


def build(
    node: Node, manager: Any, controller: al.CancellationController, runs: list[Any]
) -> al.Agent:
    registry = al.ToolRegistry().with_tool(EchoTool()).with_tool(Plain()).with_tool(Fail())
    registry = registry.with_tool(Trip(controller))
    for n, (_kind, child) in enumerate(node.calls):
        if child is not None:
            agent = build(child, manager, controller, runs)
            registry = registry.with_tool(
                agent.as_tool(f"child_{n}", "A child.", on_run=runs.append)
            )
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(script(node)))
        .add_tool_source(registry)
        .permissions(AskReads())
        .task_manager(manager)
        .build()
    )


def answer(step: al.ApprovalRequest, choice: str) -> None:
    if choice == "approve":
        step.approve()
    elif choice == "deny":
        step.deny("no")
    else:
        step.approve_with({"value": "edited"})


async def drive(driver: al.LoopDriver, case: Case, controller: al.CancellationController) -> Any:
    steps = 0
    while True:
        step = await driver.next()
        if isinstance(step, al.Finished):
            return step
        if case.interrupt_at is not None and steps == case.interrupt_at:
            controller.interrupt()  # the next step closes the turn: no answer now
        elif isinstance(step, al.ApprovalRequest) and controller.handle().generation == 0:
            answer(step, case.answers[steps % len(case.answers)])
        steps += 1
        assert steps < 500


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(case=cases())
async def test_random_trees_keep_every_transcript_valid(case: Case) -> None:
    runs: list[al.agents.ChildRun] = []
    controller = al.CancellationController()
    async with al.tasks.AsyncTaskManager() as manager:
        top = build(case.tree, manager, controller, runs)
        top = attrs.evolve(top, cancellation=controller.handle())
        driver = await top.start("top")
        driver.submit_input("go")
        with anyio.fail_after(30):
            finished = await drive(driver, case, controller)
    assert isinstance(finished, al.Finished)
    assert_answered_once(driver.snapshot().transcript)
    interrupted = controller.handle().generation > 0
    assert (finished.result.finish_reason is al.FinishReason.CANCELLED) == interrupted
    for run in runs:
        assert_answered_once(run.transcript)
        # A child's step cut by the cancellation closes its turn without a result.
        assert run.result is not None or interrupted
