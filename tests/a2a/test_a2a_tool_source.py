"""The A2A tool source against agents written with a2a-sdk's server classes alone, in
another process (uvicorn on 127.0.0.1; ``sdk_agents.py``), with a streaming card and a
plain one, on both anyio backends: results, failures, input-required asked of the host
and answered on the same task, declines and timeouts that cancel the remote task, and
cards or answers that cannot be used."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState
from a2a_support import child_server

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.a2a import (
    APPROVAL_ANSWER_SCHEMA,
    APPROVAL_KIND,
    INPUT_ANSWER_SCHEMA,
    INPUT_KIND,
    A2AToolSource,
    RemoteAgentConnectionError,
)
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

AGENTS = Path(__file__).parent / "sdk_agents.py"
TASK_ID = re.compile(r"task [0-9a-f-]{36}")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("a2atool-sdk")
    with child_server(AGENTS, lambda port: [str(port)], logs, "/stream") as base:
        yield base


@pytest.fixture(params=["stream", "plain"])
def agent_url(request: pytest.FixtureRequest, sdk_server: str) -> str:
    return f"{sdk_server}/{request.param}"


Answerer = Callable[[al.CallQuestion], None]


async def call_remote(
    source: A2AToolSource,
    message: str,
    answer: Answerer | None = None,
    *,
    data: dict[str, Any] | None = None,
    cancellation: al.CancellationController | None = None,
) -> tuple[list[al.CallQuestion], al.ToolResultPart]:
    """One turn whose model calls the source's tool once; the questions asked (each
    answered by ``answer``) and the call's result."""
    [spec] = source.specs()
    arguments: dict[str, Any] = {"message": message, **({"data": data} if data else {})}
    model = al.testing.ScriptedModel([tool_calls(call(spec.name, arguments, id="c1")), "done"])
    asked: list[al.CallQuestion] = []
    async with al.tasks.AsyncTaskManager() as manager:
        builder = al.Agent.builder().model(model).add_tool_source(source).task_manager(manager)
        if cancellation is not None:
            builder = builder.cancellation(cancellation.handle())
        builder = builder.input([al.Item.text(al.ItemKind.USER, "go")])
        driver = await builder.build().start(str(uuid.uuid4()))  # a remote context each
        while not isinstance(step := await driver.next(), al.Finished):
            if isinstance(step, al.CallQuestion):
                asked.append(step)
                assert answer is not None, step.question.message
                answer(step)
    return asked, only_result(driver)


def only_result(driver: al.LoopDriver) -> al.ToolResultPart:
    [result] = [
        part
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
    return result


@asynccontextmanager
async def sdk_client(url: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http))
        yield client


async def remote_state(url: str, task_id: str) -> str:
    async with sdk_client(url) as client:
        task = await client.get_task(GetTaskRequest(id=task_id))
    return str(TaskState.Name(task.status.state))


def task_of(result: al.ToolResultPart) -> dict[str, Any]:
    task: dict[str, Any] = result.metadata["a2a.task"]
    return task


async def test_the_card_becomes_a_tool(agent_url: str) -> None:
    async with A2AToolSource(agent_url) as source:
        [spec] = source.specs()
        assert source.streaming is agent_url.endswith("stream")
    path = agent_url.rsplit("/", 1)[1]
    assert spec.name == f"a2a__SDK_agent_{path}"
    assert spec.description == "An agent written with a2a-sdk alone."
    assert spec.input_schema["required"] == ["message"]
    assert spec.metadata == {"a2a.agent": agent_url}
    async with A2AToolSource(agent_url, name="helper", skills=True) as source:
        assert [(s.name, s.description) for s in source.specs()] == [
            ("a2a__helper__ask", "Asks a question."),
            ("a2a__helper__echo", "Says it back."),
        ]
        assert source.get("a2a__helper__echo") is not None
        assert source.drain_catalog_events() == []
    async with A2AToolSource(agent_url, streaming=False) as source:
        assert source.streaming is False
        _, result = await call_remote(source, "echo ab")
    assert result.output == "a\nb"


async def test_a_completed_task_is_the_result(agent_url: str) -> None:
    async with A2AToolSource(agent_url) as source:
        asked, result = await call_remote(source, "echo hello world")
        _, files = await call_remote(source, "files")
    assert asked == []
    assert (result.output, result.is_error) == ("hello\n world", False)  # two parts
    assert task_of(result)["state"] == "TASK_STATE_COMPLETED"
    assert task_of(result)["contextId"].startswith("agentloop-")
    assert result.metadata["a2a.agent"] == agent_url
    assert files.output == [
        al.MediaPart("image/png", data="iVBORy1ieXRlcw=="),
        al.FilePart("report.pdf", mime_type="application/pdf",
                    uri="https://example.test/report.pdf"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("behaviour", "expected", "state"),
    [
        ("fail", "failed: it broke", "TASK_STATE_FAILED"),
        ("reject", "was rejected: not for me", "TASK_STATE_REJECTED"),
        (
            "auth",
            "requires authentication the caller cannot give (log in first); the task was "
            "cancelled (give the source credentials with A2AToolSource(headers=...))",
            "TASK_STATE_CANCELED",
        ),
    ],
)
async def test_a_task_that_does_not_complete_is_an_error_result(
    agent_url: str, behaviour: str, expected: str, state: str
) -> None:
    async with A2AToolSource(agent_url) as source:
        _, result = await call_remote(source, behaviour)
    assert result.is_error
    task = task_of(result)
    assert result.output == f"remote agent {agent_url}: task {task['id']} {expected}"
    assert await remote_state(agent_url, task["id"]) == state


async def test_input_required_is_asked_and_answered_on_the_same_task(agent_url: str) -> None:
    async with A2AToolSource(agent_url) as source:
        asked, result = await call_remote(
            source, "ask", lambda step: step.answer({"text": "blue", "data": {"shade": 3}})
        )
    [step] = asked
    question = step.question
    assert (question.kind, question.message, question.schema) == (
        INPUT_KIND,
        f"remote agent {agent_url!r} asks: Which colour?",
        INPUT_ANSWER_SCHEMA,
    )
    task = task_of(result)
    assert question.data == {
        "agent": agent_url,
        "taskId": task["id"],
        "contextId": task["contextId"],
        "text": "Which colour?",
        "data": [],
    }
    assert question.resume["taskId"] == task["id"]
    assert result.output == [
        al.TextPart("colour: blue"),
        al.TextPart('{"shade": 3.0}', metadata={"a2a.data": True}),
    ]
    assert task["state"] == "TASK_STATE_COMPLETED"


async def test_each_approval_is_asked_and_the_decisions_go_back_together(agent_url: str) -> None:
    answers = iter([{"approved": True}, {"approved": False, "reason": "not today"}])
    async with A2AToolSource(agent_url) as source:
        asked, result = await call_remote(source, "approve", lambda s: s.answer(next(answers)))
    assert [(s.question.kind, s.question.message) for s in asked] == [
        (APPROVAL_KIND, f"remote agent {agent_url!r} asks for approval of drop_table "
                        "(call-7): destructive"),
        (APPROVAL_KIND, f"remote agent {agent_url!r} asks for approval of email (call-8): "
                        "mass mail"),
    ]  # fmt: skip
    assert all(s.question.schema == APPROVAL_ANSWER_SCHEMA for s in asked)
    assert asked[0].question.data["approval"] == {
        "callId": "call-7",
        "toolName": "drop_table",
        "input": {"table": "users"},
        "reason": "destructive",
    }
    assert result.output == {
        "decisions": [
            {"callId": "call-7", "approved": True},
            {"callId": "call-8", "approved": False, "reason": "not today"},
        ]
    }
    with pytest.raises(al.InvalidStateError):
        asked[0].answer({"approved": False})  # answered already: refused, nothing sent


@pytest.mark.parametrize("refusal", ["decline", "cancel"])
async def test_a_refused_question_cancels_the_remote_task(agent_url: str, refusal: str) -> None:
    async with A2AToolSource(agent_url) as source:
        _, result = await call_remote(source, "ask", lambda s: getattr(s, refusal)())
    task = task_of(result)
    verb = "declined" if refusal == "decline" else "cancelled"
    assert result.is_error
    assert result.output == (
        f"remote agent {agent_url}: task {task['id']} was cancelled: the host {verb} its "
        f"question (remote agent {agent_url!r} asks: Which colour?)"
    )
    assert await remote_state(agent_url, task["id"]) == "TASK_STATE_CANCELED"


async def test_a_remote_task_past_call_timeout_is_cancelled(agent_url: str) -> None:
    async with A2AToolSource(agent_url, call_timeout=1, poll_interval=0.05) as source:
        _, result = await call_remote(source, "slow")
    assert result.is_error
    [task_id] = re.findall(r"the task ([0-9a-f-]{36}) was cancelled", str(result.output))
    method = "SendStreamingMessage" if agent_url.endswith("stream") else "SendMessage"
    assert str(result.output) == (
        f"tool 'a2a__SDK_agent_{agent_url.rsplit('/', 1)[1]}' failed: RemoteAgentError: "
        f"remote agent {agent_url}: no answer within 1 s (call_timeout) during {method}; "
        f"the task {task_id} was cancelled"
    )
    assert await remote_state(agent_url, task_id) == "TASK_STATE_CANCELED"


async def test_cancelling_the_turn_while_the_host_thinks_cancels_the_remote_task(
    agent_url: str,
) -> None:
    controller = al.CancellationController()
    async with A2AToolSource(agent_url) as source:
        asked, result = await call_remote(
            source, "ask", lambda step: controller.interrupt(), cancellation=controller
        )
    assert len(asked) == 1
    task_id = asked[0].question.data["taskId"]
    assert await remote_state(agent_url, task_id) == "TASK_STATE_CANCELED"
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.CANCELLED


async def test_a_call_that_cannot_ask_cancels_the_task_and_says_why(sdk_server: str) -> None:
    url = f"{sdk_server}/plain"
    async with A2AToolSource(url) as source:
        [spec] = source.specs()
        tool = source.get(spec.name)
        assert tool is not None
        request = al.ToolRequest("c1", spec.name, {"message": "ask"}, "s", "t")
        with pytest.raises(al.a2a.RemoteAgentError) as raised:
            await tool.invoke(request, al.ToolContext("s", "t", "c1"))
    message = str(raised.value)
    [task_id] = re.findall(r"task ([0-9a-f-]{36}) needs input", message)
    assert message == (
        f"remote agent {url}: task {task_id} needs input, which could not be asked of the "
        "host (cannot ask the host from call c1: its context has no driver (the tool was "
        "called outside a driver's round); nobody can answer); the task was cancelled"
    )
    assert await remote_state(url, task_id) == "TASK_STATE_CANCELED"


async def test_cancelling_a_running_call_cancels_the_remote_task(sdk_server: str) -> None:
    url = f"{sdk_server}/stream"
    async with A2AToolSource(url) as source:
        [spec] = source.specs()
        tool = source.get(spec.name)
        assert tool is not None
        session = str(uuid.uuid4())
        ctx = al.ToolContext(session, "t", "c1")
        request = al.ToolRequest("c1", spec.name, {"message": "slow"}, session, "t")
        async with anyio.create_task_group() as group, sdk_client(url) as client:
            group.start_soon(tool.invoke, request, ctx)
            while not await tasks_of(client, ctx.idempotency_key):  # noqa: ASYNC110 - remote
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()  # our call is cancelled
        async with sdk_client(url) as client:
            [task] = await tasks_of(client, ctx.idempotency_key)
    assert TaskState.Name(task.status.state) == "TASK_STATE_CANCELED"


async def tasks_of(client: Any, context_id: str) -> list[Any]:
    return list((await client.list_tasks(ListTasksRequest(context_id=context_id))).tasks)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/garbage", "cannot read the agent card of {url}: Failed to parse JSON for agent card"),
        ("/nothing", "cannot read the agent card of {url}: Failed to fetch agent card from "
                     "{url}/.well-known/agent-card.json (HTTP 404)"),
        ("/elsewhere", "the agent card of {url} sends calls to http://192.0.2.1:9/, another "
                       "origin than the card's; the headers (your credentials) would go there. "
                       "Pass A2AToolSource(allow_other_origins=True) if that is intended"),
    ],
)  # fmt: skip
async def test_a_card_that_cannot_be_used_is_refused_on_entering(
    sdk_server: str, path: str, expected: str
) -> None:
    url = sdk_server + path
    source = A2AToolSource(url)
    with pytest.raises(RemoteAgentConnectionError) as raised:
        await source.__aenter__()
    assert str(raised.value).startswith(expected.format(url=url))
    assert source.specs() == []


async def test_an_unreachable_agent_is_refused_on_entering() -> None:
    from a2a_support import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RemoteAgentConnectionError) as raised:
        async with A2AToolSource(url, connect_timeout=5):
            pass
    assert str(raised.value).startswith(
        f"cannot read the agent card of {url}: Network communication error fetching agent card"
    )


async def test_an_answer_past_max_response_bytes_is_an_error_result(sdk_server: str) -> None:
    url = f"{sdk_server}/huge"
    async with A2AToolSource(url, max_response_bytes=64 * 1024) as source:
        _, result = await call_remote(source, "anything")
    assert result.is_error
    assert str(result.output) == (
        f"tool 'a2a__broken' failed: RemoteAgentError: remote agent {url} sent more than "
        f"65536 bytes in one response from {url}/; the response was dropped (raise "
        "A2AToolSource(max_response_bytes=...) if such answers are expected)"
    )
    assert TASK_ID.search(str(result.output)) is None


async def test_a_call_in_doubt_is_settled_by_its_remote_task_when_that_ended(
    sdk_server: str,
) -> None:
    """``reconcile`` (the executor's, for a call a restart left in doubt) finds the
    call's task by its context (the call's idempotency key)."""
    url = f"{sdk_server}/plain"
    ran: dict[str, al.ToolOutput] = {}
    settled: dict[str, al.ToolOutput | None] = {}
    async with A2AToolSource(url) as source:
        [spec] = source.specs()
        tool = source.get(spec.name)
        assert tool is not None
        for text in ["echo ab", "fail", "never sent"]:
            session = str(uuid.uuid4())
            ctx = al.ToolContext(session, "t", "c1")
            request = al.ToolRequest("c1", spec.name, {"message": text}, session, "t")
            if text != "never sent":
                ran[text] = await tool.invoke(request, ctx)
            settled[text] = await tool.reconcile(request, ctx)
    assert settled == {"echo ab": ran["echo ab"], "fail": ran["fail"], "never sent": None}
    assert (ran["echo ab"].value, ran["fail"].is_error) == ("a\nb", True)
