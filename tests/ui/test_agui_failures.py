"""Runs that fail or are cut short: a failed model call ends in RUN_ERROR with the stream
still valid, a client that disconnects cancels the run and frees the thread, and random
interrupt ids or new messages on a thread with an open interrupt change nothing."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from agui_support import (
    HEADERS,
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

CONFIG = AguiConfig(token=TOKEN)


async def test_a_failed_model_call_ends_in_run_error_and_closes_what_it_opened() -> None:
    store = MemorySessionStore()
    app = create_agui_app(build_agent(store), config=CONFIG)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        events = await post_run(client, run_input("t1", "r1", "fail now"))
        assert types(events) == [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "STATE_SNAPSHOT",
            "RUN_ERROR",
        ]
        assert events[-1]["code"] == "model_error:retryable"
        assert "503: overloaded" in events[-1]["message"]
        assert_conformant(events)
        again = await post_run(client, run_input("t1", "r2", "hello"))
    assert again[-1]["type"] == "RUN_FINISHED"


async def test_a_client_that_disconnects_cancels_the_run_and_frees_the_thread() -> None:
    store = MemorySessionStore()
    tool = Deploy()
    tool.gate = anyio.Event()  # never set: the approved call hangs until cancelled
    app = create_agui_app(build_agent(store, tool), config=CONFIG)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        await post_run(client, run_input("t1", "r1", "deploy api"))
        answer = resume(("approval:call-1", "resolved", {"approved": True}))
        body = run_input("t1", "r2", resume=answer)
        async with client.stream("POST", "/", json=body, headers=HEADERS) as response:
            async for line in response.aiter_lines():
                if '"stepName":"tool deploy call-1"' in line:
                    break  # the call runs: leave
        for _ in range(200):
            stored = await store.load("t1")
            if stored is not None and stored.status is SessionStatus.AWAITING_INPUT:
                break
            await anyio.sleep(0.02)
        after = await post_run(client, run_input("t1", "r3", "hello"))
    assert after[-1]["type"] == "RUN_FINISHED"
    transcript = await store.transcript("t1")
    assert transcript is not None
    [result] = [r for item in transcript for r in item.tool_results()]
    assert result.is_error
    assert "cancelled" in str(result.output)
    assert tool.ran == []


async def parked(client: httpx.AsyncClient) -> None:
    events = await post_run(client, run_input("t1", "r1", "deploy api"))
    assert events[-1]["outcome"]["type"] == "interrupt"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    interrupt=st.text(min_size=1, max_size=20).filter(lambda s: s != "approval:call-1"),
    message=st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != ""),
)
async def test_random_interrupt_ids_and_new_messages_change_nothing(
    interrupt: str, message: str
) -> None:
    store = MemorySessionStore()
    app = create_agui_app(build_agent(store), config=CONFIG)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        await parked(client)
        before = await store.load("t1")
        unknown = run_input("t1", "r2", resume=resume((interrupt, "resolved", {"approved": True})))
        refused: list[list[dict[str, Any]]] = [await post_run(client, unknown)]
        refused.append(await post_run(client, run_input("t1", "r3", message)))
        after = await store.load("t1")
    assert [types(events) for events in refused] == [["RUN_STARTED", "RUN_ERROR"]] * 2
    assert [events[1]["code"] for events in refused] == ["unknown_interrupt", "interrupt_open"]
    assert before is not None
    assert after is not None
    assert (after.version, after.checkpoint, dict(after.approvals)) == (
        before.version,
        before.checkpoint,
        {},
    )
