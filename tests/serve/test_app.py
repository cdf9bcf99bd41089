"""The inbox app over HTTP (no browser): the token gate, CSRF, every refusal, redaction."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape
from serve_support import TOKEN, build_agent, park_async

import agentloop as al
import agentloop.testing
import agentloop.tools
from agentloop.serve import MemoryAuditLog, ServeConfig, SqliteAuditLog, Worker, create_app
from agentloop.store import MemorySessionStore, SessionStatus, SqliteSessionStore, input_digest

pytestmark = pytest.mark.anyio

DIGEST = input_digest("publish_report", {"path": "/reports/q3.txt"})


class Inbox:
    """An app over a real SQLite store, and an httpx client that talks to it in process."""

    def __init__(self, store: SqliteSessionStore, audit: Any, app: Any) -> None:
        self.store = store
        self.audit = audit
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765"
        )

    async def signed_in(self) -> tuple[httpx.AsyncClient, str]:
        response = await self.client.get(f"/?token={TOKEN}")
        assert response.status_code == 303
        page = await self.client.get("/")
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        assert csrf is not None
        return self.client, csrf.group(1)

    async def decide(self, csrf: str, **body: Any) -> httpx.Response:
        body = {"session_id": "s1", "call_id": "call-1", "digest": DIGEST, **body}
        return await self.client.post(
            "/api/decide",
            json=body,
            headers={"x-csrf-token": csrf, "origin": "http://127.0.0.1:8765"},
        )


async def open_inbox(tmp_path: Path, **config: Any) -> AsyncIterator[Inbox]:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        audit = SqliteAuditLog(tmp_path / "s.db")
        settings_ = ServeConfig(token=TOKEN, identity="alice", **config)
        app = create_app(store, config=settings_, audit=audit, agent=build_agent(store))
        inbox = Inbox(store, audit, app)
        async with inbox.client:
            yield inbox


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[Inbox]:
    async for opened in open_inbox(tmp_path):
        yield opened


async def test_every_path_needs_the_token(inbox: Inbox) -> None:
    client = inbox.client
    for path in ("/", "/audit", "/events", "/sessions/s1", "/partials/inbox", "/static/app.js"):
        for suffix in ("", "?token=wrong-token-0123456789", f"?token={TOKEN[:-1]}"):
            response = await client.get(path + suffix)
            assert response.status_code == 401, (path, suffix)
            assert "needs its access token" in response.text
    response = await client.post("/api/decide", json={})
    assert response.status_code == 401
    response = await client.get("/audit", headers={"authorization": "Bearer nope-nope-nope-nope"})
    assert response.status_code == 401


async def test_the_token_in_the_url_becomes_a_strict_http_only_session_cookie(
    inbox: Inbox,
) -> None:
    response = await inbox.client.get(f"/audit?x=1&token={TOKEN}")
    assert response.status_code == 303
    assert response.headers["location"] == "/audit?x=1"
    cookie = response.headers["set-cookie"]
    shape = r"agentloop_session_8765=[0-9]+\.[0-9a-f]{64}; HttpOnly; Max-Age=43200;"
    assert re.match(shape, cookie)
    assert TOKEN not in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    page = await inbox.client.get("/audit")
    assert page.status_code == 200
    assert TOKEN not in page.text  # never rendered
    assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src")
    assert page.headers["referrer-policy"] == "no-referrer"
    bearer = httpx.AsyncClient(transport=inbox.client._transport, base_url="http://127.0.0.1")
    async with bearer:
        response = await bearer.get("/audit", headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200


async def test_decisions_need_the_csrf_token_and_the_same_origin(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    client, csrf = await inbox.signed_in()
    body = {"session_id": "s1", "call_id": "call-1", "digest": DIGEST, "action": "approve"}
    cases = [
        ({}, "refused: missing or wrong CSRF token; reload the page"),
        ({"x-csrf-token": "0" * 64}, "refused: missing or wrong CSRF token; reload the page"),
        (
            {"x-csrf-token": csrf, "origin": "http://evil.example"},
            "refused: cross-origin request from http://evil.example",
        ),
    ]
    for headers, message in cases:
        response = await client.post("/api/decide", json=body, headers=headers)
        assert response.status_code == 403
        assert response.json() == {"ok": False, "error": message, "status": 403}
    response = await client.post(
        "/api/decide", data=body, headers={"x-csrf-token": csrf}
    )  # a form post
    assert response.status_code == 403
    assert response.json()["error"] == "refused: decisions are sent as application/json"
    stored = await inbox.store.load("s1")
    assert stored is not None
    assert stored.approvals == {}
    assert await inbox.audit.entries() == []


async def test_refusals_say_why_and_record_nothing(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    _, csrf = await inbox.signed_in()
    cases: list[tuple[dict[str, Any], int, str]] = [
        (
            {"action": "maybe"},
            400,
            "unknown action 'maybe'; expected approve, approve_with or deny",
        ),
        (
            {"action": "approve", "digest": "sha256:0"},
            409,
            "the arguments of call 'call-1' changed since this page was loaded; "
            "reload and decide again",
        ),
        ({"action": "approve", "session_id": "gone"}, 404, "session 'gone' no longer exists"),
        (
            {"action": "approve", "call_id": "call-9"},
            409,
            "session 's1' moved on: call 'call-9' no longer waits for an approval "
            "(the session is awaiting_approval); nothing was recorded",
        ),
        (
            {"action": "approve_with", "input": '{"path": 5}'},
            422,
            "the edited arguments do not match the tool's schema: "
            "at path: 5 is not of type 'string'",
        ),
        (
            {"action": "approve_with", "input": '{"path": "/x", "force": 1}'},
            422,
            "the edited arguments do not match the tool's schema: Additional properties are not "
            "allowed ('force' was unexpected)",
        ),
        (
            {"action": "approve_with", "input": "{nope"},
            422,
            "the edited arguments are not JSON: Expecting property name enclosed in double quotes "
            "at line 1 column 2",
        ),
        (
            {"action": "approve_with", "input": "  "},
            422,
            "the edited arguments are empty; enter a JSON value",
        ),
        ({"action": "approve_with"}, 422, "the edited arguments are empty; enter a JSON value"),
        (
            {"action": "deny", "reason": "x" * 2001},
            422,
            "the reason is longer than 2000 characters",
        ),
        (
            {"action": "approve_with", "input": "null"},
            422,
            "the edited arguments are null; enter the tool's arguments as JSON",
        ),
        (
            {"action": "approve_with", "input": '{"path": "\\udfff"}'},
            422,
            "the edited arguments cannot be used: 'utf-8' codec can't encode character "
            "'\\udfff' in position 17: surrogates not allowed; pass JSON values",
        ),
    ]
    for body, status, message in cases:
        response = await inbox.decide(csrf, **body)
        assert (response.status_code, response.json()) == (
            status,
            {"ok": False, "error": message, "status": status},
        ), body
    # A lone surrogate, as a JSON escape (httpx would not encode it raw).
    body = {"session_id": "s1", "call_id": "call-1", "digest": DIGEST, "action": "deny"}
    response = await inbox.client.post(
        "/api/decide",
        content=json.dumps({**body, "reason": "no \ud800"}),
        headers={"x-csrf-token": csrf, "content-type": "application/json"},
    )
    assert (response.status_code, response.json()["error"]) == (
        422,
        "the reason is not valid Unicode text",
    )
    both = {**body, "call_ref": "ref-0"}
    for bad in ([], "x", {"session_id": 1}, {"session_id": "s1"}, both):
        response = await inbox.client.post("/api/decide", json=bad, headers={"x-csrf-token": csrf})
        assert response.status_code == 400
        assert response.json()["error"] == (
            "expected a JSON object with session_id, call_id (or the page's call_ref), action "
            "and digest strings"
        )
    stored = await inbox.store.load("s1")
    assert stored is not None
    assert stored.approvals == {}
    assert await inbox.audit.entries() == []


async def test_a_second_decision_is_refused_and_the_first_stands(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    _, csrf = await inbox.signed_in()
    first = await inbox.decide(csrf, action="deny", reason="not today")
    assert first.json() == {
        "ok": True,
        "message": "Denied by alice; a worker resumes the session.",
        "digest": DIGEST,
    }
    for action in ("approve", "deny", "approve_with"):
        again = await inbox.decide(csrf, action=action, input='{"path": "/y"}')
        assert again.status_code == 409
        assert again.json()["error"].startswith("this approval was already answered: denied at ")
        assert again.json()["error"].endswith("UTC; nothing was changed")
    stored = await inbox.store.load("s1")
    assert stored is not None
    assert stored.approvals["call-1"].approved is False
    [entry] = await inbox.audit.entries()
    assert (entry.decided_by, entry.action.value, entry.reason, entry.input_digest) == (
        "alice",
        "deny",
        "not today",
        DIGEST,
    )


async def test_a_call_claimed_by_a_worker_cannot_be_decided(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    await inbox.store.claim("s1", "call-1", tool_name="publish_report", input_digest=DIGEST)
    _, csrf = await inbox.signed_in()
    response = await inbox.decide(csrf, action="approve")
    assert response.status_code == 409
    assert response.json()["error"] == (
        "the call was already claimed by a worker (it may have run); nothing was changed"
    )
    assert await inbox.audit.entries() == []  # the entry written first was removed


async def test_the_worker_applies_the_decision_and_the_session_moves_on(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    _, csrf = await inbox.signed_in()
    response = await inbox.decide(csrf, action="approve_with", input='{"path": "/reports/v2.txt"}')
    assert response.status_code == 200
    worker = Worker(inbox.store, build_agent(inbox.store))
    assert await worker.advance("s1") is True
    items = await inbox.store.transcript("s1")
    assert items is not None
    assert items[-1].text_content == "Done: published /reports/v2.txt"
    assert [s.session_id for s in await inbox.store.sessions_ready()] == []
    page = await inbox.client.get("/sessions/s1")
    assert '<span class="outcome">ok</span>' in page.text
    assert "published /reports/v2.txt" in page.text


async def test_the_worker_leaves_a_session_leased_by_another_worker_alone(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    await inbox.store.record_approval("s1", "call-1", input_digest=DIGEST, approved=True)
    before = await inbox.store.load("s1")
    lease = await inbox.store.acquire("s1", "another-worker", 30)
    worker = Worker(inbox.store, build_agent(inbox.store))
    assert await worker.advance("s1") is False
    assert await inbox.store.load("s1") == before
    await inbox.store.release(lease)
    assert await worker.advance("s1") is True  # approved elsewhere (no audit entry): run as asked
    items = await inbox.store.transcript("s1")
    assert items is not None
    assert items[-1].text_content == "Done: published /reports/q3.txt"


async def test_a_call_claimed_elsewhere_after_the_approval_never_runs_twice(inbox: Inbox) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    await inbox.store.record_approval("s1", "call-1", input_digest=DIGEST, approved=True)
    # Another worker claimed it (and may have run it) before dying.
    await inbox.store.claim("s1", "call-1", tool_name="publish_report", input_digest=DIGEST)
    worker = Worker(inbox.store, build_agent(inbox.store))
    assert await worker.advance("s1") is True
    items = await inbox.store.transcript("s1")
    assert items is not None
    [result] = items[2].parts
    assert isinstance(result, al.ToolResultPart)
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT
    assert result.output.startswith("in doubt: publish_report started before the session")
    lease = await inbox.store.acquire("s1", "next-worker", 5)  # the lease was released
    await inbox.store.release(lease)


async def test_an_approval_past_its_deadline_is_refused(tmp_path: Path) -> None:
    async for inbox in open_inbox(tmp_path, approval_ttl=1e-6):
        await park_async(inbox.store, "s1", "/reports/q3.txt")
        _, csrf = await inbox.signed_in()
        page = await inbox.client.get("/partials/inbox")
        assert '<span class="deadline">expired ' in page.text
        response = await inbox.decide(csrf, action="approve")
        assert response.status_code == 409
        assert response.json()["error"].startswith("this approval expired at ")
        stored = await inbox.store.load("s1")
        assert stored is not None
        assert stored.approvals == {}


async def test_the_identity_header_names_who_decided(tmp_path: Path) -> None:
    async for inbox in open_inbox(tmp_path, identity_header="X-Forwarded-User"):
        await park_async(inbox.store, "s1", "/reports/q3.txt")
        _, csrf = await inbox.signed_in()
        response = await inbox.client.post(
            "/api/decide",
            json={"session_id": "s1", "call_id": "call-1", "digest": DIGEST, "action": "approve"},
            headers={"x-csrf-token": csrf, "x-forwarded-user": "bob@example.com"},
        )
        assert (
            response.json()["message"]
            == "Approved by bob@example.com; a worker resumes the session."
        )
        [entry] = await inbox.audit.entries()
        assert entry.decided_by == "bob@example.com"


async def test_secrets_are_never_rendered(tmp_path: Path) -> None:
    secret = "configured-secret-value-42"
    async for inbox in open_inbox(tmp_path, secrets=(secret,)):
        path = f"/k/sk-proj-abcdefghijklmnopqrstuvwx/{secret}/Bearer abcdefghijklmnopqrstu"
        await park_async(inbox.store, "s1", path)
        await inbox.signed_in()
        for url in ("/", "/partials/inbox", "/sessions/s1", "/partials/sessions/s1"):
            text = (await inbox.client.get(url)).text
            assert "sk-proj-abcdefghijklmnopqrstuvwx" not in text, url
            assert secret not in text, url
            assert "abcdefghijklmnopqrstu" not in text, url
            assert TOKEN not in text, url
            assert "/k/[redacted]/[redacted]/[redacted]" in text, url


async def _partials(path: str) -> list[str]:
    store = MemorySessionStore()
    app = create_app(
        store, config=ServeConfig(token=TOKEN), audit=MemoryAuditLog(), agent=build_agent(store)
    )
    await park_async(store, "s1", path)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        headers = {"authorization": f"Bearer {TOKEN}"}
        return [
            (await client.get(url, headers=headers)).text
            for url in ("/partials/inbox", "/partials/sessions/s1")
        ]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.text(alphabet=st.sampled_from("<>&\"' /=a"), min_size=1, max_size=30))
async def test_model_controlled_text_is_always_escaped(path: str) -> None:
    """Whatever the model writes, the page has exactly the markup of a harmless text."""
    pages = await _partials(path)
    baseline = await _partials("a")
    for page, plain in zip(pages, baseline, strict=True):
        assert str(escape(json.dumps(path)[1:-1])) in page  # shown, inside the pretty JSON
        for character in "<>\"'":
            assert page.count(character) == plain.count(character), character


async def test_the_session_view_shows_every_outcome(inbox: Inbox) -> None:
    from agentloop.tools import synthesized_result

    outcomes = {
        "c-ok": None,
        "c-err": None,
        "c-denied": al.tools.ResultOutcome.DENIED,
        "c-cancelled": al.tools.ResultOutcome.CANCELLED,
        "c-doubt": al.tools.ResultOutcome.IN_DOUBT,
    }
    calls = [al.ToolCallPart(call_id, "publish_report", {"path": call_id}) for call_id in outcomes]
    results = [
        al.ToolResultPart("c-ok", "published"),
        al.ToolResultPart("c-err", "disk full", is_error=True),
        *(
            synthesized_result(call_id, f"{outcome.value} text", outcome)
            for call_id, outcome in outcomes.items()
            if outcome is not None
        ),
    ]
    transcript = [
        al.Item.text(al.ItemKind.USER, "publish all"),
        al.Item(al.ItemKind.ASSISTANT, tuple(calls)),
        al.Item(al.ItemKind.TOOL, tuple(results)),
        al.Item.text(al.ItemKind.ASSISTANT, "Some went through."),
    ]
    agent = al.Agent.builder().model(al.testing.ScriptedModel(lambda r: "x")).transcript(transcript)
    driver = await agent.store(inbox.store).build().start("outcomes")
    await inbox.store.save_checkpoint("outcomes", driver.checkpoint())
    await inbox.signed_in()
    page = (await inbox.client.get("/sessions/outcomes")).text
    shown = re.findall(
        r'<li class="item tool-call outcome-([a-z_]+)">\s*<div class="label">tool call '
        r"<strong>publish_report</strong> <code>([a-z-]+)</code> "
        r'<span class="outcome">([a-z ]+)</span>',
        page,
    )
    assert shown == [
        ("ok", "c-ok", "ok"),
        ("error", "c-err", "error"),
        ("denied", "c-denied", "denied"),
        ("cancelled", "c-cancelled", "cancelled"),
        ("in_doubt", "c-doubt", "in doubt"),
    ]
    assert '<pre class="result-text">in_doubt text</pre>' in page
    assert '<div class="text">Some went through.</div>' in page
    assert '<dd id="session-state">IDLE</dd>' in page


async def test_sqlite_urls_are_relative_with_three_slashes_absolute_with_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.serve import open_store

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    async with open_store("sqlite:///sub/relative.db") as (store, _audit):
        assert isinstance(store, SqliteSessionStore)
        assert store.path == "sub/relative.db"
    assert (tmp_path / "sub" / "relative.db").is_file()
    absolute = tmp_path / "absolute.db"
    async with open_store(f"sqlite:///{absolute}") as (store, _audit):
        assert store.path == str(absolute)
    assert absolute.is_file()
    for url in ("sqlite://", "sqlite:///", "sqlite:////"):
        with pytest.raises(al.InvalidInputError, match=r"expected sqlite:///PATH\.db"):
            async with open_store(url):
                pass


async def test_an_approval_of_other_input_without_its_edit_is_left_alone(inbox: Inbox) -> None:
    # As recorded before the store kept edited arguments with a decision: only a digest.
    other = input_digest("publish_report", {"path": "/reports/elsewhere.txt"})
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    await inbox.store.record_approval("s1", "call-1", input_digest=other, approved=True)
    before = await inbox.store.load("s1")
    worker = Worker(inbox.store, build_agent(inbox.store))
    assert await worker.advance("s1") is False
    after = await inbox.store.load("s1")
    assert after is not None
    assert before is not None
    assert after.checkpoint == before.checkpoint  # still waiting on the same call
    assert after.status is SessionStatus.AWAITING_APPROVAL
    assert after.started_calls == frozenset()  # the call never ran
    lease = await inbox.store.acquire("s1", "next-worker", 5)  # the lease was released
    await inbox.store.release(lease)


class CountingStore:
    """The real store, counting the leases the worker takes (everything else passes through)."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self._store = store
        self.acquired: list[str] = []

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Any:
        self.acquired.append(session_id)
        return await self._store.acquire(session_id, owner, ttl)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_the_worker_skips_a_decision_it_cannot_apply_until_the_session_changes(
    inbox: Inbox,
) -> None:
    await park_async(inbox.store, "s1", "/reports/q3.txt")
    # Recorded for other input, with no edited input kept: no worker can apply it.
    other = input_digest("publish_report", {"path": "/reports/elsewhere.txt"})
    await inbox.store.record_approval("s1", "call-1", input_digest=other, approved=True)
    before = await inbox.store.load("s1")
    counting = CountingStore(inbox.store)
    worker = Worker(counting, build_agent(inbox.store), poll_interval=0.01)  # type: ignore[arg-type]
    with anyio.move_on_after(0.5):
        await worker.run()
    assert counting.acquired == ["s1"]  # tried once, then left alone at that version
    await nothing_ran(inbox.store, before)

    worker.wake()  # a person decided again somewhere: retried at once, still refused
    with anyio.move_on_after(0.3):
        await worker.run()
    assert counting.acquired == ["s1", "s1"]
    await nothing_ran(inbox.store, before)


async def nothing_ran(store: SqliteSessionStore, before: Any) -> None:
    """The call is still waiting: same transcript, no claim, the recorded decision kept."""
    now = await store.load("s1")
    assert now is not None
    assert now.checkpoint["transcript"] == before.checkpoint["transcript"]
    assert now.checkpoint["state"] == "AWAITING_APPROVAL"
    assert now.started_calls == frozenset()
    assert now.approvals == before.approvals
