"""An agentloop agent as an A2A server, in its own process (for tests/a2a).

Usage: python a2a_server.py SESSIONS_DB TASKS_DB PORT TOKEN
Sessions live in a SQLite session store, A2A task records in a2a-sdk's
DatabaseTaskStore (SQLite): both survive a restart of this process. The
scripted model asks for ``deploy NAME`` (which needs approval) or ``book``
(a tool that asks the host for a seat: a ``CallQuestion`` it can go on from
after a restart) and reports the tool's result; anything else it answers
with text.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvicorn
from a2a.server.tasks.database_task_store import DatabaseTaskStore
from sqlalchemy.ext.asyncio import create_async_engine

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.a2a import A2AConfig, create_a2a_app
from agentloop.store import SqliteSessionStore
from agentloop.testing import call, chunked, tool_calls

SCHEMA = {
    "type": "object",
    "properties": {"service": {"type": "string", "minLength": 1}},
    "required": ["service"],
    "additionalProperties": False,
}


class Deploy:
    spec = al.ToolSpec("deploy", "Deploy a service.", SCHEMA)

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"deployed {request.input['service']}"


SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string", "minLength": 2}, "row": {"type": "integer"}},
    "required": ["seat"],
    "additionalProperties": False,
}


class Book:
    """Asks for a seat, with resume data: it goes on from an answer in a later request."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if ctx.resumed is not None:
            answer = ctx.resumed.answer
        else:
            question = al.tools.Question(
                "mcp.elicitation", "Which seat?", SEAT, {"mode": "form"}, resume={"n": 1}
            )
            answer = await ctx.ask(question)
        return f"booked {answer.content['seat']}" if answer.accepted else answer.action.value


class AskFirst:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if "book" in request.summary:
            return al.permissions.Allow()
        return al.permissions.AskApproval("deploys need a person", request.summary)


def answer(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        [result] = last.tool_results()
        return chunked("Result: ", str(result.output))
    words = last.text_content.split()
    if words[:1] == ["deploy"]:
        return tool_calls(call("deploy", {"service": words[1]}, id="call-1"))
    if words[:1] == ["book"]:
        return tool_calls(call("book", {}, id="call-1"))
    return chunked("Hello", " there.")


async def main(sessions: str, tasks: str, port: int, token: str) -> None:
    async with SqliteSessionStore(sessions) as store, al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(answer))
            .add_tool_source(al.ToolRegistry().with_tool(Deploy()).with_tool(Book()))
            .permissions(AskFirst())
            .task_manager(manager)
            .store(store)
            .build()
        )
        engine = create_async_engine(f"sqlite+aiosqlite:///{tasks}")
        config = A2AConfig(url=f"http://127.0.0.1:{port}/", token=token, identity="bob")
        app = create_a2a_app(agent, config=config, task_store=DatabaseTaskStore(engine))
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        await server.serve()
        await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
