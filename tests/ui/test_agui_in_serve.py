"""``agentloop serve`` with the AG-UI endpoint (``create_app(..., agui=True)``, the
``--agui`` flag): ``POST /agui`` behind the inbox's guards, its approvals in the inbox
and its audit log, and the inbox and an AG-UI client answering one call: one wins."""

from __future__ import annotations

import argparse

import anyio
import httpx
import pytest
from agui_support import (
    HEADERS,
    TOKEN,
    Deploy,
    build_agent,
    hypercorn_serving,
    post_run,
    resume,
    run_input,
)

from agentloop import InvalidInputError
from agentloop.serve import MemoryAuditLog, ServeConfig, create_app
from agentloop.serve._cli import add_serve_parser, run_serve
from agentloop.store import MemorySessionStore, input_digest

pytestmark = pytest.mark.anyio

OPEN = "approval:call-1"


async def test_the_inbox_serves_ag_ui_runs_and_lists_their_approvals() -> None:
    store, tool, audit = MemorySessionStore(), Deploy(), MemoryAuditLog()
    config = ServeConfig(token=TOKEN, identity="alice", poll_interval=0.1)
    app = create_app(store, config=config, audit=audit, agent=build_agent(store, tool), agui=True)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        parked = await post_run(client, run_input("t1", "r1", "deploy api"), path="/agui")
        assert parked[-1]["outcome"]["interrupts"][0]["id"] == OPEN
        inbox = await client.get("/", headers=HEADERS)
        assert '<code class="call-id">call-1</code>' in inbox.text
        body = run_input("t1", "r2", resume=resume((OPEN, "resolved", {"approved": True})))
        resumed = await post_run(client, body, path="/agui")
        assert (await client.post("/agui", json=body)).status_code == 401
    assert resumed[-1]["type"] == "RUN_FINISHED"
    assert tool.ran == [{"service": "api"}]
    [entry] = await audit.entries()
    assert (entry.action.value, entry.decided_by) == ("approve", "alice")


async def test_a_call_the_inbox_answered_is_no_longer_open_to_ag_ui() -> None:
    store, tool = MemorySessionStore(), Deploy()
    config = ServeConfig(token=TOKEN, poll_interval=0.1)
    app = create_app(store, config=config, agent=build_agent(store, tool), agui=True)
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        await post_run(client, run_input("t1", "r1", "deploy api"), path="/agui")
        page = await client.get("/", headers=HEADERS)
        csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]
        decided = await client.post(
            "/api/decide",
            json={
                "session_id": "t1",
                "call_id": "call-1",
                "action": "deny",
                "digest": input_digest("deploy", {"service": "api"}),
                "reason": "the inbox said no",
            },
            headers={**HEADERS, "x-csrf-token": csrf},
        )
        assert decided.status_code == 200, decided.text
        for _ in range(200):  # the inbox's worker resumes the session
            stored = await store.load("t1")
            if stored is not None and stored.status.value == "awaiting_input":
                break
            await anyio.sleep(0.02)
        body = run_input("t1", "r2", resume=resume((OPEN, "resolved", {"approved": True})))
        late = await post_run(client, body, path="/agui")
    assert [e["type"] for e in late] == ["RUN_STARTED", "RUN_ERROR"]
    assert late[1]["code"] == "unknown_interrupt"
    assert tool.ran == []


def test_agui_needs_an_agent() -> None:
    with pytest.raises(ValueError, match="needs the agent that runs the threads"):
        create_app(MemorySessionStore(), config=ServeConfig(token=TOKEN), agui=True)


async def test_the_agui_flag_needs_agent() -> None:
    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers())
    arguments = parser.parse_args(["serve", "--store", "x.db", "--agui", "--token", TOKEN])
    with pytest.raises(InvalidInputError, match="--agui needs --agent"):
        await run_serve(arguments, print)
