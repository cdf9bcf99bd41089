"""The A2A server with the a2a-sdk client, the server in another process (uvicorn on
127.0.0.1): the public agent card, a task that waits in input-required for an approval
and resumes when the client answers on the same task and context (after a restart of
the server, with SendMessage and SendStreamingMessage), a deny, and a bad answer that
changes nothing; a running call's question the same way (``a2a_questions.py``, in the
same server processes)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a_questions import answer_after_restart, ask_and_refuse

from agentloop.store import SqliteSessionStore

pytestmark = pytest.mark.anyio

TOKEN = "a2a-test-token-of-at-least-16-characters"
HEADERS = {"authorization": f"Bearer {TOKEN}"}
SERVER = Path(__file__).parent / "a2a_server.py"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server_process(tmp_path: Path) -> Iterator[str]:
    """The A2A server in a child process on a free port, until the block ends; its URL.

    A child that dies before it answers (its port taken meanwhile) is started again
    on another port, at most three times; its stderr is in the failure message.
    """
    for attempt in range(3):
        port = free_port()
        log = tmp_path / f"server-{port}.log"
        with log.open("wb") as errors:
            child = subprocess.Popen(
                [sys.executable, str(SERVER), *_stores(tmp_path), str(port), TOKEN],
                stderr=errors,
            )
        try:
            if _answers(child, f"http://127.0.0.1:{port}"):
                yield f"http://127.0.0.1:{port}"
                return
            if attempt == 2 or "address already in use" not in log.read_text():
                raise AssertionError(f"the A2A server did not start:\n{log.read_text()}")
        finally:
            child.terminate()
            child.wait(20)


def _stores(tmp_path: Path) -> list[str]:
    return [str(tmp_path / "sessions.db"), str(tmp_path / "tasks.db")]


def _answers(child: subprocess.Popen[bytes], base: str) -> bool:
    """Whether the child serves its agent card within 60 s (``False`` once it exited)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/.well-known/agent-card.json", timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        if child.poll() is not None:
            return False
        time.sleep(0.05)
    return False


@asynccontextmanager
async def a2a_client(base: str, *, streaming: bool) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers=HEADERS, timeout=30) as http:
        client = await create_client(
            base, client_config=ClientConfig(streaming=streaming, httpx_client=http)
        )
        try:
            yield client
        finally:
            await client.close()


async def stored(tmp_path: Path, session_id: str) -> tuple[int, dict[str, Any]]:
    """The session as the server's store holds it: its version and its decisions."""
    async with SqliteSessionStore(tmp_path / "sessions.db") as store:
        session = await store.load(session_id)
    assert session is not None
    return session.version, dict(session.approvals)


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


async def send(client: Any, request: SendMessageRequest) -> list[Any]:
    return [event async for event in client.send_message(request)]


def final_task(events: list[Any]) -> Any:
    tasks = [e.task for e in events if e.HasField("task")]
    return tasks[-1]


def states(events: list[Any]) -> list[str]:
    found = []
    for event in events:
        if event.HasField("task"):
            found.append(TaskState.Name(event.task.status.state))
        elif event.HasField("status_update"):
            found.append(TaskState.Name(event.status_update.status.state))
    return found


async def test_tasks_wait_for_approval_or_an_answer_and_resume_after_a_restart(
    tmp_path: Path,
) -> None:
    with server_process(tmp_path) as base:
        async with httpx.AsyncClient(base_url=base) as plain:  # no token
            card = (await plain.get("/.well-known/agent-card.json")).json()
            assert (await plain.post("/", json={})).status_code == 401
        assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
        assert card["capabilities"]["streaming"] is True
        assert "bearer" in card["securitySchemes"]
        async with a2a_client(base, streaming=False) as client:
            events = await send(client, message("ctx-1", Part(text="deploy api")))
        task = final_task(events)
        assert TaskState.Name(task.status.state) == "TASK_STATE_INPUT_REQUIRED"
        status = task.status.message
        assert get_message_text(status) == "waiting for approval: call-1 (deploy)"
        [data] = get_data_parts(status.parts)
        [approval] = data["approvals"]
        assert (approval["callId"], approval["toolName"], approval["input"]) == (
            "call-1",
            "deploy",
            {"service": "api"},
        )
        assert approval["responseSchema"]["required"] == ["approved"]
        async with a2a_client(base, streaming=False) as client:
            asking = await ask_and_refuse(client, tmp_path)
    with server_process(tmp_path) as base:  # a restart: a new process, the same stores
        async with (
            a2a_client(base, streaming=True) as client,
            a2a_client(base, streaming=False) as blocking,
        ):
            answer = message("ctx-1", new_data_part({"approved": True}), task=task.id)
            events = await send(client, answer)
            await answer_after_restart(client, blocking, tmp_path, asking)
    assert states(events)[-1] == "TASK_STATE_COMPLETED"
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [get_artifact_text(a) for a in artifacts] == ["Result: deployed api"]


async def test_a_deny_and_a_bad_answer_on_the_same_task(tmp_path: Path) -> None:
    with server_process(tmp_path) as base:
        async with a2a_client(base, streaming=False) as client:
            task = final_task(await send(client, message("ctx-2", Part(text="deploy web"))))
            before = await stored(tmp_path, "ctx-2")
            bad = message("ctx-2", new_data_part({"approved": "yes"}), task=task.id)
            still = final_task(await send(client, bad))
            assert await stored(tmp_path, "ctx-2") == before  # nothing changed
            assert TaskState.Name(still.status.state) == "TASK_STATE_INPUT_REQUIRED"
            text = get_message_text(still.status.message)
            assert text.startswith("bad_resume: answers[0]: payload.approved must be true or false")
            for value in ("Infinity", "-Infinity", "NaN", "[1, Infinity]"):  # not JSON
                parts = '[{"data": {"approved": ' + value + "}}]"
                sent = (
                    '{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": '
                    '{"role": "ROLE_USER", "messageId": "m-' + value[:3] + '", "contextId": '
                    '"ctx-2", "taskId": "' + task.id + '", "parts": ' + parts + "}}}"
                )
                async with httpx.AsyncClient(base_url=base, headers=HEADERS) as raw:
                    reply = await raw.post(
                        "/",
                        content=sent,
                        headers={"content-type": "application/json", "a2a-version": "1.0"},
                    )
                # a2a-sdk refuses it before the agent sees it; nothing is recorded
                assert reply.json()["error"]["code"] == -32603
                assert "Fail to serialize" in reply.json()["error"]["message"]
                assert await stored(tmp_path, "ctx-2") == before
            other = message("ctx-2", Part(text="deploy db"))  # a new task while one waits
            rejected = final_task(await send(client, other))
            assert TaskState.Name(rejected.status.state) == "TASK_STATE_REJECTED"
            deny = message("ctx-2", Part(text="deny: not on a Friday"), task=task.id)
            done = await send(client, deny)
    finished = final_task(done)
    assert TaskState.Name(finished.status.state) == "TASK_STATE_COMPLETED"
    assert get_artifact_text(finished.artifacts[-1]) == "Result: not on a Friday"
