"""Two answers to one question of an A2A task, sent at once (in process, the a2a-sdk
client over httpx's ASGI transport): one wins, the call goes on from it alone, and the
task ends completed with that answer's result."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, new_data_part
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a_server import Book

import agentloop as al
import agentloop.tasks
import agentloop.testing
from agentloop.a2a import A2AConfig, create_a2a_app
from agentloop.store import MemorySessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

TOKEN = "a2a-race-token-of-at-least-16-characters"


def reply(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        [result] = last.tool_results()
        return f"Result: {result.output}"
    return tool_calls(call("book", {}, id="call-1"))


def message(*parts: Part, task: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            parts=list(parts),
            context_id="ctx-race",
            task_id=task,
        )
    )


async def test_two_answers_at_once_one_wins() -> None:
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
            [first] = [e async for e in client.send_message(message(Part(text="book")))]
            task_id = first.task.id
            outcomes: list[Any] = []

            async def answer(seat: str) -> None:
                content = {"action": "accept", "content": {"seat": seat}}
                try:
                    async for event in client.send_message(
                        message(new_data_part(content), task=task_id)
                    ):
                        outcomes.append(event.task)
                except Exception as error:
                    outcomes.append(error)

            async with anyio.create_task_group() as group:
                group.start_soon(answer, "1A")
                group.start_soon(answer, "2B")
            final = await client.get_task(GetTaskRequest(id=task_id))
    assert TaskState.Name(final.status.state) == "TASK_STATE_COMPLETED"
    text = get_artifact_text(final.artifacts[-1])
    assert text in ("Result: booked 1A", "Result: booked 2B")
    stored = await store.load("ctx-race")
    assert stored is not None
    results = [
        part["output"] for item in stored.checkpoint["transcript"] for part in item["parts"]
        if part["type"] == "tool_result"
    ]  # fmt: skip
    assert results == [text.removeprefix("Result: ")]
    # each sender saw the winner's result or a refusal, never the losing answer's
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            continue
        assert [get_artifact_text(a) for a in outcome.artifacts] in ([], [text])
