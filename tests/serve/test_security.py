"""The inbox's defences, attacked: session cookies, Host, body size, JSON depth, headers, ids.

Every refused request is followed by a check that the store and the audit log
are exactly as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_support import TOKEN, build_agent, park_async

from agentloop.serve import MemoryAuditLog, ServeConfig, create_app
from agentloop.store import MemorySessionStore, input_digest

pytestmark = pytest.mark.anyio

DIGEST = input_digest("publish_report", {"path": "/reports/q3.txt"})
BASE = "http://127.0.0.1:8765"
MIB = 1024 * 1024
EXAMPLES = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-store",
}


class Guarded:
    """An inbox over a memory store with one parked session ``s1``; a client that talks to it."""

    def __init__(self, **config: Any) -> None:
        self.store = MemorySessionStore()
        self.audit = MemoryAuditLog()
        self.config = ServeConfig(token=TOKEN, identity="alice", **config)
        self.app = create_app(
            self.store, config=self.config, audit=self.audit, agent=build_agent(self.store)
        )
        self.csrf = ""

    def client(self, base: str = BASE, **options: Any) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, **options)
        return httpx.AsyncClient(transport=transport, base_url=base)

    async def start(self) -> Guarded:
        await park_async(self.store, "s1", "/reports/q3.txt")
        async with self.client() as client:
            page = await client.get("/", headers={"authorization": f"Bearer {TOKEN}"})
        found = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        assert found is not None
        self.csrf = found.group(1)
        return self

    def decision_headers(self, **extra: str) -> dict[str, str]:
        return {"x-csrf-token": self.csrf, "content-type": "application/json", **extra}

    async def snapshot(self) -> Any:
        stored = await self.store.load("s1")
        assert stored is not None
        return (
            stored.checkpoint,
            stored.version,
            dict(stored.approvals),
            await self.audit.entries(),
        )

    async def session_cookie(self, client: httpx.AsyncClient) -> str:
        response = await client.get(f"/?token={TOKEN}")
        assert response.status_code == 303
        [(name, value)] = client.cookies.items()
        assert name == "agentloop_session_8765"
        return value


@pytest.fixture
async def guarded() -> Guarded:
    return await Guarded().start()


DECISION = {"session_id": "s1", "call_id": "call-1", "digest": DIGEST, "action": "approve"}


async def refused_without_change(
    guarded: Guarded, request: Callable[[], Awaitable[httpx.Response]], status: int
) -> httpx.Response:
    """Send ``request``; it is refused with ``status`` and nothing in the store changed."""
    before = await guarded.snapshot()
    response = await request()
    assert response.status_code == status, response.text
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value, name
    assert await guarded.snapshot() == before
    return response


# -- the session cookie --------------------------------------------------------------


async def test_the_cookie_is_derived_port_named_and_no_token(guarded: Guarded) -> None:
    async with guarded.client() as client:
        response = await client.get(f"/?token={TOKEN}")
        cookie = response.headers["set-cookie"]
        value = await guarded.session_cookie(client)
        assert TOKEN not in cookie
        assert re.fullmatch(r"[0-9]+\.[0-9a-f]{64}", value)
        assert "Max-Age=43200" in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert "Secure" not in cookie  # plain HTTP on loopback: a Secure cookie is never sent
        assert (await client.get("/audit")).status_code == 200
        # Stolen, the cookie's value is no bearer token.
        client.cookies.clear()
        for bearer in (value, f"{value}", f" {value} "):
            response = await refused_without_change(
                guarded,
                lambda b=bearer: client.post(
                    "/api/decide",
                    json=DECISION,
                    headers=guarded.decision_headers(authorization=f"Bearer {b}"),
                ),
                401,
            )
            assert response.text == (
                "401: this agentloop inbox needs its access token: the Authorization header "
                "does not carry it (a session cookie is no token); open the URL printed by "
                "`agentloop serve` (it ends in ?token=...), or send the header "
                "Authorization: Bearer TOKEN\n"
            )
        # The token still works as a bearer for API clients.
        answer = await client.get("/audit", headers={"authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200


async def test_over_https_the_cookie_is_secure() -> None:
    guarded = await Guarded().start()
    async with guarded.client("https://127.0.0.1:8765") as client:
        response = await client.get(f"/?token={TOKEN}")
    assert response.status_code == 303
    assert "; Secure" in response.headers["set-cookie"]


async def test_a_cookie_of_another_port_is_refused(guarded: Guarded) -> None:
    """Browsers send every 127.0.0.1 port's cookies: another port's cookie never works here."""
    async with guarded.client() as client:
        value = await guarded.session_cookie(client)
    other = Guarded()
    other.store, other.audit = guarded.store, guarded.audit
    other.app = create_app(guarded.store, config=guarded.config, audit=guarded.audit)
    async with other.client("http://127.0.0.1:8766") as client:
        cases = {
            f"agentloop_session_8765={value}": "no session cookie agentloop_session_8766 was sent",
            f"agentloop_session_8766={value}": (
                "the cookie agentloop_session_8766 was not issued by this server for port 8766"
            ),
            f"agentloop_serve_token={TOKEN}": "no session cookie agentloop_session_8766 was sent",
            f"agentloop_session_8766={TOKEN}": (
                "the cookie agentloop_session_8766 is not a session cookie"
            ),
        }
        for cookie, problem in cases.items():
            response = await refused_without_change(
                guarded,
                lambda c=cookie: client.post(
                    "/api/decide",
                    json=DECISION,
                    headers=guarded.decision_headers(
                        cookie=c, host="127.0.0.1:8766", origin="http://127.0.0.1:8766"
                    ),
                ),
                401,
            )
            assert response.text.startswith(
                f"401: this agentloop inbox needs its access token: {problem}; open the URL"
            ), cookie


async def test_an_expired_cookie_is_refused_and_cleared() -> None:
    guarded = await Guarded(session_ttl=1).start()
    async with guarded.client() as client:
        value = await guarded.session_cookie(client)
        assert (await client.get("/")).status_code == 200
        await anyio.sleep(2.1)
        client.cookies.clear()
        headers = guarded.decision_headers(cookie=f"agentloop_session_8765={value}")
        response = await refused_without_change(
            guarded, lambda: client.post("/api/decide", json=DECISION, headers=headers), 401
        )
        assert re.match(
            r"401: this agentloop inbox needs its access token: the session expired at "
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; open the URL printed by `agentloop serve`",
            response.text,
        )
        assert response.headers["set-cookie"].startswith('agentloop_session_8765=""; ')
        assert "Max-Age=0" in response.headers["set-cookie"]


_COOKIE_CHARACTERS = st.characters(
    min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters=';,"\\'
)


@EXAMPLES
@given(
    value=st.one_of(
        st.text(_COOKIE_CHARACTERS, max_size=90),
        st.builds(
            lambda stamp, mac: f"{stamp}.{mac}",
            st.integers(0, 10**13),
            st.text(alphabet="0123456789abcdef", max_size=70),
        ),
    )
)
async def test_forged_cookies_are_refused(guarded: Guarded, value: str) -> None:
    async with guarded.client() as client:
        headers = guarded.decision_headers(cookie=f"agentloop_session_8765={value}")
        await refused_without_change(
            guarded, lambda: client.post("/api/decide", json=DECISION, headers=headers), 401
        )


@EXAMPLES
@given(position=st.integers(0, 200), replacement=st.sampled_from("0123456789abcdef.x"))
async def test_a_cookie_changed_in_one_place_is_refused(
    guarded: Guarded, position: int, replacement: str
) -> None:
    async with guarded.client() as client:
        value = await guarded.session_cookie(client)
        client.cookies.clear()
    index = position % len(value)
    forged = value[:index] + replacement + value[index + 1 :]
    async with guarded.client() as client:
        headers = {"cookie": f"agentloop_session_8765={forged}"}
        response = await client.get("/audit", headers=headers)
        assert response.status_code == (200 if forged == value else 401)
        headers = guarded.decision_headers(**headers)
        if forged != value:
            await refused_without_change(
                guarded, lambda: client.post("/api/decide", json=DECISION, headers=headers), 401
            )


# -- the Host check --------------------------------------------------------------------


ALLOWED = ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LocalHost:8765", "inbox.test")


def _is_allowed(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if re.search(r":\d+$", host) else host
    return host.lower() in {a.lower() for a in ALLOWED} | {"proxy.test:443"} or name == "inbox.test"


@EXAMPLES
@given(
    host=st.one_of(
        st.sampled_from(
            [
                "evil.example",
                "evil.example:8765",
                "127.0.0.1",
                "127.0.0.1:8766",
                "localhost",
                "localhost:80",
                "127.0.0.1.evil.example:8765",
                "[::2]:8765",
                "[::1]",
                "0.0.0.0:8765",
                "127.1:8765",
                "proxy.test",
                "proxy.test:80",
                "inbox.test.evil:8765",
                "",
            ]
        ),
        st.from_regex(r"[a-z0-9.\-]{1,30}(:[0-9]{1,5})?", fullmatch=True),
    )
)
async def test_a_foreign_host_is_refused_with_421(host: str) -> None:
    if _is_allowed(host):
        return
    guarded = await Guarded(allowed_hosts=("inbox.test", "proxy.test:443")).start()
    async with guarded.client() as client:
        headers = guarded.decision_headers(authorization=f"Bearer {TOKEN}", host=host)
        response = await refused_without_change(
            guarded, lambda: client.post("/api/decide", json=DECISION, headers=headers), 421
        )
        assert response.text == (
            "421: this agentloop inbox answers for 127.0.0.1:8765, localhost:8765, [::1]:8765, "
            f"inbox.test, proxy.test:443, not for Host {host!r}; open it by one of those "
            "addresses, or start it with --allowed-host NAME (ServeConfig(allowed_hosts=...)) "
            "when a proxy forwards another name\n"
        )
        page = await client.get(f"/?token={TOKEN}", headers={"host": host})
        assert page.status_code == 421
        assert "set-cookie" not in page.headers


async def test_the_bound_addresses_and_configured_names_are_answered() -> None:
    guarded = await Guarded(allowed_hosts=("inbox.test", "proxy.test:443")).start()
    async with guarded.client() as client:
        for host in (*ALLOWED, "inbox.test:8443", "proxy.test:443"):
            response = await client.get(
                "/", headers={"authorization": f"Bearer {TOKEN}", "host": host}
            )
            assert response.status_code == 200, host


# -- the body size limit ---------------------------------------------------------------


async def asgi_post(
    app: Any, headers: dict[str, str], size: int, chunk: int = 65536
) -> tuple[int, bytes, int, dict[str, str]]:
    """POST ``size`` bytes to ``/api/decide`` in chunks: status, body, bytes read, headers."""
    read = 0
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        if read >= size:
            await anyio.sleep_forever()
        part = b" " * min(chunk, size - read)
        read += len(part)
        return {"type": "http.request", "body": part, "more_body": read < size}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/decide",
        "raw_path": b"/api/decide",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    with anyio.fail_after(30):
        await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    start = sent[0]
    answer = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], body, read, answer


def _api_headers(guarded: Guarded, **extra: str) -> dict[str, str]:
    return {
        "host": "127.0.0.1:8765",
        "authorization": f"Bearer {TOKEN}",
        **guarded.decision_headers(),
        **extra,
    }


@pytest.mark.parametrize("size", [MIB + 1, 2 * MIB, 16 * MIB, 10**12])
async def test_a_declared_oversized_body_is_refused_before_it_is_read(
    guarded: Guarded, size: int
) -> None:
    before = await guarded.snapshot()
    headers = _api_headers(guarded, **{"content-length": str(size)})
    status, body, read, _ = await asgi_post(guarded.app, headers, size)
    assert (status, read) == (413, 0)
    assert json.loads(body) == {
        "ok": False,
        "error": f"refused: the request body is {size} bytes, over the limit of {MIB} bytes; "
        "send a decision as a small JSON object",
        "status": 413,
    }
    assert await guarded.snapshot() == before


@pytest.mark.parametrize(("size", "chunk"), [(MIB + 1, 65536), (3 * MIB, 65536), (2 * MIB, 1000)])
async def test_an_undeclared_oversized_body_is_cut_at_the_limit(
    guarded: Guarded, size: int, chunk: int
) -> None:
    before = await guarded.snapshot()
    status, body, read, _ = await asgi_post(guarded.app, _api_headers(guarded), size, chunk)
    assert status == 413
    assert read <= MIB + chunk  # stopped at the limit, not at the end of the body
    assert json.loads(body)["error"] == (
        f"refused: the request body is more than {MIB} bytes, over the limit of {MIB} bytes; "
        "send a decision as a small JSON object"
    )
    assert await guarded.snapshot() == before


async def test_a_body_at_the_limit_is_read(guarded: Guarded) -> None:
    body = {**DECISION, "action": "maybe", "pad": ""}
    body["pad"] = "x" * (MIB - len(json.dumps(body)))
    content = json.dumps(body)
    assert len(content) == MIB
    async with guarded.client() as client:
        headers = guarded.decision_headers(authorization=f"Bearer {TOKEN}")
        response = await refused_without_change(
            guarded, lambda: client.post("/api/decide", content=content, headers=headers), 400
        )
    assert response.json()["error"] == (
        "unknown action 'maybe'; expected approve, approve_with or deny"
    )


# -- the JSON depth limit --------------------------------------------------------------


def _nested(depth: int, kinds: str) -> str:
    opening = "".join('{"k":' if kinds[i % len(kinds)] == "o" else "[" for i in range(depth))
    closing = "".join("}" if kinds[i % len(kinds)] == "o" else "]" for i in reversed(range(depth)))
    return opening + "1" + closing


@EXAMPLES
@given(
    depth=st.one_of(st.integers(33, 200), st.sampled_from([1000, 5000, 100_000])),
    kinds=st.text(alphabet="oa", min_size=1, max_size=4),
    where=st.sampled_from(["session_id", "reason", "extra", "input"]),
)
async def test_deeply_nested_json_is_refused_with_400(
    guarded: Guarded, depth: int, kinds: str, where: str
) -> None:
    deep = _nested(depth, kinds)
    decision = json.dumps({**DECISION, "action": "approve_with", "input": '{"path": "/x"}'})
    content = decision[:-1] + f', "{where}": {deep}' + "}"
    async with guarded.client() as client:
        headers = guarded.decision_headers(authorization=f"Bearer {TOKEN}")
        response = await refused_without_change(
            guarded, lambda: client.post("/api/decide", content=content, headers=headers), 400
        )
    assert response.json() == {
        "ok": False,
        "error": "refused: JSON nested more than 32 levels deep in the request body; "
        "send at most 32 levels of arrays and objects",
        "status": 400,
    }


@EXAMPLES
@given(
    depth=st.one_of(st.integers(33, 200), st.sampled_from([1000, 100_000])),
    kinds=st.text(alphabet="oa", min_size=1, max_size=4),
)
async def test_deeply_nested_edited_arguments_are_refused_with_400(
    guarded: Guarded, depth: int, kinds: str
) -> None:
    edited = '{"path": "/x", "more": ' + _nested(depth, kinds) + "}"
    body = {**DECISION, "action": "approve_with", "input": edited}
    async with guarded.client() as client:
        headers = guarded.decision_headers(authorization=f"Bearer {TOKEN}")
        response = await refused_without_change(
            guarded, lambda: client.post("/api/decide", json=body, headers=headers), 400
        )
    assert response.json()["error"] == (
        "refused: JSON nested more than 32 levels deep in the edited arguments; "
        "send at most 32 levels of arrays and objects"
    )


async def test_brackets_inside_strings_do_not_count(guarded: Guarded) -> None:
    body = {**DECISION, "action": "maybe", "reason": "[{" * 5000 + '\\"]'}
    async with guarded.client() as client:
        headers = guarded.decision_headers(authorization=f"Bearer {TOKEN}")
        response = await refused_without_change(
            guarded, lambda: client.post("/api/decide", json=body, headers=headers), 400
        )
    assert response.json()["error"].startswith("unknown action 'maybe'")


# -- security headers on every response ------------------------------------------------


async def test_every_response_carries_the_security_headers(guarded: Guarded) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    requests: list[tuple[str, str, dict[str, str], int]] = [
        ("GET", "/", bearer, 200),
        ("GET", "/static/app.js", bearer, 200),
        ("GET", "/static/app.css", bearer, 200),
        ("GET", "/static/nope.js", bearer, 404),
        ("GET", "/no/such/page", bearer, 404),
        ("GET", "/sessions/nope", bearer, 404),
        ("GET", "/partials/sessions/nope", bearer, 404),
        ("POST", "/", bearer, 405),
        ("GET", "/api/decide", bearer, 405),
        ("GET", "/", {}, 401),
        ("GET", f"/?token={TOKEN}", {}, 303),
        ("GET", "/", {**bearer, "host": "evil.example"}, 421),
        ("POST", "/api/decide", {**bearer, "content-length": str(2 * MIB)}, 413),
        ("POST", "/api/decide", bearer, 403),
    ]
    async with guarded.client() as client:
        for method, path, headers, status in requests:
            if method == "POST" and "content-length" in headers:
                code, _, _, answer = await asgi_post(
                    guarded.app, _api_headers(guarded, **headers), 10
                )
            else:
                response = await client.request(method, path, headers=headers)
                code, answer = response.status_code, dict(response.headers)
            assert code == status, (method, path)
            for name, value in SECURITY_HEADERS.items():
                assert answer.get(name) == value, (method, path, name)


class BrokenStore:
    """A store whose listing fails: the page answers 500."""

    def __init__(self, store: MemorySessionStore) -> None:
        self._store = store

    async def sessions_awaiting_approval(self) -> Any:
        raise RuntimeError("the disk is on fire")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_server_error_carries_the_security_headers_too() -> None:
    app = create_app(BrokenStore(MemorySessionStore()), config=ServeConfig(token=TOKEN))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        response = await client.get("/", headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 500
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, name


# -- model-chosen call ids -------------------------------------------------------------


KEY_ID = "sk-proj-abcdefghijklmnopqrstuvwx0123"


async def _park_with_call_id(store: MemorySessionStore, call_id: str) -> None:
    import agentloop as al
    import agentloop.model
    import agentloop.testing
    from agentloop.testing import call, text, tool_calls

    def answer(request: al.model.TurnRequest) -> Any:
        if request.transcript[-1].kind is al.ItemKind.USER:
            return tool_calls(call("publish_report", {"path": "/reports/k.txt"}, id=call_id))
        return text("Done.")

    agent = build_agent(store)
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(agent.tool_sources[0])
        .permissions(agent.permissions)
        .store(store)
        .build()
    )
    driver = await agent.start("keyed")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "publish")])
    assert isinstance(await driver.next(), al.ApprovalRequest)


async def test_a_call_id_shaped_like_a_key_is_never_shown(guarded: Guarded) -> None:
    await _park_with_call_id(guarded.store, KEY_ID)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    digest = input_digest("publish_report", {"path": "/reports/k.txt"})
    async with guarded.client() as client:
        inbox = await client.get("/", headers=bearer)
        assert KEY_ID not in inbox.text
        assert '<code class="call-id">[redacted]</code>' in inbox.text
        found = re.search(r'data-session="keyed" data-call-ref="(ref-[0-9a-f]{32})"', inbox.text)
        assert found is not None
        headers = guarded.decision_headers(**bearer)
        wrong = {"session_id": "keyed", "call_id": KEY_ID, "digest": "x", "action": "approve"}
        refused = await client.post("/api/decide", json=wrong, headers=headers)
        assert refused.json()["error"] == (
            "the arguments of call '[redacted]' changed since this page was loaded; "
            "reload and decide again"
        )
        body = {"session_id": "keyed", "call_ref": found.group(1), "digest": digest}
        decided = await client.post(
            "/api/decide", json={**body, "action": "approve"}, headers=headers
        )
        assert decided.json()["ok"] is True
        stored = await guarded.store.load("keyed")
        assert stored is not None
        assert list(stored.approvals) == [KEY_ID]
        for path in ("/", "/partials/inbox", "/sessions/keyed", "/audit"):
            page = await client.get(path, headers=bearer)
            assert page.status_code == 200
            assert KEY_ID not in page.text, path
            assert "[redacted]" in page.text, path
        unknown = {**body, "call_ref": "ref-" + "0" * 32, "action": "deny"}
        before = await guarded.store.load("keyed")
        refused = await client.post("/api/decide", json=unknown, headers=headers)
        assert (refused.status_code, refused.json()["error"]) == (
            409,
            "session 'keyed' moved on: the call this page showed no longer waits for an "
            "approval (the session is awaiting_approval); nothing was recorded",
        )
        assert await guarded.store.load("keyed") == before


@pytest.mark.parametrize(
    ("settings_", "message"),
    [
        ({"session_ttl": 0}, "session_ttl must be a number of seconds >= 1, got 0"),
        ({"session_ttl": True}, "session_ttl must be a number of seconds >= 1, got True"),
        (
            {"allowed_hosts": ("evil.example/x",)},
            "allowed_hosts: expected names like 'inbox.example.com' or "
            "'inbox.example.com:8443', got 'evil.example/x'",
        ),
        (
            {"allowed_hosts": ("",)},
            "allowed_hosts: expected names like 'inbox.example.com' or "
            "'inbox.example.com:8443', got ''",
        ),
    ],
)
def test_bad_settings_are_refused(settings_: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        ServeConfig(token=TOKEN, **settings_)
