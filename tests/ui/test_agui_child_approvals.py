"""A child agent's approval (``Agent.as_tool``) over AG-UI: the run ends with a
``tool_call`` interrupt naming the child's call and its path, answered by ``resume``
exactly like a top-level approval (approve, edit, deny; a bad payload changes nothing),
recorded through the store's question answers. In process, on both anyio backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from agui_support import TOKEN, post_run, resume, run_input
from child_agents import ECHO_SCHEMA, Echo, parent_agent

from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

INTERRUPT = "question:p-1:1"


@asynccontextmanager
async def child_client(store: MemorySessionStore, echo: Echo) -> AsyncIterator[httpx.AsyncClient]:
    async with parent_agent(store, echo) as parent:
        app = create_agui_app(parent, config=AguiConfig(token=TOKEN))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


def final_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_the_childs_approval_is_a_tool_call_interrupt_with_its_path() -> None:
    store, echo = MemorySessionStore(), Echo()
    async with child_client(store, echo) as client:
        events = await post_run(client, run_input("t1", "r1", "start"))
    assert events[-1]["outcome"]["type"] == "interrupt"
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt == {
        "id": INTERRUPT,
        "reason": "tool_call",
        "message": "sensitive_path",
        "toolCallId": "c-1",
        "responseSchema": {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "editedArgs": ECHO_SCHEMA,
                "reason": {"type": "string", "maxLength": 2000},
            },
            "required": ["approved"],
            "additionalProperties": False,
        },
        "metadata": {
            "agentloop": {
                "child": True,
                "toolName": "echo",
                "input": {"value": "x"},
                "path": ["helper:p-1"],
            }
        },
    }
    stored = await store.load("t1")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_ANSWER
    assert echo.inputs == []


@pytest.mark.parametrize(
    ("entry", "ran", "text"),
    [
        (("resolved", {"approved": True}), [{"value": "x"}], "parent: child: echoed x"),
        (
            ("resolved", {"approved": True, "editedArgs": {"value": "y"}}),
            [{"value": "y"}],
            "parent: child: echoed y",
        ),
        (("resolved", {"approved": False, "reason": "no reads"}), [], "parent: child: "),
        (("cancelled", None), [], "parent: child: "),
    ],
)
async def test_resume_answers_the_childs_approval(
    entry: tuple[str, Any], ran: list[Any], text: str
) -> None:
    store, echo = MemorySessionStore(), Echo()
    async with child_client(store, echo) as client:
        await post_run(client, run_input("t1", "r1", "start"))
        events = await post_run(client, run_input("t1", "r2", resume=resume((INTERRUPT, *entry))))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1].get("outcome") is None
    assert echo.inputs == ran
    assert final_text(events).startswith(text)
    stored = await store.load("t1")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_INPUT


async def test_the_answer_is_single_use() -> None:
    store, echo = MemorySessionStore(), Echo()
    approve = resume((INTERRUPT, "resolved", {"approved": True}))
    async with child_client(store, echo) as client:
        await post_run(client, run_input("t1", "r1", "start"))
        await post_run(client, run_input("t1", "r2", resume=approve))
        events = await post_run(client, run_input("t1", "r3", resume=approve))
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "unknown_interrupt"
    assert echo.inputs == [{"value": "x"}]


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"approved": True, "editedArgs": {"value": 3}}, "do not match the tool's schema"),
        ({"approved": True, "editedArgs": {"other": "y"}}, "do not match the tool's schema"),
        ({"approved": "yes"}, "payload.approved must be true or false"),
        ({"approved": False, "editedArgs": {"value": "y"}}, "goes with approved: true only"),
        ({"approved": True, "extra": 1}, "unknown keys ['extra']"),
        ([1], "payload must be an object"),
    ],
)
async def test_a_bad_payload_is_refused_and_changes_nothing(payload: Any, problem: str) -> None:
    store, echo = MemorySessionStore(), Echo()
    async with child_client(store, echo) as client:
        await post_run(client, run_input("t1", "r1", "start"))
        before = await store.load("t1")
        events = await post_run(
            client, run_input("t1", "r2", resume=resume((INTERRUPT, "resolved", payload)))
        )
        assert events[-1]["type"] == "RUN_ERROR"
        assert events[-1]["code"] == "bad_resume"
        assert problem in events[-1]["message"]
        assert "nothing was recorded" in events[-1]["message"]
        after = await store.load("t1")
        assert after is not None
        assert before is not None
        assert after.answers == {}
        assert after.checkpoint == before.checkpoint
        events = await post_run(
            client,
            run_input("t1", "r3", resume=resume((INTERRUPT, "resolved", {"approved": True}))),
        )
    assert events[-1]["type"] == "RUN_FINISHED"
    assert echo.inputs == [{"value": "x"}]


async def test_new_messages_while_the_child_waits_are_refused() -> None:
    store, echo = MemorySessionStore(), Echo()
    async with child_client(store, echo) as client:
        await post_run(client, run_input("t1", "r1", "start"))
        events = await post_run(client, run_input("t1", "r2", "more"))
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "interrupt_open"
    assert INTERRUPT in events[-1]["message"]
    assert echo.inputs == []
