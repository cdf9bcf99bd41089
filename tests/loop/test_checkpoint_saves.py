"""A store-bound driver's saves: every one loads back as ``driver.checkpoint()``, and the
values that did not change since the last save keep their documents (O(new values)).

Drives real ``LoopDriver``s through the public API on the memory and SQLite stores,
on both anyio backends: tool rounds, a compaction inside the turn that drops the turn's
first round from the transcript (the turn's items are no longer its tail), a turn that
ends, and a second turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import pytest
from loop_support import EchoTool, user

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.store import MemorySessionStore, SessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

ROUNDS = 4


def three_rounds_then_answer(request: al.model.TurnRequest) -> Any:
    """Calls echo until this turn has ``ROUNDS`` results, then answers."""
    turn_results = 0
    for item in reversed(request.transcript):
        if item.kind is al.ItemKind.USER:
            break
        turn_results += item.kind is al.ItemKind.TOOL
    if turn_results < ROUNDS:
        return tool_calls(
            call("echo", {"value": f"v{turn_results}"}, id=f"c{len(request.transcript)}")
        )
    return "done"


class DropFirstRound:
    """After the second result of a turn, drops the turn's first call and its result."""

    name = "drop-first-round"

    def __init__(self) -> None:
        self.dropped = 0

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        items = list(cursor.items)
        if ctx.point != "after_tool_result" or self.dropped:
            return
        results = [i for i, item in enumerate(items) if item.kind is al.ItemKind.TOOL]
        if len(results) >= 2:
            first = results[0]
            del cursor[first - 1 : first + 1]  # the call and its result
            self.dropped += 1


class Recording(MemorySessionStore):
    """Keeps every document it is handed (to look at the objects, not only the values)."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[Mapping[str, Any]] = []

    async def save_checkpoint(
        self, session_id: str, checkpoint: Mapping[str, Any], **options: Any
    ) -> int:
        self.saved.append(checkpoint)
        return await super().save_checkpoint(session_id, checkpoint, **options)


def make_agent(store: SessionStore, mutator: DropFirstRound) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(three_rounds_then_answer))
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(al.permissions.AllowAll())
        .mutator(mutator)
        .store(store)
        .build()
    )


async def test_every_save_loads_back_as_the_drivers_checkpoint(store: SessionStore) -> None:
    mutator = DropFirstRound()
    driver = await make_agent(store, mutator).start("s")
    steps = []
    for text in ("first", "second"):
        driver.submit_input([user(text)])
        while True:
            step = await driver.next()
            steps.append(type(step).__name__)
            loaded = await store.load("s")
            assert loaded is not None
            assert loaded.checkpoint == driver.checkpoint()
            if isinstance(step, al.Finished):
                break
    assert mutator.dropped == 1
    # The first turn asks for the dropped round's result again: one more round.
    first, second = (
        [*["AfterToolResult"] * (ROUNDS + 1), "Finished"],
        [
            *["AfterToolResult"] * ROUNDS,
            "Finished",
        ],
    )
    assert steps == first + second
    finished = driver.checkpoint()
    resumed = await make_agent(store, DropFirstRound()).resume(session_id="s")
    assert resumed.checkpoint() == finished


async def test_unchanged_values_keep_their_documents_between_saves() -> None:
    store = Recording()
    mutator = DropFirstRound()
    driver = await make_agent(store, mutator).start("s")
    driver.submit_input([user("go")])
    while not isinstance(await driver.next(), al.Finished):
        pass
    assert mutator.dropped == 1
    saved = store.saved
    assert len(saved) >= 2 * ROUNDS
    for before, after in pairwise(saved):
        assert after["config"] is before["config"]
        # An item kept (even moved by the compaction) keeps its document.
        for item in after["transcript"]:
            equal = [other for other in before["transcript"] if other == item]
            assert all(other is item for other in equal)
        turn_before, turn_after = before["turn"], after["turn"]
        if turn_before is None or turn_after is None:
            continue
        for name in ("items", "tool_calls", "model_calls_made"):  # append-only in a turn
            old, new = turn_before[name], turn_after[name]
            assert all(a is b for a, b in zip(old, new[: len(old)], strict=True))
        # The turn's items still in the transcript are the transcript's documents.
        for item in turn_after["items"]:
            equal = [other for other in after["transcript"] if other == item]
            assert all(other is item for other in equal)
    # driver.checkpoint() converts afresh: it shares nothing with what was saved.
    fresh = driver.checkpoint()
    assert fresh == saved[-1]
    assert not any(
        a is b for a, b in zip(fresh["transcript"], saved[-1]["transcript"], strict=True)
    )
    assert fresh["config"] is not saved[-1]["config"]
