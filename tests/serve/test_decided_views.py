"""What the pages say about parked and decided sessions, over HTTP on both anyio backends."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx
import pytest
from markupsafe import escape
from serve_support import TOKEN, build_agent, park_async

import agentloop as al
import agentloop.model
import agentloop.testing
from agentloop.serve import MemoryAuditLog, ServeConfig, Worker, create_app
from agentloop.store import MemorySessionStore, input_digest

pytestmark = pytest.mark.anyio

BEARER = {"authorization": f"Bearer {TOKEN}"}
EDITED = {"path": "/reports/final.txt"}


async def pages(store: MemorySessionStore, audit: MemoryAuditLog) -> dict[str, str]:
    app = create_app(store, config=ServeConfig(token=TOKEN, worker=False), audit=audit)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        return {
            path: (await c.get(path, headers=BEARER)).text
            for path in ("/partials/inbox", "/partials/sessions/s1")
        }


async def decide(store: MemorySessionStore, audit: MemoryAuditLog, **body: Any) -> Any:
    app = create_app(store, config=ServeConfig(token=TOKEN, worker=False), audit=audit)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        page = await c.get("/", headers=BEARER)
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        assert csrf is not None
        headers = {**BEARER, "x-csrf-token": csrf.group(1)}
        return (await c.post("/api/decide", json=body, headers=headers)).json()


def waiting(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<span class="waiting-line">([^<]*)', page)]


async def test_a_parked_session_says_what_it_waits_for_until_it_is_resumed(
    anyio_backend: str,
) -> None:
    store, audit = MemorySessionStore(), MemoryAuditLog()
    await park_async(store, "s1", "/reports/q3.txt")
    shown = await pages(store, audit)
    assert waiting(shown["/partials/sessions/s1"]) == [
        "waiting for approval of call call-1 (publish_report)"
    ]
    assert '<span class="outcome">waiting for approval</span>' in shown["/partials/sessions/s1"]
    assert '<span class="count" id="pending-count">1</span>' in shown["/partials/inbox"]

    answer = await decide(
        store,
        audit,
        session_id="s1",
        call_id="call-1",
        digest=input_digest("publish_report", {"path": "/reports/q3.txt"}),
        action="approve_with",
        input=json.dumps(EDITED),
    )
    assert answer["message"] == (
        "Approved with edited arguments by operator; waiting for an external worker to "
        "resume the session."
    )
    shown = await pages(store, audit)
    session = shown["/partials/sessions/s1"]
    assert waiting(session) == [
        "call call-1 (publish_report) approved with edited arguments; waiting for a worker "
        "to resume the session"
    ]
    model = escape(json.dumps({"path": "/reports/q3.txt"}, indent=2))
    edited = escape(json.dumps(EDITED, indent=2))
    assert f'<pre class="arguments">{model}</pre>' in session
    assert f'<pre class="edited-arguments">{edited}</pre>' in session
    inbox = shown["/partials/inbox"]
    assert '<span class="count zero" id="pending-count">0</span>' in inbox
    assert "Nothing waits for an approval." in inbox
    assert '<li class="card' not in inbox
    assert '<td class="status">waiting for a worker to resume the session</td>' in inbox

    assert await Worker(store, build_agent(store)).advance("s1") is True
    shown = await pages(store, audit)
    session = shown["/partials/sessions/s1"]
    assert waiting(session) == []
    assert '<span class="outcome">ok</span>' in session
    assert f'<pre class="edited-arguments">{edited}</pre>' in session
    assert f'<pre class="arguments">{model}</pre>' in session
    assert '<td class="status">awaiting input</td>' in shown["/partials/inbox"]


def two_calls(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        return al.testing.tool_calls(
            al.testing.call("publish_report", {"path": "/a"}, id="call-a"),
            al.testing.call("publish_report", {"path": "/b"}, id="call-b"),
        )
    return "Done."


async def test_one_decision_of_two_leaves_the_other_waiting(anyio_backend: str) -> None:
    store, audit = MemorySessionStore(), MemoryAuditLog()
    agent = build_agent(store)
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(two_calls))
        .add_tool_source(agent.tool_sources[0])
        .permissions(agent.permissions)
        .store(store)
        .build()
    )
    driver = await agent.start("s1")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "publish both")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    answer = await decide(
        store,
        audit,
        session_id="s1",
        call_id="call-a",
        digest=input_digest("publish_report", {"path": "/a"}),
        action="deny",
        reason="not /a",
    )
    assert answer["ok"] is True
    shown = await pages(store, audit)
    assert waiting(shown["/partials/sessions/s1"]) == [
        "call call-a (publish_report) denied; waiting for a worker to resume the session",
        "waiting for approval of call call-b (publish_report)",
    ]
    inbox = shown["/partials/inbox"]
    assert '<span class="count" id="pending-count">1</span>' in inbox
    assert inbox.count('<li class="card') == 1
    assert '<td class="status">waiting for approval of call call-b</td>' in inbox
