"""An A2A task resting on a running call's question releases its driver: the asking
call's task ends (nothing recorded) instead of waiting forever in the server's task
manager, and the answer, sent later, resumes the session from the store and completes
the task. In process (the a2a-sdk client over httpx's ASGI transport), on asyncio
(a2a-sdk's only backend)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a_server import Book

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.a2a import A2AConfig, create_a2a_app
from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

TOKEN = "a2a-release-token-of-at-least-16-characters"


def reply(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        [result] = last.tool_results()
        return f"Result: {result.output}"
    return tool_calls(call("book", {}, id="call-1"))


def message(context: str, *parts: Part, task: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            parts=list(parts),
            context_id=context,
            task_id=task,
        )
    )


async def test_question_tasks_leave_no_call_running_and_the_answer_completes() -> None:
    store = MemorySessionStore()
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(reply))
            .add_tool_source(al.ToolRegistry().with_tool(Book()))
            .task_manager(manager)
            .store(store)
            .build()
        )
        config = A2AConfig(url="http://127.0.0.1:8000/", token=TOKEN)
        transport = httpx.ASGITransport(app=create_a2a_app(agent, config=config))
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000", headers=headers
        ) as http:
            client = await create_client(
                "http://127.0.0.1:8000",
                client_config=ClientConfig(streaming=False, httpx_client=http),
            )
            tasks = []
            for n in range(3):
                [event] = [
                    e async for e in client.send_message(message(f"ctx-{n}", Part(text="book")))
                ]
                assert TaskState.Name(event.task.status.state) == "TASK_STATE_INPUT_REQUIRED"
                tasks.append(event.task.id)
            assert await handle.list_running() == []
            for n in range(3):
                stored = await store.load(f"ctx-{n}")
                assert stored is not None
                assert stored.status is SessionStatus.AWAITING_ANSWER
            content = {"action": "accept", "content": {"seat": "4C"}}
            [event] = [
                e
                async for e in client.send_message(
                    message("ctx-1", new_data_part(content), task=tasks[1])
                )
            ]
            assert TaskState.Name(event.task.status.state) == "TASK_STATE_COMPLETED"
            assert get_artifact_text(event.task.artifacts[-1]) == "Result: booked 4C"
            assert await handle.list_running() == []
