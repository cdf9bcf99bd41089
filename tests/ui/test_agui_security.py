"""The inbox's guards hold for the AG-UI endpoint: the token, the Host, the Origin,
the content type, the body's size and depth, and the security headers; a request the
guards refuse reaches no run (the store stays empty)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from agui_support import HEADERS, TOKEN, build_agent, post_run, run_input

from agentloop.store import MemorySessionStore
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

FRONTEND = "http://localhost:3000"


@pytest.fixture
async def guarded() -> AsyncIterator[tuple[httpx.AsyncClient, MemorySessionStore]]:
    store = MemorySessionStore()
    config = AguiConfig(token=TOKEN, allowed_origins=(FRONTEND,))
    app = create_agui_app(build_agent(store), config=config)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        yield client, store


async def test_a_run_needs_the_token(guarded: tuple[httpx.AsyncClient, MemorySessionStore]) -> None:
    client, store = guarded
    body = run_input("t1", "r1", "hello")
    missing = await client.post("/", json=body)
    wrong = await client.post("/", json=body, headers={"authorization": "Bearer " + "x" * 40})
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert "needs its access token" in missing.text
    assert await store.list_sessions() == []


@pytest.mark.parametrize(
    ("headers", "content", "status", "error"),
    [
        (
            {"host": "evil.example:8000"},
            b"{}",
            421,
            None,
        ),
        (
            {"origin": "http://evil.example"},
            json.dumps(run_input("t1", "r1", "hello")).encode(),
            403,
            "refused: cross-origin request from http://evil.example; allow it with "
            "AguiConfig(allowed_origins=(...)) or serve the frontend from this origin",
        ),
        (
            {"content-type": "text/plain"},
            json.dumps(run_input("t1", "r1", "hello")).encode(),
            415,
            "refused: a run is sent as application/json, got text/plain",
        ),
        ({}, b"{" * 40 + b"}" * 40, 400, None),
        ({}, b"not json", 400, "refused: the body is not JSON; send a RunAgentInput"),
        (
            {},
            b'{"threadId": "t1"}',
            422,
            "refused: the body is not a RunAgentInput: runId: Field required; "
            "messages: Field required",
        ),
    ],
    ids=["host", "origin", "content-type", "too-deep", "not-json", "not-a-run"],
)
async def test_a_refused_request_starts_no_run(
    guarded: tuple[httpx.AsyncClient, MemorySessionStore],
    headers: dict[str, str],
    content: bytes,
    status: int,
    error: str | None,
) -> None:
    client, store = guarded
    sent = {"content-type": "application/json", **HEADERS, **headers}
    response = await client.post("/", content=content, headers=sent)
    assert response.status_code == status
    if error is not None:
        assert response.json() == {"ok": False, "error": error, "status": status}
    assert response.headers["x-frame-options"] == "DENY"
    assert await store.list_sessions() == []


async def test_a_body_over_the_limit_is_refused_before_it_is_read(
    guarded: tuple[httpx.AsyncClient, MemorySessionStore],
) -> None:
    client, store = guarded
    big = b" " * (1024 * 1024 + 1)
    sent = {"content-type": "application/json", **HEADERS}
    response = await client.post("/", content=big, headers=sent)
    assert response.status_code == 413
    assert await store.list_sessions() == []


async def test_an_allowed_origin_gets_cors_and_its_preflight_needs_no_token(
    guarded: tuple[httpx.AsyncClient, MemorySessionStore],
) -> None:
    client, _ = guarded
    preflight = await client.options(
        "/",
        headers={
            "origin": FRONTEND,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == FRONTEND
    events = await post_run(client, run_input("t1", "r1", "hello"))
    assert events[-1]["type"] == "RUN_FINISHED"
    cross = await client.post(
        "/", json=run_input("t1", "r2", "hi"), headers={**HEADERS, "origin": FRONTEND}
    )
    assert cross.headers["access-control-allow-origin"] == FRONTEND
    assert cross.headers["content-security-policy"].startswith("default-src 'none'")


async def test_the_endpoint_takes_post_only(
    guarded: tuple[httpx.AsyncClient, MemorySessionStore],
) -> None:
    client, _ = guarded
    assert (await client.get("/", headers=HEADERS)).status_code == 405
