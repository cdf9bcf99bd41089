"""Turn a recorded session into a regression test (docs/testing.md)."""

from typing import Any

import anyio
import pytest

import agentloop as al
import agentloop.store
import agentloop.tools
from agentloop.testing import ReplayDriftError, ScriptedModel, call, tool_calls


class Price:
    spec = al.ToolSpec("price", "Price of an item", {"properties": {"item": {"type": "string"}}})

    def __init__(self, prices: dict[str, str]) -> None:
        self.prices = prices

    async def invoke(self, request: al.ToolRequest, ctx: Any) -> str:
        return self.prices.get(request.input.get("item", ""), "unknown")


async def run_agent(model: al.ModelAdapter, prices: dict[str, str], store: Any = None) -> None:
    builder = (
        al.Agent.builder().model(model).add_tool_source(al.ToolRegistry().with_tool(Price(prices)))
    )
    if store is not None:
        builder = builder.store(store)
    driver = await builder.build().start("checkout")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "How much is tea?")])
    while not isinstance(await driver.next(), al.Finished):
        pass


async def record(store: al.store.SessionStore) -> None:
    """Run once against a real (here: scripted) model with a store: the session is recorded."""
    model = ScriptedModel([tool_calls(call("price", {"item": "tea"})), "Tea costs 3."])
    await run_agent(model, {"tea": "3"}, store)


async def test_the_recorded_session_still_replays() -> None:
    store = al.store.MemorySessionStore()
    await record(store)
    replay = await ScriptedModel.from_session(store, "checkout")
    await run_agent(replay, {"tea": "3"})  # same requests: the recorded replies
    replay.assert_complete()


async def test_a_changed_tool_is_a_drift_with_a_diff() -> None:
    store = al.store.MemorySessionStore()
    await record(store)
    replay = await ScriptedModel.from_session(store, "checkout")
    with pytest.raises(ReplayDriftError, match="diff against the recorded request") as drift:
        await run_agent(replay, {"tea": "4"})
    lines = str(drift.value).splitlines()
    assert [line[:4] for line in lines if line[:2] in ("-[", "+[")] == ["-[2]", "+[2]"]
    assert '"output": "3"' in lines[-2]  # the recorded tool result...
    assert '"output": "4"' in lines[-1]  # ...and what the agent sent instead


if __name__ == "__main__":
    anyio.run(test_the_recorded_session_still_replays)
    anyio.run(test_a_changed_tool_is_a_drift_with_a_diff, backend="trio")
    print("replay: the recording replays; a drift shows the diff")
