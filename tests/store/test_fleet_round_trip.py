"""Round trips of what a fleet's host writes and reads: queued input and the inbox's calls.

Any user input ``enqueue_input`` queues is what a driver resumed from the
store finds queued (equal, item for item); any JSON input of a call awaiting
approval is what the inbox row shows, with its digest. On a memory store and
SQLite.
"""

import uuid
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.testing
from agentloop.store import (
    MemorySessionStore,
    PendingCall,
    RedisSessionStore,
    SessionStore,
    SqliteSessionStore,
    enqueue_input,
    input_digest,
)
from agentloop.testing import items, json_values
from agentloop.testing.store_conformance import sample_checkpoint

USER_INPUT = st.lists(items(kinds=[al.ItemKind.USER], tool_parts=False), min_size=1, max_size=3)


async def input_round_trip(store: SessionStore, queued: list[al.Item]) -> None:
    agent = al.Agent.builder().model(al.testing.ScriptedModel(["ok"])).store(store).build()
    await (await agent.start("s1")).save()
    await enqueue_input(store, "s1", queued)
    driver = await agent.resume(session_id="s1")
    assert driver.snapshot().pending_input == tuple(queued)
    await store.delete("s1")


async def inbox_round_trip(store: SessionStore, tool_input: Any) -> None:
    call = {"id": "c1", "name": "tool", "input": tool_input}
    document = sample_checkpoint(
        "s2",
        [al.Item.text(al.ItemKind.USER, "go")],
        state="AWAITING_APPROVAL",
        turn={"round": {"calls": [{"index": 0, "call": call, "status": "awaiting_approval"}]}},
    )
    await store.save_checkpoint("s2", document)
    [row] = await store.sessions_awaiting_approval()
    expected = PendingCall(
        call_id="c1",
        tool_name="tool",
        input=tool_input,
        input_digest=input_digest("tool", tool_input),
    )
    assert row.undecided_calls == (expected,)
    await store.delete("s2")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(queued=USER_INPUT, tool_input=json_values())
def test_queued_input_and_inbox_calls_round_trip(
    tmp_path: Path, redis_server: str, queued: list[al.Item], tool_input: Any
) -> None:
    async def both() -> None:
        memory = MemorySessionStore()
        await input_round_trip(memory, queued)
        await inbox_round_trip(memory, tool_input)
        async with SqliteSessionStore(tmp_path / "fleet.db") as sqlite:
            await input_round_trip(sqlite, queued)
            await inbox_round_trip(sqlite, tool_input)
        async with RedisSessionStore(redis_server, prefix=f"{uuid.uuid4().hex}:") as redis:
            await input_round_trip(redis, queued)
            await inbox_round_trip(redis, tool_input)

    anyio.run(both)
