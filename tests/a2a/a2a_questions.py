"""A running call's question over the A2A server (for test_a2a_server.py, which starts
the server process, restarts it, and calls these between): the task waits in
input-required with the question (its schema included), bad answers keep it there and
change nothing, a decline goes to the call, and the answer, sent after a restart of the
server, goes to the question asked again on the same task; an answer is final."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from agentloop.store import SqliteSessionStore

pytestmark = pytest.mark.anyio

SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string", "minLength": 2}, "row": {"type": "integer"}},
    "required": ["seat"],
    "additionalProperties": False,
}
QUESTION = "question:call-1:1"


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


async def final_task(client: Any, request: SendMessageRequest) -> Any:
    events = [event async for event in client.send_message(request)]
    tasks = [e.task for e in events if e.HasField("task")]
    return tasks[-1]


async def stored(tmp_path: Path, session_id: str) -> tuple[int, str, dict[str, Any]]:
    """The session as the server's store holds it: version, status, recorded answers."""
    async with SqliteSessionStore(tmp_path / "sessions.db") as store:
        session = await store.load(session_id)
    assert session is not None
    answers = {q: (a.action, a.content) for q, a in session.answers.items()}
    return session.version, session.status.value, answers


def state(task: Any) -> str:
    return str(TaskState.Name(task.status.state))


BAD_ANSWERS = [
    (
        {"questionId": QUESTION, "action": "accept", "content": {"seat": "A"}},
        f"answers[0]: question {QUESTION!r}: content: the content does not match the "
        "question's schema (seat: 'A' is too short); answer with content that matches "
        "question.schema, or decline(). Nothing was recorded",
    ),
    (
        {"questionId": QUESTION, "action": "accept", "content": {"seat": "2A", "x": 1}},
        f"answers[0]: question {QUESTION!r}: content: the content does not match the "
        "question's schema ((content): Additional properties are not allowed ('x' was "
        "unexpected)); answer with content that matches question.schema, or decline(). "
        "Nothing was recorded",
    ),
    (
        {"questionId": QUESTION, "action": "maybe"},
        "answers[0].action must be one of accept, decline, cancel; got 'maybe'. "
        "Nothing was recorded",
    ),
    (
        {"questionId": QUESTION, "action": "decline", "content": {"seat": "2A"}},
        f"answers[0]: question {QUESTION!r}: content: a decline answer carries no content, "
        "got {'seat': '2A'}. Nothing was recorded",
    ),
    (
        {"questionId": "question:call-9:1", "action": "cancel"},
        f"answers[0]: question 'question:call-9:1' does not wait on this task (waiting: "
        f"{QUESTION}). Nothing was recorded",
    ),
    (
        {"questionId": QUESTION, "action": "accept", "content": {"seat": "2A"}, "note": 1},
        "answers[0] has unknown fields ['note'] (expected questionId, action, content). "
        "Nothing was recorded",
    ),
    (
        {"callId": "call-1", "approved": True},
        "answers[0] has unknown fields ['approved', 'callId'] (expected questionId, action, "
        "content). Nothing was recorded",
    ),
]


ASKED = [
    {
        "questions": [
            {
                "questionId": QUESTION,
                "callId": "call-1",
                "toolName": "book",
                "kind": "mcp.elicitation",
                "message": "Which seat?",
                "schema": SEAT,
                "data": {"mode": "form"},
                "resumable": True,
            }
        ]
    }
]


async def ask_and_refuse(client: Any, tmp_path: Path) -> str:
    """Start a task whose call asks, refuse bad answers and a new task meanwhile, and
    decline another context's question; the asking task's id."""
    task = await final_task(client, message("ctx-q", Part(text="book")))
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    status = task.status.message
    assert get_message_text(status) == f"waiting for an answer: {QUESTION} (book): Which seat?"
    assert get_data_parts(status.parts) == ASKED
    before = await stored(tmp_path, "ctx-q")
    assert before[1:] == ("awaiting_answer", {})
    for answer, expected in BAD_ANSWERS:
        still = await final_task(client, message("ctx-q", new_data_part(answer), task=task.id))
        assert state(still) == "TASK_STATE_INPUT_REQUIRED"
        assert get_message_text(still.status.message) == f"bad_answer: {expected}"
        assert get_data_parts(still.status.message.parts) == ASKED
        assert await stored(tmp_path, "ctx-q") == before  # nothing changed
    other = await final_task(client, message("ctx-q", Part(text="book")))
    assert state(other) == "TASK_STATE_REJECTED"
    assert get_message_text(other.status.message) == (
        "interrupt_open: context 'ctx-q' has questions waiting for an answer "
        f"({QUESTION}) on the task that asked them; answer that task first. "
        "Nothing was changed"
    )
    declined = await final_task(client, message("ctx-d", Part(text="book")))
    done = await final_task(client, message("ctx-d", Part(text="decline"), task=declined.id))
    assert state(done) == "TASK_STATE_COMPLETED"
    assert get_artifact_text(done.artifacts[-1]) == "Result: decline"
    return str(task.id)


async def answer_after_restart(streaming: Any, blocking: Any, tmp_path: Path, task: str) -> None:
    """Answer the question on ``task`` (streamed, the question id left out), then once
    more on the finished task (refused, nothing changes)."""
    answer = {"action": "accept", "content": {"seat": "2A", "row": 3}}
    request = message("ctx-q", new_data_part(answer), task=task)
    events = [event async for event in streaming.send_message(request)]
    assert [TaskState.Name(e.status_update.status.state) for e in events
            if e.HasField("status_update")][-1] == "TASK_STATE_COMPLETED"  # fmt: skip
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [get_artifact_text(a) for a in artifacts] == ["Result: booked 2A"]
    after = await stored(tmp_path, "ctx-q")
    assert after[1:] == ("awaiting_input", {})  # the turn ended; its answers went with it
    again = {"questionId": QUESTION, "action": "accept", "content": {"seat": "9Z"}}
    with pytest.raises(Exception, match="terminal state"):
        await final_task(blocking, message("ctx-q", new_data_part(again), task=task))
    assert await stored(tmp_path, "ctx-q") == after  # the first answer stands
