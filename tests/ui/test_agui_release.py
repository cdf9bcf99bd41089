"""A run resting on a running call's question drops its driver with ``release()``: the
asking call's task ends (cancelled, nothing recorded) instead of waiting forever in the
app's task manager, and the next run, resumed from the store, answers the question and
finishes. In process (httpx's ASGI transport), on both anyio backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from agui_support import TOKEN, post_run, resume, run_input

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.testing import call, tool_calls
from agentloop.ui import AguiConfig, create_agui_app

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
        question = al.tools.Question("seat", "Which seat?", SEAT, resume={"n": 1})
        try:
            answer = await ctx.ask(question)
        except anyio.get_cancelled_exc_class():
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return f"booked {answer.content}"


def reply(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        return "noted: " + str(last.parts[0].output)
    return tool_calls(call("book", {}, id="call-1"))


@asynccontextmanager
async def serving(
    store: MemorySessionStore, book: Book
) -> AsyncIterator[tuple[httpx.AsyncClient, al.tasks.AsyncTaskManager]]:
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(reply))
            .add_tool_source(al.ToolRegistry().with_tool(book))
            .task_manager(manager)
            .store(store)
            .build()
        )
        app = create_agui_app(agent, config=AguiConfig(token=TOKEN))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, manager


async def test_question_runs_leave_no_task_running_and_resume_answers() -> None:
    store, book = MemorySessionStore(), Book()
    async with serving(store, book) as (client, manager):
        handle = manager.handle()
        for n in range(3):
            events = await post_run(client, run_input(f"t{n}", "r1", "book a seat"))
            assert events[-1]["outcome"]["interrupts"][0]["id"] == "question:call-1:1"
        assert await handle.list_running() == []
        assert book.ended == ["cancelled", "cancelled", "cancelled"]
        for n in range(3):
            stored = await store.load(f"t{n}")
            assert stored is not None
            assert stored.status is SessionStatus.AWAITING_ANSWER
        answer = resume(("question:call-1:1", "resolved", {"seat": "4C"}))
        events = await post_run(client, run_input("t1", "r2", resume=answer))
        assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"}
        assert book.ended[3:] == ["resumed"]
        stored = await store.load("t1")
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_INPUT
        outputs = [
            part["output"]
            for item in stored.checkpoint["transcript"]
            for part in item["parts"]
            if part["type"] == "tool_result"
        ]
        assert outputs == ["booked 4C"]
        assert await handle.list_running() == []
