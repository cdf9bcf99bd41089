"""A running call's question (``CallQuestion``) has no AG-UI form yet: the run ends in
RUN_ERROR ``question_unsupported`` naming the call, and the thread stays usable. In
process (httpx's ASGI transport), on both anyio backends."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agui_support import TOKEN, assert_conformant, post_run, run_input, types

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore
from agentloop.testing import call, tool_calls
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio


class Confirm:
    spec = al.ToolSpec("confirm", "Ask the user to confirm.", {"type": "object"})
    asks_host = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        answer = await ctx.ask(al.tools.Question("confirm", "Really?"))
        return answer.action.value


def answer(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL or last.text_content == "go on":
        return "noted"
    return tool_calls(call("confirm", {}, id="call-1"))


async def test_a_question_ends_the_run_with_a_clear_error() -> None:
    store = MemorySessionStore()
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(answer))
            .add_tool_source(al.ToolRegistry().with_tool(Confirm()))
            .task_manager(manager)
            .store(store)
            .build()
        )
        app = create_agui_app(agent, config=AguiConfig(token=TOKEN))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            events = await post_run(client, run_input("t1", "r1", "confirm it"))
            assert types(events)[0] == "RUN_STARTED"
            assert types(events)[-1] == "RUN_ERROR"
            assert events[-1]["code"] == "question_unsupported"
            assert events[-1]["message"] == (
                "tool call call-1 (confirm) asked a question (confirm: Really?); AG-UI runs "
                "cannot answer questions of running calls yet (the session is saved; its next "
                "run answers the call as in doubt)"
            )
            assert_conformant(events)
            stored = await store.load("t1")
            assert stored is not None
            assert stored.checkpoint["state"] == "AWAITING_ANSWER"
            again = await post_run(client, run_input("t1", "r2", "go on"))
            assert types(again)[-1] == "RUN_FINISHED", again[-1]
            assert_conformant(again)
    stored = await store.load("t1")
    assert stored is not None
    results = [
        part
        for item in stored.checkpoint["transcript"]
        for part in item["parts"]
        if part["type"] == "tool_result"
    ]
    assert [(r["call_id"], r["metadata"].get("agentloop.outcome")) for r in results] == [
        ("call-1", "in_doubt")
    ]
