"""The inbox's guards around the A2A server (in process): the card is public, every
other request needs the token; a foreign Host, an oversized body are refused; every
response carries the security headers; an agent without a store is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

import agentloop as al
import agentloop.store
import agentloop.testing
from agentloop.a2a import A2AConfig, create_a2a_app
from agentloop.store import MemorySessionStore

pytestmark = pytest.mark.anyio

TOKEN = "a2a-guard-token-of-at-least-16-characters"
CARD = "/.well-known/agent-card.json"


def agent(store: al.store.SessionStore | None) -> al.Agent:
    builder = al.Agent.builder().model(al.testing.ScriptedModel(["hi"]))
    return (builder.store(store) if store is not None else builder).build()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    config = A2AConfig(url="http://127.0.0.1:8000/", token=TOKEN, name="guarded")
    app = create_a2a_app(agent(MemorySessionStore()), config=config)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        yield http


async def test_the_card_is_public_and_names_the_bearer_scheme(client: httpx.AsyncClient) -> None:
    response = await client.get(CARD)
    assert response.status_code == 200
    card = response.json()
    assert card["name"] == "guarded"
    assert card["supportedInterfaces"] == [
        {"url": "http://127.0.0.1:8000/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_everything_else_needs_the_token(client: httpx.AsyncClient) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    missing = await client.post("/", json=call)
    assert missing.status_code == 401
    assert missing.headers["x-frame-options"] == "DENY"
    bearer = {"authorization": f"Bearer {TOKEN}", "a2a-version": "1.0"}
    answered = await client.post("/", json=call, headers=bearer)
    assert answered.status_code == 200
    assert answered.json()["error"]["message"].lower().startswith("task not found")


async def test_a_foreign_host_and_a_big_body_are_refused(client: httpx.AsyncClient) -> None:
    assert (await client.get(CARD, headers={"host": "evil.example"})).status_code == 421
    big = await client.post(
        "/",
        content=b" " * (1024 * 1024 + 1),
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
    )
    assert big.status_code == 413


def test_an_agent_without_a_store_is_refused() -> None:
    with pytest.raises(ValueError, match="needs an agent with a session store"):
        create_a2a_app(agent(None), config=A2AConfig(url="http://127.0.0.1:1/"))


def test_a_config_without_an_http_url_is_refused() -> None:
    with pytest.raises(ValueError, match="url must be the server's public http"):
        A2AConfig(url="127.0.0.1:8000")
