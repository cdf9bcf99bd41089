"""Agent calls agent: an agentloop agent calls an agentloop A2A server (``a2a_server.py``,
another process) through ``A2AToolSource``; the remote agent's approval surfaces at the
top as an ``a2a.approval`` ``CallQuestion`` and the answer continues the same remote
task: approve, deny, edit, a refused edit asked again, and a restart of our process
while the question waits. A question asked by the remote agent's own tool (three levels:
our agent -> A2A -> the remote agent's tool) surfaces at the top with its kind and schema,
and the answer (or a decline) goes back to that tool. Both anyio backends (the calling
side)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import CancelTaskRequest, ListTasksRequest, TaskState
from a2a_support import child_server

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.testing
from agentloop.a2a import APPROVAL_KIND, A2AToolSource
from agentloop.store import MemorySessionStore
from agentloop.testing import call, chunked, tool_calls

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parent / "a2a_server.py"
TOKEN = "a2a-tool-test-token-of-at-least-16-characters"
HEADERS = {"authorization": f"Bearer {TOKEN}"}
TOOL = "a2a__agentloop_agent"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def serve(tmp_path: Path) -> Any:
    """Our A2A server (SQLite sessions and task records in ``tmp_path``) in a child."""

    def arguments(port: int) -> list[str]:
        return [str(tmp_path / "sessions.db"), str(tmp_path / "tasks.db"), str(port), TOKEN]

    return child_server(SERVER, arguments, tmp_path)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(tmp_path_factory.mktemp("a2atool-remote")) as base:
        yield base


def caller(source: A2AToolSource, manager: al.tasks.AsyncTaskManager, store: Any = None) -> Any:
    """The calling agent: asks the remote agent to deploy, then reports what it said."""

    def reply(request: al.model.TurnRequest) -> Any:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.TOOL:
            [result] = last.tool_results()
            return chunked("Remote: ", str(result.output))
        return tool_calls(call(TOOL, {"message": last.text_content}, id="call-a"))

    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(source)
        .task_manager(manager)
    )
    return (builder.store(store) if store is not None else builder).build()


async def run_through(
    base: str, text: str, *answers: Callable[[al.CallQuestion], None]
) -> tuple[list[al.CallQuestion], al.LoopDriver]:
    asked: list[al.CallQuestion] = []
    async with A2AToolSource(base, headers=HEADERS) as source, al.tasks.AsyncTaskManager() as m:
        driver = await caller(source, m).start(str(uuid.uuid4()))
        driver.submit_input([al.Item.text(al.ItemKind.USER, text)])
        while not isinstance(step := await driver.next(), al.Finished):
            if isinstance(step, al.CallQuestion):
                answers[len(asked)](step)
                asked.append(step)
    return asked, driver


def final_text(driver: al.LoopDriver) -> str:
    return driver.snapshot().transcript[-1].text_content


def approval(step: al.CallQuestion) -> tuple[str, dict[str, Any]]:
    return step.question.kind, step.question.data["approval"]


@asynccontextmanager
async def sdk_client(base: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers=HEADERS, timeout=30) as http:
        yield await create_client(base, client_config=ClientConfig(httpx_client=http))


async def remote_tasks(base: str, context_id: str) -> list[tuple[str, str]]:
    async with sdk_client(base) as client:
        listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
    return [(t.id, str(TaskState.Name(t.status.state))) for t in listed.tasks]


async def test_the_remote_approval_is_asked_at_the_top_and_the_task_completes(
    remote: str,
) -> None:
    asked, driver = await run_through(remote, "deploy api", lambda s: s.answer({"approved": True}))
    [step] = asked
    assert approval(step) == (
        APPROVAL_KIND,
        {
            "callId": "call-1",
            "toolName": "deploy",
            "input": {"service": "api"},
            "reason": "deploys need a person",
        },
    )
    assert step.question.message == (
        f"remote agent {remote!r} asks for approval of deploy (call-1): deploys need a person"
    )
    assert step.tool_name == TOOL
    assert final_text(driver) == "Remote: Result: deployed api"
    data = step.question.data
    assert await remote_tasks(remote, data["contextId"]) == [
        (data["taskId"], "TASK_STATE_COMPLETED")
    ]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"approved": False, "reason": "not on a Friday"}, "Remote: Result: not on a Friday"),
        ({"approved": True, "editedArgs": {"service": "web"}}, "Remote: Result: deployed web"),
    ],
)
async def test_a_deny_or_an_edit_goes_back_to_the_remote_task(
    remote: str, answer: dict[str, Any], expected: str
) -> None:
    asked, driver = await run_through(remote, "deploy api", lambda s: s.answer(answer))
    assert len(asked) == 1
    assert final_text(driver) == expected


async def test_an_edit_the_remote_refuses_is_asked_again_on_the_same_task(remote: str) -> None:
    asked, driver = await run_through(
        remote,
        "deploy api",
        lambda s: s.answer({"approved": True, "editedArgs": {"service": ""}}),
        lambda s: s.answer({"approved": True}),
    )
    first, second = asked
    assert first.question.data["taskId"] == second.question.data["taskId"]
    assert second.question.data["text"].startswith("bad_resume: ")
    assert "service" in second.question.data["text"]
    assert final_text(driver) == "Remote: Result: deployed api"


async def test_our_process_restarts_while_the_question_waits(remote: str) -> None:
    """The call's question is in our session's checkpoint with the remote task and
    context ids; after a restart the answer continues that very task. (The remote
    server's own restart is tested in test_a2a_server.py.)"""
    store, session = MemorySessionStore(), str(uuid.uuid4())
    async with (
        A2AToolSource(remote, headers=HEADERS) as source,
        al.tasks.AsyncTaskManager() as manager,
    ):
        driver = await caller(source, manager, store).start(session)
        driver.submit_input([al.Item.text(al.ItemKind.USER, "deploy db")])
        first = await driver.next()
        assert isinstance(first, al.CallQuestion)
    # Our process "stops" here: the call is cut while the question waits, and the
    # remote task is left waiting for the answer.
    ids = first.question.data["taskId"], first.question.data["contextId"]
    assert await remote_tasks(remote, ids[1]) == [(ids[0], "TASK_STATE_INPUT_REQUIRED")]
    saved = await store.load(session)
    assert saved is not None
    assert saved.checkpoint["state"] == "AWAITING_ANSWER"
    async with (
        A2AToolSource(remote, headers=HEADERS) as source,
        al.tasks.AsyncTaskManager() as manager,
    ):
        driver = await caller(source, manager, store).resume(session_id=session)
        again = await driver.next()
        assert isinstance(again, al.CallQuestion)
        assert again.question == first.question
        again.answer({"approved": True})
        finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert final_text(driver) == "Remote: Result: deployed db"
    [result] = [
        p for i in driver.snapshot().transcript for p in i.parts
        if isinstance(p, al.ToolResultPart)
    ]  # fmt: skip
    assert result.metadata["a2a.task"] == {
        "id": ids[0],
        "contextId": ids[1],
        "state": "TASK_STATE_COMPLETED",
    }
    assert await remote_tasks(remote, ids[1]) == [(ids[0], "TASK_STATE_COMPLETED")]


async def test_a_task_that_moved_on_is_not_answered_after_a_restart(remote: str) -> None:
    """The remote task was cancelled meanwhile: the answer is not sent, the call says so."""
    store, session = MemorySessionStore(), str(uuid.uuid4())
    async with (
        A2AToolSource(remote, headers=HEADERS) as source,
        al.tasks.AsyncTaskManager() as manager,
    ):
        driver = await caller(source, manager, store).start(session)
        driver.submit_input([al.Item.text(al.ItemKind.USER, "deploy cache")])
        first = await driver.next()
        assert isinstance(first, al.CallQuestion)
    task_id = first.question.data["taskId"]
    async with sdk_client(remote) as client:
        await client.cancel_task(CancelTaskRequest(id=task_id))
    async with (
        A2AToolSource(remote, headers=HEADERS) as source,
        al.tasks.AsyncTaskManager() as manager,
    ):
        driver = await caller(source, manager, store).resume(session_id=session)
        again = await driver.next()
        assert isinstance(again, al.CallQuestion)
        again.answer({"approved": True})
        await driver.run_until_blocked()
    assert final_text(driver) == (
        f"Remote: remote agent {remote}: task {task_id} is TASK_STATE_CANCELED now, no longer "
        "waiting for input; the answer given after the restart was not sent"
    )


SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string", "minLength": 2}, "row": {"type": "integer"}},
    "required": ["seat"],
    "additionalProperties": False,
}


async def test_a_remote_tools_question_is_asked_at_the_top_with_its_schema(remote: str) -> None:
    def bad_then_good(step: al.CallQuestion) -> None:
        with pytest.raises(al.InvalidInputError, match="is too short"):
            step.answer({"seat": "A"})  # checked here against the remote tool's schema
        step.answer({"seat": "4C"})

    asked, driver = await run_through(remote, "book", bad_then_good)
    [step] = asked
    data = step.question.data
    assert (step.tool_name, step.question.kind, step.question.schema) == (
        TOOL,
        "mcp.elicitation",
        SEAT,
    )
    assert step.question.message == f"remote agent {remote!r} (book) asks: Which seat?"
    assert data["question"] == {
        "questionId": "question:call-1:1",
        "kind": "mcp.elicitation",
        "message": "Which seat?",
        "schema": SEAT,
        "data": {"mode": "form"},
        "toolName": "book",
    }
    assert final_text(driver) == "Remote: Result: booked 4C"
    assert await remote_tasks(remote, data["contextId"]) == [
        (data["taskId"], "TASK_STATE_COMPLETED")
    ]
    asked, driver = await run_through(remote, "book", lambda s: s.decline())
    assert final_text(driver) == "Remote: Result: decline"  # the remote tool saw the decline


async def test_a_remote_tools_question_is_answered_after_our_restart(remote: str) -> None:
    """Our process stops while the remote tool's question waits; the restored driver asks
    it again, and its decline goes to the remote tool (the remote task is not cancelled)."""
    store, session = MemorySessionStore(), str(uuid.uuid4())
    async with (
        A2AToolSource(remote, headers=HEADERS) as source,
        al.tasks.AsyncTaskManager() as manager,
    ):
        driver = await caller(source, manager, store).start(session)
        driver.submit_input([al.Item.text(al.ItemKind.USER, "book")])
        first = await driver.next()
        assert isinstance(first, al.CallQuestion)
    async with (
        A2AToolSource(remote, headers=HEADERS) as source,
        al.tasks.AsyncTaskManager() as manager,
    ):
        driver = await caller(source, manager, store).resume(session_id=session)
        again = await driver.next()
        assert isinstance(again, al.CallQuestion)
        assert (again.question.kind, again.question.schema) == ("mcp.elicitation", SEAT)
        again.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert final_text(driver) == "Remote: Result: decline"
    data = first.question.data
    assert await remote_tasks(remote, data["contextId"]) == [
        (data["taskId"], "TASK_STATE_COMPLETED")
    ]
