"""The layers a driver is made with change no outcome.

A driver gets its step loop (with a store's saves or without), its model and
tool I/O (with observers or without) and its cancel scopes (with a
cancellation handle or a request deadline, or neither) once, when it is made.
Every combination runs the same session to the same steps, transcript and
events.
"""

from __future__ import annotations

import itertools

import pytest
from loop_support import ApproveFsReads, EchoTool, Recorder, tool_texts, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.store
import agentloop.testing
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

LAYERS = [(a, b, c, d) for a, b, c, d in itertools.product([False, True], repeat=4)]
"""(store, observers, cancellation handle, request deadline)."""


def layer_id(layers: tuple[bool, bool, bool, bool]) -> str:
    names = ("store", "observers", "cancellation", "deadline")
    return "+".join(name for name, on in zip(names, layers, strict=True) if on) or "plain"


def model() -> al.testing.ScriptedModel:
    def answer(request: al.model.TurnRequest) -> Reply | str:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.TOOL:
            return f"done after {len(request.transcript)} items"
        if last.text_content == "again":
            return tool_calls(call("echo", {"value": "c"}, id="call-3"))
        return tool_calls(
            call("echo", {"value": "a"}, id="call-1"), call("echo", {"value": "b"}, id="call-2")
        )

    return al.testing.ScriptedModel(answer)


async def drive(
    layers: tuple[bool, bool, bool, bool], store: al.store.MemorySessionStore
) -> tuple[list[str], al.LoopDriver, Recorder]:
    """Run the session: two turns, three approvals; returns the step kinds."""
    durable, observed, cancellable, deadline = layers
    recorder = Recorder()
    builder = (
        al.Agent.builder()
        .model(model())
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
        .input([user("go")])
    )
    if durable:
        builder = builder.store(store)
    if observed:
        builder = builder.observer(recorder)
    if cancellable:
        builder = builder.cancellation(al.CancellationController().handle())
    limits = al.LoopLimits(request_timeout=30.0 if deadline else None)
    driver = await builder.build().start(al.SessionConfig("s", limits=limits))
    steps: list[str] = []
    for _ in range(12):
        step = await driver.next()
        steps.append(type(step).__name__)
        if isinstance(step, al.ApprovalRequest):
            step.approve()
        elif isinstance(step, al.Finished) and steps.count("Finished") == 1:
            driver.submit_input("again")
        elif not isinstance(step, al.AfterToolResult):
            break
    return steps, driver, recorder


@pytest.mark.parametrize("layers", LAYERS, ids=[layer_id(layers) for layers in LAYERS])
async def test_every_combination_of_layers_runs_the_same_session(
    layers: tuple[bool, bool, bool, bool],
) -> None:
    store = al.store.MemorySessionStore()
    steps, driver, recorder = await drive(layers, store)
    assert steps == [
        "ApprovalRequest",
        "ApprovalRequest",
        "Finished",
        "ApprovalRequest",
        "Finished",
    ]
    transcript = driver.snapshot().transcript
    assert [item.kind.value for item in transcript] == [
        "user", "assistant", "tool", "tool", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert tool_texts(transcript) == [("call-1", "a", False), ("call-2", "b", False),
                                      ("call-3", "c", False)]  # fmt: skip
    assert [transcript[4].text_content, transcript[8].text_content] == [
        "done after 4 items",
        "done after 8 items",
    ]
    durable, observed, _, _ = layers
    events = [type(event).__name__ for event in recorder.events]
    assert events == (EVENTS if observed else [])
    assert [
        (event.turn_id, event.index, event.transcript_items, event.tools, event.tools_withheld)
        for event in recorder.of(al.observe.ModelCallStarted)
    ] == (
        [("turn-1", 1, 1, 1, False), ("turn-1", 2, 4, 1, False),
         ("turn-2", 1, 6, 1, False), ("turn-2", 2, 8, 1, False)]
        if observed
        else []
    )  # fmt: skip
    stored = await store.load("s")
    if durable:
        assert stored is not None
        assert stored.checkpoint == driver.checkpoint()
        assert stored.version == SAVES
    else:
        assert stored is None


EVENTS = [
    "RunStarted",
    "TurnStarted",
    "ModelCallStarted",
    "ToolCallRequested",
    "ToolCallRequested",
    "ModelCallFinished",
    "ApprovalRequested",
    "ApprovalRequested",
    "ApprovalAnswered",
    "ToolExecutionStarted",
    "ApprovalAnswered",
    "ToolExecutionStarted",
    "ToolExecutionFinished",
    "ToolResultReceived",
    "ToolExecutionFinished",
    "ToolResultReceived",
    "ModelCallStarted",
    "ContentDelta",
    "ContentDelta",
    "ContentDelta",
    "ModelCallFinished",
    "TurnFinished",
    "AgentEnded",
    "InputAccepted",
    "TurnStarted",
    "ModelCallStarted",
    "ToolCallRequested",
    "ModelCallFinished",
    "ApprovalRequested",
    "ApprovalAnswered",
    "ToolExecutionStarted",
    "ToolExecutionFinished",
    "ToolResultReceived",
    "ModelCallStarted",
    "ContentDelta",
    "ContentDelta",
    "ContentDelta",
    "ModelCallFinished",
    "TurnFinished",
    "AgentEnded",
]
"""What an observer sees (the same as before the layers were chosen once)."""

SAVES = 11
"""How many saves the session makes with a store (each step, each response, ...)."""
