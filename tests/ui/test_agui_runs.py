"""AG-UI runs against a real hypercorn on 127.0.0.1, on both anyio backends: a run that
parks on an approval, its resume (approve, edit, deny, cancel), text and reasoning, and
a resume after a server restart; every stream passes the ag-ui-validate validator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from agui_support import (
    TOKEN,
    Deploy,
    assert_conformant,
    build_agent,
    hypercorn_serving,
    post_run,
    resume,
    run_input,
    types,
)

from agentloop.serve import MemoryAuditLog
from agentloop.store import MemorySessionStore, SessionStatus, SqliteSessionStore
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

CONFIG = AguiConfig(token=TOKEN, identity="alice")

PARKED = [
    "RUN_STARTED",
    "STEP_STARTED",
    "STEP_FINISHED",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "STATE_SNAPSHOT",
    "RUN_FINISHED",
]
RESUMED = [
    "RUN_STARTED",
    "MESSAGES_SNAPSHOT",
    "STEP_STARTED",
    "STEP_FINISHED",
    "TOOL_CALL_RESULT",
    "STEP_STARTED",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "STEP_FINISHED",
    "STATE_SNAPSHOT",
    "RUN_FINISHED",
]


def interrupt_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    return list(outcome["interrupts"])


async def test_an_approval_ends_the_run_and_a_resume_runs_the_call() -> None:
    store = MemorySessionStore()
    tool = Deploy()
    audit = MemoryAuditLog()
    app = create_agui_app(build_agent(store, tool), config=CONFIG, audit=audit)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        parked = await post_run(client, run_input("t1", "r1", "deploy api"))
        assert types(parked) == PARKED
        assert parked[0] == {
            "type": "RUN_STARTED",
            "threadId": "t1",
            "runId": "r1",
            "protocolVersion": "1.0",
        }
        assert parked[6] == {
            "type": "TOOL_CALL_START",
            "toolCallId": "call-1",
            "toolCallName": "deploy",
            "parentMessageId": "agentloop-1",
        }
        assert parked[7]["delta"] == '{"service": "api"}'
        [interrupt] = interrupt_of(parked)
        assert interrupt["id"] == "approval:call-1"
        assert interrupt["reason"] == "tool_call"
        assert interrupt["toolCallId"] == "call-1"
        assert interrupt["message"] == "deploys need a person"
        assert interrupt["responseSchema"]["properties"]["editedArgs"]["required"] == ["service"]
        assert interrupt["responseSchema"]["required"] == ["approved"]
        assert parked[-2]["snapshot"] == {
            "agentloop": {
                "sessionId": "t1",
                "status": "awaiting_approval",
                "pendingInterrupts": ["approval:call-1"],
            }
        }
        assert tool.ran == []

        body = run_input(
            "t1", "r2", resume=resume(("approval:call-1", "resolved", {"approved": True}))
        )
        resumed = await post_run(client, body)
    assert types(resumed) == RESUMED
    assert resumed[1]["messages"] == [
        {"id": "u-r1-0", "role": "user", "content": "deploy api"},
        {
            "id": "agentloop-1",
            "role": "assistant",
            "content": "Deploying.",
            "toolCalls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "deploy", "arguments": '{"service": "api"}'},
                }
            ],
        },
    ]
    assert resumed[4] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": "agentloop-2",
        "toolCallId": "call-1",
        "content": "deployed api",
        "role": "tool",
    }
    assert "".join(e.get("delta", "") for e in resumed[6:10]) == "Result: deployed api"
    assert resumed[-1] == {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"}
    assert tool.ran == [{"service": "api"}]
    stored = await store.load("t1")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_INPUT
    assert stored.approvals["call-1"].approved is True
    [entry] = await audit.entries()
    assert (entry.call_id, entry.action.value, entry.decided_by) == ("call-1", "approve", "alice")
    assert_conformant(parked)
    assert_conformant(resumed)


@pytest.mark.parametrize(
    ("status", "payload", "ran", "result"),
    [
        (
            "resolved",
            {"approved": True, "editedArgs": {"service": "web"}},
            [{"service": "web"}],
            "deployed web",
        ),
        ("resolved", {"approved": False, "reason": "not on a Friday"}, [], "not on a Friday"),
        ("resolved", {"approved": False}, [], "approval denied"),
        ("cancelled", None, [], "the approval was cancelled in the client"),
    ],
    ids=["edited", "denied", "denied-without-reason", "cancelled"],
)
async def test_each_kind_of_answer_reaches_the_tool_or_the_model(
    status: str, payload: Any, ran: list[Any], result: str
) -> None:
    store = MemorySessionStore()
    tool = Deploy()
    app = create_agui_app(build_agent(store, tool), config=CONFIG)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        await post_run(client, run_input("t1", "r1", "deploy api"))
        body = run_input("t1", "r2", resume=resume(("approval:call-1", status, payload)))
        events = await post_run(client, body)
    [outcome] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result in outcome["content"]
    assert tool.ran == ran
    assert events[-1]["type"] == "RUN_FINISHED"
    assert_conformant(events)


async def test_two_pending_calls_are_two_interrupts_and_may_be_answered_one_at_a_time() -> None:
    store = MemorySessionStore()
    tool = Deploy()
    app = create_agui_app(build_agent(store, tool), config=CONFIG)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        parked = await post_run(client, run_input("t1", "r1", "deploy api and web"))
        assert [i["id"] for i in interrupt_of(parked)] == ["approval:call-1", "approval:call-2"]
        first = await post_run(
            client,
            run_input(
                "t1", "r2", resume=resume(("approval:call-2", "resolved", {"approved": True}))
            ),
        )
        assert [i["id"] for i in interrupt_of(first)] == ["approval:call-1"]
        second = await post_run(
            client,
            run_input(
                "t1", "r3", resume=resume(("approval:call-1", "resolved", {"approved": False}))
            ),
        )
    assert second[-1]["type"] == "RUN_FINISHED"
    assert "outcome" not in second[-1]

    def results(events: list[dict[str, Any]]) -> dict[str, str]:
        return {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}

    assert results(first) == {"call-2": "deployed web"}  # it ran while call-1 still waited
    assert results(second) == {"call-1": "approval denied by a decision recorded in the store"}
    assert tool.ran == [{"service": "web"}]
    for events in (parked, first, second):
        assert_conformant(events)


async def test_text_and_reasoning_stream_and_a_second_turn_continues_the_thread() -> None:
    store = MemorySessionStore()
    app = create_agui_app(build_agent(store), config=CONFIG)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        hello = await post_run(client, run_input("t1", "r1", "hello"))
        # The client sends the whole conversation again; only the new message is input.
        body = run_input("t1", "r2", "hello", "think")
        body["messages"][0]["id"] = "u-r1-0"
        body["messages"].insert(
            1, {"id": "agentloop-1", "role": "assistant", "content": "Hello there."}
        )
        thought = await post_run(client, body)
    assert types(hello) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert types(thought)[2:10] == [
        "STEP_FINISHED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    assert thought[5] == {
        "type": "REASONING_MESSAGE_CONTENT",
        "messageId": "agentloop-3-r0",
        "delta": "The user wants a thought.",
    }
    transcript = await store.transcript("t1")
    assert transcript is not None
    assert [i.text_content for i in transcript] == [
        "hello",
        "Hello there.",
        "think",
        "Thought about it.",
    ]
    assert_conformant(hello)
    assert_conformant(thought)


async def test_a_resume_after_a_restart_continues_from_the_store(tmp_path: Path) -> None:
    database = tmp_path / "sessions.db"
    async with SqliteSessionStore(database) as store:
        app = create_agui_app(build_agent(store), config=CONFIG)
        async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            parked = await post_run(client, run_input("t1", "r1", "deploy api"))
    assert interrupt_of(parked)[0]["id"] == "approval:call-1"
    tool = Deploy()
    async with SqliteSessionStore(database) as store:  # a new process's store and agent
        app = create_agui_app(build_agent(store, tool), config=CONFIG)
        async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            body = run_input(
                "t1", "r2", resume=resume(("approval:call-1", "resolved", {"approved": True}))
            )
            resumed = await post_run(client, body)
        assert types(resumed) == RESUMED
        assert tool.ran == [{"service": "api"}]
        stored = await store.load("t1")
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_INPUT
    assert_conformant(resumed)
