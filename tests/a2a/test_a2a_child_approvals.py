"""A child agent's approval (``Agent.as_tool``) on an A2A task (in process, the a2a-sdk
client over httpx's ASGI transport): the task waits in input-required with the child's
call in ``approvals`` (its path included), and an answer approves, edits or denies it
exactly as a top-level approval; a bad answer keeps the task waiting and records
nothing; an answer is single use."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError
from child_agents import ECHO_SCHEMA, Echo, parent_agent

from agentloop.a2a import A2AConfig, create_a2a_app
from agentloop.store import MemorySessionStore, SessionStatus

pytestmark = pytest.mark.anyio

TOKEN = "a2a-child-token-of-at-least-16-characters"


def message(*parts: Part, task: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            parts=list(parts),
            context_id="ctx-child",
            task_id=task,
        )
    )


@asynccontextmanager
async def client_for(store: MemorySessionStore, echo: Echo) -> AsyncIterator[Any]:
    async with parent_agent(store, echo) as parent:
        config = A2AConfig(url="http://127.0.0.1:8000/", token=TOKEN)
        transport = httpx.ASGITransport(app=create_a2a_app(parent, config=config))
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000", headers=headers
        ) as http:
            yield await create_client(
                "http://127.0.0.1:8000",
                client_config=ClientConfig(streaming=False, httpx_client=http),
            )


async def final_task(client: Any, request: SendMessageRequest) -> Any:
    events = [event async for event in client.send_message(request)]
    return [e.task for e in events if e.HasField("task")][-1]


def state(task: Any) -> str:
    return str(TaskState.Name(task.status.state))


WAITING = {
    "approvals": [
        {
            "callId": "c-1",
            "toolName": "echo",
            "input": {"value": "x"},
            "reason": "sensitive_path",
            "path": ["helper:p-1"],
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
        }
    ]
}


async def test_the_task_lists_the_childs_approval_with_its_path() -> None:
    store, echo = MemorySessionStore(), Echo()
    async with client_for(store, echo) as client:
        task = await final_task(client, message(Part(text="start")))
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    assert get_message_text(task.status.message).startswith(
        "waiting for approval: c-1 (echo, in helper:p-1)"
    )
    assert get_data_parts(task.status.message.parts) == [WAITING]
    stored = await store.load("ctx-child")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_ANSWER
    assert echo.inputs == []


@pytest.mark.parametrize(
    ("answer", "ran", "text"),
    [
        (new_data_part({"callId": "c-1", "approved": True}), [{"value": "x"}], "echoed x"),
        (Part(text="approve"), [{"value": "x"}], "echoed x"),
        (
            new_data_part({"approved": True, "editedArgs": {"value": "y"}}),
            [{"value": "y"}],
            "echoed y",
        ),
        (new_data_part({"callId": "c-1", "approved": False, "reason": "no"}), [], "no"),
        (Part(text="deny: not now"), [], "not now"),
    ],
)
async def test_an_answer_approves_edits_or_denies(answer: Part, ran: list[Any], text: str) -> None:
    store, echo = MemorySessionStore(), Echo()
    async with client_for(store, echo) as client:
        first = await final_task(client, message(Part(text="start")))
        task = await final_task(client, message(answer, task=first.id))
        assert state(task) == "TASK_STATE_COMPLETED"
        result = get_artifact_text(task.artifacts[0])
        assert result.startswith("parent: child: ")
        assert text in result
        assert echo.inputs == ran
        with pytest.raises(UnsupportedOperationError, match="terminal state"):
            await final_task(client, message(Part(text="approve"), task=first.id))
    assert echo.inputs == ran


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"callId": "c-1", "approved": True, "editedArgs": {"value": 3}}, "do not match"),
        ({"approved": "yes"}, "payload.approved must be true or false"),
        ({"callId": "c-9", "approved": True}, "answers call 'c-9', which does not wait"),
        ({"approved": False, "editedArgs": {"value": "y"}}, "goes with approved: true only"),
        ({"approved": True, "extra": 1}, "unknown keys ['extra']"),
    ],
)
async def test_a_bad_answer_keeps_the_task_waiting_and_records_nothing(
    data: dict[str, Any], problem: str
) -> None:
    store, echo = MemorySessionStore(), Echo()
    async with client_for(store, echo) as client:
        first = await final_task(client, message(Part(text="start")))
        before = await store.load("ctx-child")
        task = await final_task(client, message(new_data_part(data), task=first.id))
        assert state(task) == "TASK_STATE_INPUT_REQUIRED"
        assert problem in get_message_text(task.status.message)
        assert "othing was recorded" in get_message_text(task.status.message)
        assert get_data_parts(task.status.message.parts) == [WAITING]
        after = await store.load("ctx-child")
        assert before is not None
        assert after is not None
        assert after.answers == {}
        assert after.checkpoint == before.checkpoint
        assert echo.inputs == []
        done = await final_task(client, message(Part(text="approve"), task=first.id))
    assert state(done) == "TASK_STATE_COMPLETED"
    assert echo.inputs == [{"value": "x"}]
