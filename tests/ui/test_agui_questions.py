"""A running call's question (``CallQuestion``) over AG-UI: the run ends in RUN_FINISHED
with an ``input_required`` interrupt whose ``responseSchema`` is the question's schema; a
run with ``resume`` answers it (checked first: a bad payload is RUN_ERROR and nothing
changes) and the call goes on from the answer. In process (httpx's ASGI transport), on
both anyio backends, each stream checked by ag-ui-validate."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from agui_support import (
    TOKEN,
    assert_conformant,
    hypercorn_serving,
    post_run,
    resume,
    run_input,
    types,
)

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.testing import call, tool_calls
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string"}, "row": {"type": "integer", "minimum": 1}},
    "required": ["seat"],
    "additionalProperties": False,
}


class Book:
    """Asks for a seat, with resume data: it goes on from an answer in a later run."""

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


class Confirm:
    """Asks without resume data: its question cannot be answered in a later run."""

    spec = al.ToolSpec("confirm", "Ask the user to confirm.", {"type": "object"})
    asks_host = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        answer = await ctx.ask(al.tools.Question("confirm", "Really?"))
        return answer.action.value


def reply(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        return "noted: " + str(last.parts[0].output)
    if last.text_content == "confirm it":
        return tool_calls(call("confirm", {}, id="call-1"))
    return tool_calls(call("book", {}, id="call-1"))


@asynccontextmanager
async def thread_client(store: MemorySessionStore) -> AsyncIterator[httpx.AsyncClient]:
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(reply))
            .add_tool_source(al.ToolRegistry().with_tool(Book()).with_tool(Confirm()))
            .task_manager(manager)
            .store(store)
            .build()
        )
        app = create_agui_app(agent, config=AguiConfig(token=TOKEN))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


def tool_outputs(stored: Any) -> list[tuple[str, Any, Any]]:
    return [
        (part["call_id"], part["output"], part["metadata"].get("agentloop.outcome"))
        for item in stored.checkpoint["transcript"]
        for part in item["parts"]
        if part["type"] == "tool_result"
    ]


QUESTION = "question:call-1:1"


async def test_a_question_is_an_interrupt_and_resume_answers_it() -> None:
    store = MemorySessionStore()
    async with thread_client(store) as client:
        events = await post_run(client, run_input("t1", "r1", "book a seat"))
        assert types(events)[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
        assert events[-1]["outcome"] == {
            "type": "interrupt",
            "interrupts": [
                {
                    "id": QUESTION,
                    "reason": "input_required",
                    "message": "Which seat?",
                    "toolCallId": "call-1",
                    "responseSchema": SEAT,
                    "metadata": {
                        "agentloop": {
                            "toolName": "book",
                            "kind": "mcp.elicitation",
                            "data": {"mode": "form"},
                            "resumable": True,
                        }
                    },
                }
            ],
        }
        assert events[-2]["snapshot"]["agentloop"] == {
            "sessionId": "t1",
            "status": "awaiting_answer",
            "pendingInterrupts": [QUESTION],
        }
        assert_conformant(events)
        stored = await store.load("t1")
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_ANSWER
        answered = await post_run(
            client, run_input("t1", "r2", resume=resume((QUESTION, "resolved", {"seat": "2A"})))
        )
        assert types(answered)[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
        assert types(answered)[-1] == "RUN_FINISHED"
        assert "outcome" not in answered[-1] or answered[-1]["outcome"] is None
        assert_conformant(answered)
        again = await post_run(
            client, run_input("t1", "r3", resume=resume((QUESTION, "resolved", {"seat": "3B"})))
        )
        assert types(again)[-1] == "RUN_ERROR"
        assert again[-1]["code"] == "unknown_interrupt"
    stored = await store.load("t1")
    assert stored is not None
    assert tool_outputs(stored) == [("call-1", "booked 2A", None)]
    assert stored.checkpoint["transcript"][-1]["parts"][0]["text"] == "noted: booked 2A"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            (QUESTION, "resolved", {"row": 2}),
            "resume[0]: interrupt 'question:call-1:1': the content does not match the "
            "question's schema ((content): 'seat' is a required property); answer with "
            "content that matches question.schema, or decline(); nothing was recorded",
        ),
        (
            (QUESTION, "resolved", {"seat": "2A", "row": 0}),
            "resume[0]: interrupt 'question:call-1:1': the content does not match the "
            "question's schema (row: 0 is less than the minimum of 1); answer with content "
            "that matches question.schema, or decline(); nothing was recorded",
        ),
        (
            (QUESTION, "resolved", None),
            "resume[0]: interrupt 'question:call-1:1': the content does not match the "
            "question's schema ((content): None is not of type 'object'); answer with "
            "content that matches question.schema, or decline(); nothing was recorded",
        ),
        (
            (QUESTION, "cancelled", {"seat": "2A"}),
            "resume[0]: interrupt 'question:call-1:1': a cancelled entry carries no payload; "
            "nothing was recorded",
        ),
    ],
)
async def test_a_bad_answer_is_run_error_and_changes_nothing(
    entry: tuple[str, str, Any], message: str
) -> None:
    store = MemorySessionStore()
    async with thread_client(store) as client:
        await post_run(client, run_input("t1", "r1", "book a seat"))
        before = await store.load("t1")
        events = await post_run(client, run_input("t1", "r2", resume=resume(entry)))
        assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
        assert (events[-1]["code"], events[-1]["message"]) == ("bad_resume", message)
        assert_conformant(events)
        assert await store.load("t1") == before
        new_input = await post_run(client, run_input("t1", "r3", "something else"))
        assert new_input[-1]["code"] == "interrupt_open"
        assert new_input[-1]["message"] == (
            "thread 't1' has open interrupts (question:call-1:1); new messages cannot be sent "
            "until they are answered: send a run with resume entries for them and no new "
            "messages. Nothing was changed"
        )
        assert await store.load("t1") == before


async def test_a_question_that_cannot_resume_is_cancelled_and_answered_in_doubt() -> None:
    store = MemorySessionStore()
    async with thread_client(store) as client:
        events = await post_run(client, run_input("t1", "r1", "confirm it"))
        [interrupt] = events[-1]["outcome"]["interrupts"]
        assert (interrupt["responseSchema"], interrupt["metadata"]["agentloop"]["resumable"]) == (
            {"type": "null"},
            False,
        )
        assert_conformant(events)
        refused = await post_run(
            client, run_input("t1", "r2", resume=resume((QUESTION, "resolved", None)))
        )
        assert refused[-1]["message"] == (
            "resume[0]: interrupt 'question:call-1:1': call call-1 (confirm) cannot go on from "
            "an answer sent now (its question has no resume data: the run that asked it is "
            "over); cancel the interrupt instead (the call is then answered as in doubt); "
            "nothing was recorded"
        )
        cancelled = await post_run(
            client, run_input("t1", "r3", resume=resume((QUESTION, "cancelled", None)))
        )
        assert types(cancelled)[-1] == "RUN_FINISHED"
        assert_conformant(cancelled)
    stored = await store.load("t1")
    assert stored is not None
    assert tool_outputs(stored)[0][0::2] == ("call-1", "in_doubt")


async def test_the_official_client_answers_a_question() -> None:
    node = shutil.which("node")
    assert node is not None, "node is not installed (apt-get install -y nodejs npm)"
    folder = Path(__file__).parent / "node"
    assert (folder / "node_modules" / "@ag-ui" / "client").is_dir(), (
        "@ag-ui/client is not installed: run sh scripts/install_node_clients.sh"
    )
    store = MemorySessionStore()
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(reply))
            .add_tool_source(al.ToolRegistry().with_tool(Book()))
            .task_manager(manager)
            .store(store)
            .build()
        )
        app = create_agui_app(agent, config=AguiConfig(token=TOKEN))
        async with hypercorn_serving(app) as base:
            with anyio.fail_after(60):
                done = await anyio.run_process(
                    [node, "agui_question_client.mjs", base + "/", TOKEN],
                    cwd=folder,
                    check=False,
                )
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["interrupts"] == [
        {
            "id": QUESTION,
            "reason": "input_required",
            "message": "Which seat?",
            "toolCallId": "call-1",
            "responseSchema": SEAT,
        }
    ]
    assert result["first"][-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    assert result["second"][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert result["second"][-1] == "RUN_FINISHED"
    assert (result["pendingAfter"], result["last"]) == (0, "noted: booked 2A")
    stored = await store.load("thread-question")
    assert stored is not None
    assert tool_outputs(stored) == [("call-1", "booked 2A", None)]
