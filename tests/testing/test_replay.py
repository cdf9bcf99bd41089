"""Record and replay: ScriptedModel.from_session turns a stored session into a regression test."""

from __future__ import annotations

from typing import Any, ClassVar

import anyio
import hypothesis
import pytest
from hypothesis import HealthCheck

import agentloop as al
import agentloop.model
import agentloop.store
import agentloop.tools
from agentloop.testing import (
    AgentStateMachine,
    ReplayDriftError,
    ReplayScript,
    ScriptedModel,
    call,
    request_digest,
    tool_calls,
)


class Lookup:
    """A tool whose answer can change between the recording and the replay."""

    spec = al.ToolSpec(
        "lookup",
        "Look a key up",
        {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    )

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        return self.table.get(request.input["key"], "missing")


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


async def run(model: al.ModelAdapter, table: dict[str, str], store: Any = None) -> al.LoopDriver:
    builder = (
        al.Agent.builder().model(model).add_tool_source(al.ToolRegistry().with_tool(Lookup(table)))
    )
    if store is not None:
        builder = builder.store(store)
    driver = await builder.input([user("what is a?")]).build().start("recorded")
    while not isinstance(await driver.next(), al.Finished):
        pass
    return driver


async def record(store: al.store.SessionStore) -> list[al.Item]:
    script = [tool_calls(call("lookup", {"key": "a"}), text="checking"), "a is 1"]
    driver = await run(ScriptedModel(script), {"a": "1"}, store)
    return list(driver.snapshot().transcript)


def stable(items: list[al.Item]) -> list[al.Item]:
    return [al.Item(i.kind, i.parts, metadata=i.metadata) for i in items]


async def test_a_recorded_session_replays_to_the_same_transcript(anyio_backend: str) -> None:
    store = al.store.MemorySessionStore()
    recorded = await record(store)
    model = await ScriptedModel.from_session(store, "recorded")
    assert model.replay is not None
    assert len(model.replay.turns) == 2
    driver = await run(model, {"a": "1"})
    assert stable(list(driver.snapshot().transcript)) == stable(recorded)
    model.assert_complete()
    assert model.replay.used == 2


async def test_a_changed_tool_output_is_a_drift_with_a_diff(anyio_backend: str) -> None:
    store = al.store.MemorySessionStore()
    await record(store)
    model = await ScriptedModel.from_session(store, "recorded")
    with pytest.raises(ReplayDriftError) as raised:
        await run(model, {"a": "2"})  # the tool now answers differently
    message = str(raised.value)
    assert message.startswith(
        "replay drift in session 'recorded': the agent sent a request the recording does not "
        "have; diff against the recorded request due next (3 item(s)):\n"
        "--- recorded request\n+++ replayed request\n"
    )
    removed = [line for line in message.splitlines() if line.startswith("-[")]
    added = [line for line in message.splitlines() if line.startswith("+[")]
    assert len(removed) == len(added) == 1
    assert removed[0].startswith("-[2] ")
    assert added[0].startswith("+[2] ")
    assert '"output": "1"' in removed[0]
    assert '"output": "2"' in added[0]
    assert raised.value.expected is not None
    assert len(raised.value.expected) == 3
    assert len(raised.value.found) == 3


async def test_an_unrecorded_session_and_an_unused_recording_are_reported(
    anyio_backend: str,
) -> None:
    store = al.store.MemorySessionStore()
    with pytest.raises(LookupError, match="cannot replay session 'nope'"):
        await ScriptedModel.from_session(store, "nope")
    await record(store)
    model = await ScriptedModel.from_session(store, "recorded")
    with pytest.raises(AssertionError, match=r"2 of 2 recorded model call\(s\) were never made"):
        model.assert_complete()


def test_digests_ignore_timestamps_usage_and_ids_but_not_content() -> None:
    item = user("hi")
    stamped = al.Item(al.ItemKind.USER, item.parts, id="x", created_at=5.0, usage=al.Usage(1, 2))
    assert request_digest([item]) == request_digest([stamped])
    assert request_digest([item]) != request_digest([user("hi!")])
    assert request_digest([]) != request_digest([item])


def test_a_request_past_the_end_of_the_recording_says_so() -> None:
    transcript = [user("a"), al.Item.text(al.ItemKind.ASSISTANT, "b")]
    script = ReplayScript(transcript)
    later = al.model.TurnRequest("s", "t", [*transcript, user("c")])
    with pytest.raises(ReplayDriftError, match="goes past the end of the recording"):
        script(later)


# -- combined with AgentStateMachine ------------------------------------------------------

RECORDED = [
    user("what is a?"),
    al.Item(
        al.ItemKind.ASSISTANT,
        [al.TextPart("checking"), al.ToolCallPart("rec-1", "lookup", {"key": "a"})],
        finish_reason=al.FinishReason.TOOL_CALL,
    ),
    al.Item(al.ItemKind.TOOL, [al.ToolResultPart("rec-1", "1")]),
    al.Item.text(al.ItemKind.ASSISTANT, "a is 1"),
]


class ReplayingMachine(AgentStateMachine):
    """Starts from the recorded session's input: the recorded replies come first, then
    the machine explores with random replies and host actions from there."""

    replay: ClassVar[ReplayScript | None] = ReplayScript(RECORDED)
    probes: ClassVar[bool] = False

    def configure_agent(self, builder: al.AgentBuilder) -> al.AgentBuilder:
        tools = al.ToolRegistry().with_tool(Lookup({"a": "1"}))
        return builder.add_tool_source(tools).input([user("what is a?")])


def test_agent_state_machine_plays_a_recording_then_explores(anyio_backend: str) -> None:
    script = ReplayScript(RECORDED)
    machine = type("Replaying", (ReplayingMachine,), {"replay": script, "backend": anyio_backend})
    settings = hypothesis.settings(
        max_examples=10,
        stateful_step_count=6,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.run(settings=settings, seed=7)
    # A run whose first host action lets the recorded input through gets the recorded
    # reply; submitted input or an interjection leaves the recording (random replies).
    assert script.used >= 1


def test_replay_needs_no_event_loop_of_its_own() -> None:
    async def main() -> None:
        store = al.store.MemorySessionStore()
        await record(store)
        model = await ScriptedModel.from_session(store, "recorded")
        await run(model, {"a": "1"})
        model.assert_complete()

    anyio.run(main)
