"""Trees of nested agents for the fault model (``test_nested_crash.py``) and its
SIGKILL runner (``nested_kill_runner.py``): the tools, the models, a process.

Each agent's model makes one or two rounds of calls, then answers ``done``. The
calls: ``pay`` (a side effect, not idempotent, runs without asking), ``asked``
(a side effect that needs the host's approval, approved or denied as the host
draws), ``read`` (idempotent: may run again) and child agents (``child_<r>_<n>``,
an ``Agent.as_tool`` of the node below). Every call id is unique in the tree
(``<node path>-<round>-<n>``), so the world counts each side effect per call id.
The top agent has a store (one checkpoint holds the tree); the children may save to it
too, as agents made by one builder would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import strategies as st

import agentloop as al
import agentloop.agents
import agentloop.model
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

SIDE_EFFECTS = ("pay", "asked")
MAX_DEPTH = 3
TOP = "top"


@attrs.frozen
class Node:
    """One agent: its rounds of calls (kind, child node when the kind is ``child``)."""

    rounds: tuple[tuple[tuple[str, Node | None], ...], ...]


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0) -> Node:
    kinds = ["pay", "asked", "read"] + (["child"] if depth < MAX_DEPTH else [])
    rounds = []
    for _ in range(draw(st.integers(1, 2 if depth < 2 else 1))):
        calls = []
        for _ in range(draw(st.integers(1, 3 if depth < 2 else 2))):
            kind = draw(st.sampled_from(kinds))
            calls.append((kind, draw(nodes(depth + 1)) if kind == "child" else None))
        rounds.append(tuple(calls))
    return Node(tuple(rounds))


@attrs.define
class World:
    """What outlives a process: the side effects, the host's decisions, the child runs."""

    approve: Callable[[str], bool]
    runs: Counter[str] = attrs.Factory(Counter)
    names: dict[str, str] = attrs.Factory(dict)
    decided: dict[str, bool] = attrs.Factory(dict)
    child_runs: list[al.agents.ChildRun] = attrs.Factory(list)
    on_run: Callable[[str], Any] | None = None
    """Called with the call id as each side effect runs (the SIGKILL runner writes it)."""

    def decide(self, call_id: str) -> bool:
        if call_id not in self.decided:
            self.decided[call_id] = self.approve(call_id)
        return self.decided[call_id]


class SideEffect:
    def __init__(self, name: str, world: World) -> None:
        self.spec = al.ToolSpec(
            name,
            f"The {name} step.",
            {"type": "object"},
            annotations=al.ToolAnnotations(idempotent=name == "read"),
        )
        self.world = world

    def proposed_requests(self, request: al.ToolRequest) -> list[Any]:
        if self.spec.name == "asked":
            return [al.permissions.FileSystemWrite(f"/ledger/{request.call_id}")]
        return []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.world.runs[request.call_id] += 1
        self.world.names[request.call_id] = self.spec.name
        if self.world.on_run is not None:
            self.world.on_run(request.call_id)
        return f"{request.call_id} done"


class AskBeforeWrites:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.write":
            return al.permissions.AskApproval("write", request.summary)
        return al.permissions.Allow()


def tool_name(kind: str, round_index: int, index: int) -> str:
    return f"child_{round_index}_{index}" if kind == "child" else kind


def script(node: Node, path: str) -> Callable[[al.model.TurnRequest], Any]:
    """The node's model, decided from the request: its rounds, then ``done``."""

    def reply(request: al.model.TurnRequest) -> Any:
        done = sum(1 for item in request.transcript if any(item.tool_calls()))
        if done >= len(node.rounds):
            return "done"
        return tool_calls(*(
            call(tool_name(kind, done, n), {"input": "go"} if kind == "child" else {},
                 id=f"{path}-{done}-{n}")
            for n, (kind, _child) in enumerate(node.rounds[done])
        ))  # fmt: skip

    return reply


def build(
    node: Node,
    world: World,
    manager: Any,
    store: Any = None,
    path: str = TOP,
    children_store: Any = None,
) -> al.Agent:
    """The agent of ``node`` (``store``: its store; ``children_store``: its children's)."""
    registry = al.ToolRegistry()
    for name in ("pay", "asked", "read"):
        registry = registry.with_tool(SideEffect(name, world))
    for r, calls in enumerate(node.rounds):
        for n, (kind, child) in enumerate(calls):
            if child is not None:
                where = f"{path}-{r}-{n}"
                agent = build(child, world, manager, children_store, where, children_store)
                name = tool_name(kind, r, n)
                registry = registry.with_tool(
                    agent.as_tool(name, "A child.", on_run=world.child_runs.append)
                )
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(script(node, path)))
        .add_tool_source(registry)
        .permissions(AskBeforeWrites())
        .task_manager(manager)
    )
    if store is not None:
        builder = builder.store(store)
    if path == TOP:
        builder = builder.input([al.Item.text(al.ItemKind.USER, "go")])
    return builder.build()


async def run_process(
    node: Node,
    world: World,
    store: Any,
    session_id: str,
    manager: Any,
    *,
    children_stored: bool = False,
) -> tuple[al.Item, ...]:
    """One process: start or resume the session and drive it to its end, answering each
    approval (a child's too) as the world decides; returns the top transcript.
    ``children_stored``: the child agents save to the store too (sessions
    ``<parent session>/<call id>``), as agents made by one builder would."""
    agent = build(node, world, manager, store, TOP, store if children_stored else None)
    if await store.load(session_id) is None:
        driver = await agent.start(session_id)
    else:
        driver = await agent.resume(session_id=session_id)
    for _ in range(500):
        transcript = driver.snapshot().transcript
        if (
            driver.state is al.DriverState.IDLE
            and transcript[-1:]
            and transcript[-1].kind is al.ItemKind.ASSISTANT
        ):
            return transcript  # a process that died after the turn's last save
        step = await driver.next()
        if isinstance(step, al.ApprovalRequest):
            if world.decide(step.call_id):
                step.approve()
            else:
                step.deny("not this one")
        elif isinstance(step, al.Finished):
            return driver.snapshot().transcript
        elif not isinstance(step, al.AfterToolResult):
            raise AssertionError(f"unexpected step {step!r}")
    raise AssertionError(f"session {session_id} made no progress in 500 steps")


# -- the checks -----------------------------------------------------------------------------


def results(transcript: tuple[al.Item, ...]) -> dict[str, al.ToolResultPart]:
    return {
        part.call_id: part
        for item in transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    }


def in_doubt(result: al.ToolResultPart) -> bool:
    return al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT


def kind_of(transcript: tuple[al.Item, ...], call_id: str) -> str:
    for item in transcript:
        for part in item.tool_calls():
            if part.id == call_id:
                return part.name
    raise AssertionError(f"no call {call_id}")


def check_tree(top: tuple[al.Item, ...], world: World, where: str) -> None:
    """Every transcript valid with every call answered once; no side effect twice; a denied
    call never ran; a result that is not in doubt is the run's own; no idempotent call is
    in doubt."""
    transcripts = [top] + [run.transcript for run in world.child_runs if run.result is not None]
    for transcript in transcripts:
        al.testing.assert_transcript_valid(list(transcript))
        calls = [p.id for item in transcript for p in item.tool_calls()]
        assert sorted(calls) == sorted(results(transcript)), where
        for call_id, result in results(transcript).items():
            name = kind_of(transcript, call_id)
            if in_doubt(result):
                # The top's claimed calls, and a child's calls that ran beside the approval
                # or question it asked up (restored as started): never an idempotent one.
                assert name != "read", f"{where}: {call_id}"
                assert world.runs[call_id] <= 1, f"{where}: {call_id}"
                continue
            if name in SIDE_EFFECTS and not result.is_error:
                assert result.output == f"{call_id} done", where
                assert world.runs[call_id] == 1, (
                    f"{where}: {call_id} has its result, ran {world.runs[call_id]} times"
                )
    for call_id, count in world.runs.items():
        name = world.names[call_id]
        if name != "read":
            assert count == 1, f"{where}: {call_id} ran {count} times"
        if name == "asked":
            assert world.decided.get(call_id) is True, f"{where}: {call_id} ran unapproved"


def shape(transcript: tuple[al.Item, ...]) -> list[Any]:
    """The transcript with each run of results as the set of its call ids."""
    found: list[Any] = []
    for item in transcript:
        if item.kind is al.ItemKind.TOOL:
            ids = {part.call_id for part in item.parts if isinstance(part, al.ToolResultPart)}
            if found and isinstance(found[-1], frozenset):
                ids |= found.pop()
            found.append(frozenset(ids))
        else:
            found.append((item.kind, item.text_content, tuple(p.id for p in item.tool_calls())))
    return found
