"""Live updates (SSE) on both anyio backends: the app served by hypercorn on asyncio and trio.

``agentloop serve`` runs uvicorn (asyncio only; the browser tests cover it). The
app itself is anyio code, and so is sse-starlette's streaming: here a real
hypercorn server runs it on the test's own backend, with the lifespan's worker
and store poller, and a real HTTP client reads the event stream.
"""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import sniffio
from httpx_sse import aconnect_sse
from hypercorn.config import Config
from serve_support import TOKEN, build_agent, park_async

from agentloop.serve import ServeConfig, SqliteAuditLog, create_app
from agentloop.store import SessionStatus, SqliteSessionStore, input_digest

pytestmark = pytest.mark.anyio

HEADERS = {"authorization": f"Bearer {TOKEN}"}


@asynccontextmanager
async def hypercorn_serving(app: Any) -> AsyncIterator[str]:
    """``app`` on a real hypercorn on 127.0.0.1, on the running backend; yields its URL."""
    if sniffio.current_async_library() == "trio":
        from hypercorn.trio import serve
    else:
        from hypercorn.asyncio import serve
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]  # hypercorn owns (and closes) the socket
    config.graceful_timeout = 2
    config.loglevel = "WARNING"
    stop = anyio.Event()
    base = f"http://127.0.0.1:{port}"
    async with anyio.create_task_group() as group:
        group.start_soon(partial(serve, app, config, shutdown_trigger=stop.wait))
        async with httpx.AsyncClient(base_url=base, timeout=5) as probe:
            for _ in range(200):
                try:
                    if (await probe.get("/")).status_code == 401:
                        break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
            else:
                raise AssertionError("hypercorn did not answer within 200 tries")
        try:
            yield base
        finally:
            stop.set()


async def test_live_updates_arrive_as_decisions_and_the_worker_move_sessions(
    tmp_path: Path, anyio_backend: str
) -> None:
    database = tmp_path / "sessions.db"
    async with SqliteSessionStore(database) as store:
        await park_async(store, "s1", "/reports/q3.txt")
        config = ServeConfig(token=TOKEN, identity="alice", poll_interval=0.1)
        app = create_app(
            store, config=config, audit=SqliteAuditLog(database), agent=build_agent(store)
        )
        async with (
            hypercorn_serving(app) as base,
            httpx.AsyncClient(base_url=base, headers=HEADERS, timeout=30) as client,
        ):
            page = await client.get("/")
            found = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
            assert found is not None
            async with aconnect_sse(client, "GET", "/events") as source:
                assert source.response.headers["content-type"].startswith("text/event-stream")
                assert source.response.headers["x-frame-options"] == "DENY"
                csp = source.response.headers["content-security-policy"]
                assert "frame-ancestors 'none'" in csp
                events = source.aiter_sse()
                hello = await anext(events)
                assert (hello.event, hello.data) == ("hello", "0")

                # A decision in this server: a "changed" event, then the worker runs the
                # session to its end, and more "changed" events follow.
                response = await client.post(
                    "/api/decide",
                    json={
                        "session_id": "s1",
                        "call_id": "call-1",
                        "digest": input_digest("publish_report", {"path": "/reports/q3.txt"}),
                        "action": "approve",
                    },
                    headers={"x-csrf-token": found.group(1)},
                )
                assert response.json()["ok"] is True
                serials = []
                with anyio.fail_after(60):  # a bound for a loaded machine, not a timing check
                    while True:
                        event = await anext(events)
                        assert event.event == "changed"
                        serials.append(int(event.data))
                        stored = await store.load("s1")
                        assert stored is not None
                        if stored.status is SessionStatus.AWAITING_INPUT:
                            break
                assert serials == sorted(serials)
                assert serials[0] >= 1
                items = await store.transcript("s1")
                assert items is not None
                assert items[-1].text_content == "Done: published /reports/q3.txt"

                # A session parked by another writer of the store: the poller notices it.
                async with SqliteSessionStore(database) as other:
                    await park_async(other, "s2", "/reports/q4.txt")
                with anyio.fail_after(60):
                    while True:
                        event = await anext(events)
                        assert event.event == "changed"
                        inbox = await client.get("/partials/inbox")
                        if 'data-session="s2"' in inbox.text:
                            break
                assert int(event.data) > serials[-1]
            # The stream ended when the client left; the server keeps serving.
            assert (await client.get("/partials/inbox")).status_code == 200


async def test_the_server_stops_while_a_page_listens(tmp_path: Path, anyio_backend: str) -> None:
    """An open event stream does not keep the server running: stopping it ends the stream.

    (sse-starlette's own shutdown drain only knows uvicorn; under hypercorn the
    server's graceful timeout ends the stream.)
    """
    ended: list[str] = []

    async def listen(base: str, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with httpx.AsyncClient(base_url=base, headers=HEADERS, timeout=30) as client:
            try:
                async with aconnect_sse(client, "GET", "/events") as source:
                    events = source.aiter_sse()
                    assert (await anext(events)).event == "hello"
                    task_status.started()
                    async for event in events:
                        ended.append(f"event {event.event}")
                ended.append("stream closed")
            except httpx.RemoteProtocolError:
                ended.append("stream cut")

    async with SqliteSessionStore(tmp_path / "s.db") as store:
        app = create_app(store, config=ServeConfig(token=TOKEN, identity="alice"))
        with anyio.fail_after(60):  # a bound for a loaded machine, not a timing check
            # The server stops first (leaving hypercorn_serving), then the listener ends.
            async with anyio.create_task_group() as group, hypercorn_serving(app) as base:
                await group.start(listen, base)
                assert ended == []
    assert ended in (["stream closed"], ["stream cut"])
