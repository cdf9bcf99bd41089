"""The inbox settles, fails or runs again a call in doubt over HTTP (no browser): the card,
the guards of decisions, single use under the session's lease, the worker going on; and
the stored status ``awaiting_resolution``, with old rows moved to it."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import httpx
import pytest
from in_doubt_agents import Both, Pay, both_agent, park_in_doubt, pay_agent
from serve_support import TOKEN

import agentloop as al
import agentloop.host
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.serve import MemoryAuditLog, ResolutionEntry, ServeConfig, Worker, create_app
from agentloop.store import PostgresSessionStore, SessionStatus, SqliteSessionStore
from agentloop.tools._tool import idempotency_key

pytestmark = pytest.mark.anyio

WHEN = datetime(2000, 1, 1, tzinfo=UTC)


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


ORIGIN = "http://127.0.0.1:8765"
KEY = idempotency_key("s1", "call-pay")


class DoubtInbox:
    def __init__(self, store: SqliteSessionStore, client: httpx.AsyncClient, tool: Pay) -> None:
        self.store = store
        self.client = client
        self.tool = tool
        self.csrf = ""
        self.ref = ""
        self.audit = MemoryAuditLog()

    async def sign_in(self) -> str:
        assert (await self.client.get(f"/?token={TOKEN}")).status_code == 303
        page = (await self.client.get("/")).text
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page)
        assert csrf is not None
        self.csrf = csrf.group(1)
        ref = re.search(
            r'class="doubt-card" data-session="s1" data-call-ref="(ref-[0-9a-f]+)"', page
        )
        self.ref = ref.group(1) if ref else ""
        return page

    async def resolve(self, headers: dict[str, str] | None = None, **body: Any) -> httpx.Response:
        body = {"session_id": "s1", "call_ref": self.ref, "reruns": 0, **body}
        return await self.client.post(
            "/api/resolve",
            json=body,
            headers=headers or {"x-csrf-token": self.csrf, "origin": ORIGIN},
        )


def inbox_app(store: Any, agent: Any, *, audit: MemoryAuditLog | None = None) -> Any:
    config = ServeConfig(token=TOKEN, identity="alice", worker=False)
    return create_app(store, config=config, audit=audit or MemoryAuditLog(), agent=agent)


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[DoubtInbox]:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await park_in_doubt(store, "s1")
        tool = Pay()
        audit = MemoryAuditLog()
        transport = httpx.ASGITransport(app=inbox_app(store, pay_agent(store, tool), audit=audit))
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            inbox = DoubtInbox(store, client, tool)
            inbox.audit = audit
            yield inbox


async def finish(store: Any) -> list[str]:
    """An external worker goes on from the resolution; the transcript's texts."""
    worker = al.host.SessionWorker(store=store, agent=pay_agent(store), owner="w1", ttl=30)
    advanced = await worker.advance("s1")
    assert isinstance(advanced.step, al.Finished)
    items = await store.transcript("s1")
    return [item.text_content for item in items]


async def test_the_card_shows_the_call_its_input_and_its_key(inbox: DoubtInbox) -> None:
    page = await inbox.sign_in()
    assert inbox.ref.startswith("ref-")
    assert 'id="doubt-count">1<' in page
    for fragment in (
        '<span class="tool-name">pay</span> <code class="call-id">call-pay</code>',
        '<p class="doubt-reason">In doubt: it started before the session was restored and '
        "left no result, and its tool could not tell what it came to (no reconcile, or "
        "reconcile returned None).</p>",
        f'<code class="idempotency-key">{KEY}</code>',
        '<pre class="arguments">{\n  &#34;amount&#34;: 42\n}</pre>',
        '<button type="button" class="run-again">Run it again</button>',
    ):
        assert fragment in page, fragment
    stored = await inbox.store.load("s1")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_RESOLUTION
    [row] = await inbox.store.sessions_awaiting_resolution()
    assert (row.session_id, row.status) == ("s1", SessionStatus.AWAITING_RESOLUTION)
    assert await inbox.store.sessions_ready() == []
    assert await inbox.store.sessions_awaiting_approval() == []


@pytest.mark.parametrize(
    ("body", "message", "last"),
    [
        (
            {"resolution": "settle", "result": "paid 42 (receipt 7)"},
            "Settled by alice; waiting for an external worker to resume the session.",
            "done: paid 42 (receipt 7)",
        ),
        (
            {"resolution": "fail", "reason": "the bank has no such payment"},
            "Marked failed by alice; waiting for an external worker to resume the session.",
            "error result: failed: the bank has no such payment",
        ),
        (
            {"resolution": "run_again"},
            "Ran again by alice; waiting for an external worker to resume the session.",
            f"done: paid 42 again ({KEY})",
        ),
    ],
)
async def test_each_resolution_is_recorded_once_and_the_session_goes_on(
    inbox: DoubtInbox, body: dict[str, Any], message: str, last: str
) -> None:
    await inbox.sign_in()
    response = await inbox.resolve(**body)
    assert (response.status_code, response.json()) == (200, {"ok": True, "message": message})
    assert inbox.tool.runs == (1 if body["resolution"] == "run_again" else 0)
    value = body.get("result", body.get("reason"))
    [entry] = await inbox.audit.entries()
    assert isinstance(entry, ResolutionEntry)
    assert attrs.evolve(entry, decided_at=WHEN) == ResolutionEntry(
        session_id="s1",
        call_id="call-pay",
        tool_name="pay",
        resolution=body["resolution"],
        value_digest=digest(value),
        value_size=len(json.dumps(value)),
        decided_by="alice",
        decided_at=WHEN,
        value=value,
    )
    audit_page = (await inbox.client.get("/audit")).text
    shown = f"<pre>{value}</pre>" if value is not None else "<td></td>"
    assert (
        f'<td class="action">in doubt: {body["resolution"].replace("_", " ")}</td>\n  '
        f"<td>{'<pre>' + value + '</pre>' if value is not None else ''}</td>"
    ) in audit_page, shown
    stored = await inbox.store.load("s1")
    assert stored is not None
    assert stored.status is SessionStatus.READY
    again = await inbox.resolve(**body)
    assert (again.status_code, again.json()["error"]) == (
        409,
        "session 's1' moved on: the call this page showed is no longer in doubt (the "
        "session is ready); nothing was changed",
    )
    assert "doubt-card" not in (await inbox.client.get("/")).text
    texts = await finish(inbox.store)
    assert texts[-1] == last
    assert inbox.tool.runs == (1 if body["resolution"] == "run_again" else 0)


async def test_bad_resolutions_are_refused_clearly_and_change_nothing(inbox: DoubtInbox) -> None:
    await inbox.sign_in()
    before = await inbox.store.load("s1")
    cases: list[tuple[dict[str, Any], int, str]] = [
        (
            {"resolution": "settle"},
            422,
            "settle needs the call's result (what the tool returned): send result as "
            "non-empty text",
        ),
        (
            {"resolution": "settle", "result": "   "},
            422,
            "settle needs the call's result (what the tool returned): send result as "
            "non-empty text",
        ),
        (
            {"resolution": "fail", "reason": 3},
            422,
            "fail needs a reason: send reason as non-empty text",
        ),
        (
            {"resolution": "fail", "reason": "x" * 2001},
            422,
            "the reason is longer than 2000 characters",
        ),
        (
            {"resolution": "forget"},
            400,
            "unknown resolution 'forget'; expected settle, fail or run_again",
        ),
        (
            {"resolution": "run_again", "reruns": "0"},
            400,
            "expected a JSON object with session_id, call_ref and resolution strings and "
            "reruns, an integer (and result, to settle; reason, to fail)",
        ),
        (
            {"resolution": "run_again", "reruns": True},
            400,
            "expected a JSON object with session_id, call_ref and resolution strings and "
            "reruns, an integer (and result, to settle; reason, to fail)",
        ),
        (
            {"resolution": "run_again", "reruns": 1},
            409,
            "call 'call-pay' was run again since this page was loaded; reload and decide "
            "again; nothing was changed",
        ),
        (
            {"resolution": "run_again", "call_ref": "ref-" + "0" * 32},
            409,
            "session 's1' moved on: the call this page showed is no longer in doubt (the "
            "session is awaiting_resolution); nothing was changed",
        ),
        ({"resolution": "run_again", "session_id": "gone"}, 404, "session 'gone' no longer exists"),
    ]
    for body, status, message in cases:
        response = await inbox.resolve(**body)
        assert (response.status_code, response.json()) == (
            status,
            {"ok": False, "error": message, "status": status},
        ), body
    lone = await inbox.client.post(
        "/api/resolve",
        content=b'{"session_id": "s1", "call_ref": "' + inbox.ref.encode() + b'", "reruns": 0, '
        b'"resolution": "settle", "result": "paid \\ud800"}',
        headers={"x-csrf-token": inbox.csrf, "origin": ORIGIN, "content-type": "application/json"},
    )
    assert (lone.status_code, lone.json()["error"]) == (422, "the result is not valid Unicode text")
    refusals = [
        ({"origin": ORIGIN}, 403, "refused: missing or wrong CSRF token; reload the page"),
        (
            {"x-csrf-token": inbox.csrf, "origin": "http://evil.example"},
            403,
            "refused: cross-origin request from http://evil.example",
        ),
    ]
    for headers, status, message in refusals:
        response = await inbox.resolve(headers, resolution="run_again")
        assert (response.status_code, response.json()["error"]) == (status, message)
    huge = await inbox.client.post(
        "/api/resolve",
        content=b'{"x": "' + b"a" * (1024 * 1024) + b'"}',
        headers={"x-csrf-token": inbox.csrf, "origin": ORIGIN, "content-type": "application/json"},
    )
    assert huge.status_code == 413
    anonymous = httpx.AsyncClient(transport=inbox.client._transport, base_url=ORIGIN)
    async with anonymous:
        assert (await anonymous.post("/api/resolve", json={})).status_code == 401
    assert await inbox.store.load("s1") == before
    assert inbox.tool.runs == 0
    assert await inbox.audit.entries() == []


async def test_without_an_agent_that_asks_the_inbox_refuses_to_resolve(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await park_in_doubt(store, "s1")
        before = await store.load("s1")
        plain = attrs.evolve(pay_agent(store), ask_in_doubt=False)
        expected = {
            None: "this inbox has no agent to resume the session with; start agentloop serve "
            "with --agent (an agent built with .ask_in_doubt())",
            "plain": "the inbox's agent does not ask about calls in doubt, so resuming would "
            "answer the call in doubt without you; build it with .ask_in_doubt(); nothing was "
            "changed",
        }
        for name, agent in ((None, None), ("plain", plain)):
            transport = httpx.ASGITransport(app=inbox_app(store, agent))
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                inbox = DoubtInbox(store, client, Pay())
                await inbox.sign_in()
                response = await inbox.resolve(resolution="run_again")
                assert (response.status_code, response.json()["error"]) == (501, expected[name])
        assert await store.load("s1") == before


async def test_a_session_leased_by_a_worker_is_refused_as_busy(inbox: DoubtInbox) -> None:
    await inbox.sign_in()
    lease = await inbox.store.acquire("s1", "worker-7", 60)
    response = await inbox.resolve(resolution="fail", reason="no")
    assert (response.status_code, response.json()["error"]) == (
        409,
        "session 's1' is being advanced by worker-7; nothing was changed; reload and decide again",
    )
    assert await inbox.audit.entries() == []
    await inbox.store.release(lease)
    assert (await inbox.resolve(resolution="fail", reason="no")).status_code == 200
    assert [e.resolution for e in await inbox.audit.entries()] == ["fail"]  # type: ignore[union-attr]


async def test_the_in_process_worker_goes_on_after_a_resolution(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await park_in_doubt(store, "s1")
        changed = anyio.Event()

        async def on_change() -> None:
            changed.set()

        app = inbox_app(store, pay_agent(store))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            inbox = DoubtInbox(store, client, Pay())
            await inbox.sign_in()
            worker = Worker(store, pay_agent(store), poll_interval=0.05, on_change=on_change)
            async with anyio.create_task_group() as group:
                group.start_soon(worker.run)
                response = await inbox.resolve(resolution="settle", result="paid by hand")
                assert response.status_code == 200
                worker.take("s1")
                with anyio.fail_after(30):
                    await changed.wait()
                group.cancel_scope.cancel()
        items = await store.transcript("s1")
        assert items is not None
        assert items[-1].text_content == "done: paid by hand"


async def test_a_schema_7_sqlite_head_resting_on_a_call_in_doubt_moves_to_its_status(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await park_in_doubt(store, "s1")
    # As schema 7 wrote it: status awaiting_input.
    connection = sqlite3.connect(path)
    with connection:
        [(meta,)] = connection.execute("SELECT meta FROM heads WHERE session_id = 's1'")
        old = {**json.loads(meta), "status": "awaiting_input", "pending": []}
        connection.execute("UPDATE heads SET meta = ?", (json.dumps(old),))
        connection.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    connection.close()
    async with SqliteSessionStore(path) as store:
        [row] = await store.sessions_awaiting_resolution()
        assert (row.session_id, row.status) == ("s1", SessionStatus.AWAITING_RESOLUTION)
    connection = sqlite3.connect(path)
    assert connection.execute("SELECT value FROM meta").fetchall() == [("8",)]
    connection.close()


async def test_a_migration_5_postgres_head_resting_on_a_call_in_doubt_moves_to_its_status(
    postgres_uri: str, anyio_backend: str
) -> None:
    import psycopg

    session_id = f"pg-{anyio_backend}"
    async with PostgresSessionStore(postgres_uri) as store:
        await park_in_doubt(store, session_id)
    # As migration 5 wrote it: status awaiting_input.
    with psycopg.connect(postgres_uri, autocommit=True) as connection:
        [(meta,)] = connection.execute(
            "SELECT meta FROM agentloop_heads WHERE session_id = %s", (session_id,)
        ).fetchall()
        old = {**json.loads(meta), "status": "awaiting_input", "pending": []}
        connection.execute(
            "UPDATE agentloop_heads SET meta = %s WHERE session_id = %s",
            (json.dumps(old), session_id),
        )
        connection.execute("DELETE FROM agentloop_schema WHERE version = 6")
    async with PostgresSessionStore(postgres_uri) as store:
        assert await store.schema_version() == 6
        rows = await store.sessions_awaiting_resolution()
        assert (session_id, SessionStatus.AWAITING_RESOLUTION) in [
            (row.session_id, row.status) for row in rows
        ]


async def test_two_calls_in_doubt_of_one_round_are_resolved_one_by_one(tmp_path: Path) -> None:
    """The first resolution is saved while the round waits for the second; the model sees
    the round only once both are resolved."""
    tool = Both()
    calls = al.testing.tool_calls(
        al.testing.call("pay", {}, id="a"), al.testing.call("pay", {}, id="b")
    )
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        async with al.tasks.AsyncTaskManager() as manager:
            model = al.testing.ScriptedModel([calls])
            driver = await both_agent(tool, store, model, manager).start("s1")
            with anyio.CancelScope() as scope:  # the crash, once both calls run
                async with anyio.create_task_group() as group:
                    group.start_soon(driver.next)
                    while len(tool.runs) < 2:
                        await anyio.lowlevel.checkpoint()
                    scope.cancel()
        tool.block = False
        async with al.tasks.AsyncTaskManager() as manager:
            model = al.testing.ScriptedModel(["ok"])
            agent = both_agent(tool, store, model, manager)
            worker = al.host.SessionWorker(store=store, agent=agent, owner="w", ttl=30)
            assert isinstance((await worker.advance("s1")).step, al.CallInDoubt)
            transport = httpx.ASGITransport(app=inbox_app(store, agent))
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                inbox = DoubtInbox(store, client, Pay())
                page = await inbox.sign_in()
                assert 'id="doubt-count">2<' in page
                first = await inbox.resolve(resolution="settle", result="paid a (checked)")
                assert first.json() == {
                    "ok": True,
                    "message": "Settled by alice; call b of the same round is in doubt too.",
                }
                stored = await store.load("s1")
                assert stored is not None
                assert stored.status is SessionStatus.AWAITING_RESOLUTION
                assert model.requests == []
                page = await inbox.sign_in()
                assert 'id="doubt-count">1<' in page
                second = await inbox.resolve(resolution="run_again")
                assert second.json() == {
                    "ok": True,
                    "message": "Ran again by alice; waiting for an external worker to resume "
                    "the session.",
                }
            assert isinstance((await worker.advance("s1")).step, al.Finished)
    assert sorted(tool.runs) == ["a", "b", "b"]
    results = [
        (part.call_id, part.output)
        for item in model.last_request.transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
    assert results == [("a", "paid a (checked)"), ("b", "paid b")]


class AskingPay(Pay):
    """``pay`` that, run again, asks which account to pay from (a question, resumable)."""

    asks_host = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if self.block:
            return await super().invoke(request, ctx)
        answer = (
            ctx.resumed.answer
            if ctx.resumed
            else await ctx.ask(
                al.tools.Question("account", "Pay from which account?", None, resume={"n": 1})
            )
        )
        return f"paid ({answer.action.value})"


async def test_a_rerun_that_asks_a_question_leaves_the_session_on_it(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await park_in_doubt(store, "s1")
        async with al.tasks.AsyncTaskManager() as manager:
            agent = attrs.evolve(pay_agent(store, AskingPay()), task_manager=manager)
            transport = httpx.ASGITransport(app=inbox_app(store, agent))
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                inbox = DoubtInbox(store, client, Pay())
                await inbox.sign_in()
                response = await inbox.resolve(resolution="run_again")
                assert response.json() == {
                    "ok": True,
                    "message": "Ran again by alice; the call now asks a question (see Questions).",
                }
                page = (await client.get("/")).text
                assert '<p class="question-message">Pay from which account?</p>' in page
                assert "doubt-card" not in page
        stored = await store.load("s1")
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_ANSWER
