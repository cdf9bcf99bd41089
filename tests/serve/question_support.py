"""A tool that asks a form-mode question (resumable), an agent with it, and parking a
session on that question in a store: what the inbox's question tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import agentloop as al
import agentloop.host
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import SessionStore
from agentloop.testing import call, tool_calls

SEAT = {
    "type": "object",
    "properties": {
        "seat": {"type": "string", "title": "Seat", "description": "like 12C"},
        "row": {"type": "integer", "title": "Row", "minimum": 1},
        "window": {"type": "boolean", "title": "Window"},
        "meal": {"type": "string", "title": "Meal", "enum": ["veg", "fish"]},
    },
    "required": ["seat", "row"],
}


class Book:
    """Asks for a seat (resume data: it can go on from an answer after a restart)."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if ctx.resumed is not None:
            answer = ctx.resumed.answer
        else:
            question = al.tools.Question(
                "mcp.elicitation", "Which seat?", SEAT, {"mode": "form"}, resume={"hold": 7}
            )
            answer = await ctx.ask(question)
        if not answer.accepted:
            return f"not booked ({answer.action.value})"
        return "booked " + ", ".join(f"{k}={v}" for k, v in sorted(answer.content.items()))


def asking_agent(store: SessionStore, manager: al.tasks.AsyncTaskManager) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(_reply))
        .add_tool_source(al.ToolRegistry().with_tool(Book()))
        .task_manager(manager)
        .store(store)
        .build()
    )


def _reply(request: Any) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        return "done: " + str(last.parts[0].output)
    return tool_calls(call("book", {}, id="call-1"))


@asynccontextmanager
async def asking(store: SessionStore) -> AsyncIterator[al.Agent]:
    """The asking agent, with its task manager open."""
    async with al.tasks.AsyncTaskManager() as manager:
        yield asking_agent(store, manager)


async def park_question(store: SessionStore, session_id: str) -> None:
    """Start ``session_id`` and drive it (as a worker) until it rests on the question."""
    async with asking(store) as agent:
        driver = await agent.start(session_id)
        driver.submit_input("book me a seat")
        await driver.save()
        worker = al.host.SessionWorker(store=store, agent=agent, owner="w0", ttl=30)
        advanced = await worker.advance(session_id)
        assert isinstance(advanced.step, al.CallQuestion)


async def resume(store: SessionStore, session_id: str) -> al.host.AdvancedSession:
    """Advance ``session_id`` as an external worker does (answers from the store)."""
    async with asking(store) as agent:
        worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
        return await worker.advance(session_id)


class Ask:
    """Asks ``question`` (with resume data) and answers with the answer it got."""

    asks_host = True

    def __init__(self, question: al.tools.Question) -> None:
        self.spec = al.ToolSpec("ask", "Ask the user.", {"type": "object"})
        self.question = question

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        answer = ctx.resumed.answer if ctx.resumed else await ctx.ask(self.question)
        return f"{answer.action.value}: {answer.content}"


async def park_on(store: SessionStore, session_id: str, question: al.tools.Question) -> None:
    """Park ``session_id`` on ``question`` (asked by an ``Ask`` tool)."""
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("ask", {}, id="call-1"))]))
            .add_tool_source(al.ToolRegistry().with_tool(Ask(question)))
            .task_manager(manager)
            .store(store)
            .build()
        )
        driver = await agent.start(session_id)
        driver.submit_input("go")
        assert isinstance(await driver.next(), al.CallQuestion)
