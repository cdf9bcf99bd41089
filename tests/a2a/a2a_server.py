"""An agentloop agent as an A2A server, in its own process (for tests/a2a).

Usage: python a2a_server.py SESSIONS_DB TASKS_DB PORT TOKEN
Sessions live in a SQLite session store, A2A task records in a2a-sdk's
DatabaseTaskStore (SQLite): both survive a restart of this process. The
scripted model asks for ``deploy NAME`` (which needs approval) and reports
the tool's result; anything else it answers with text.
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


class AskFirst:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("deploys need a person", request.summary)


def answer(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        [result] = last.tool_results()
        return chunked("Result: ", str(result.output))
    words = last.text_content.split()
    if words[:1] == ["deploy"]:
        return tool_calls(call("deploy", {"service": words[1]}, id="call-1"))
    return chunked("Hello", " there.")


async def main(sessions: str, tasks: str, port: int, token: str) -> None:
    async with SqliteSessionStore(sessions) as store:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(answer))
            .add_tool_source(al.ToolRegistry().with_tool(Deploy()))
            .permissions(AskFirst())
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
