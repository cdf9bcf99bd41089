"""A ``SessionWorker`` whose drive rests on a running call's question releases the
driver: the asking call's task ends (nothing recorded) instead of waiting forever in the
agent's task manager, and the worker, after the answer is recorded, goes on from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
import agentloop.host
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SessionStatus, SqliteSessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

SEAT = {"type": "object", "properties": {"seat": {"type": "string"}}, "required": ["seat"]}


class Book:
    """Asks for a seat (with resume data); records how each of its runs ended."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if ctx.resumed is not None:
            self.ended.append("resumed")
            return f"booked {ctx.resumed.answer.content['seat']}"
        try:
            await ctx.ask(al.tools.Question("seat", "Which seat?", SEAT, resume={"n": 1}))
        except anyio.get_cancelled_exc_class():
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return "answered in the same process"


def reply(request: al.model.TurnRequest) -> Any:
    if request.transcript[-1].kind is al.ItemKind.TOOL:
        return "ok"
    return tool_calls(call("book", {}, id="a"))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_worker_releases_a_driver_resting_on_a_question(
    kind: str, tmp_path: Path
) -> None:
    book = Book()
    async with (
        (
            SqliteSessionStore(tmp_path / "s.db") if kind == "sqlite" else MemorySessionStore()
        ) as store,
        al.tasks.AsyncTaskManager() as manager,
    ):
        handle = manager.handle()
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(reply))
            .add_tool_source(al.ToolRegistry().with_tool(book))
            .task_manager(manager)
            .store(store)
            .build()
        )
        worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
        for n in range(3):
            driver = await agent.start(f"s{n}")
            driver.submit_input("book me a seat")
            await driver.save()
            advanced = await worker.advance(f"s{n}")
            assert isinstance(advanced.step, al.CallQuestion)
        assert await handle.list_running() == []
        assert book.ended == ["cancelled"] * 3
        await store.record_answer("s1", "question:a:1", action="accept", content={"seat": "9F"})
        advanced = await worker.advance("s1")
        assert isinstance(advanced.step, al.Finished)
        assert book.ended[3:] == ["resumed"]
        stored = await store.load("s1")
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_INPUT
        outputs = [
            part["output"]
            for item in stored.checkpoint["transcript"]
            for part in item["parts"]
            if part["type"] == "tool_result"
        ]
        assert outputs == ["booked 9F"]
        assert await handle.list_running() == []
