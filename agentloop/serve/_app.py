"""The ASGI app: pages, the decision endpoint, live updates, the token gate."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

import anyio
import jinja2
import structlog
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..loop._agent import Agent
from ..loop._session_store import SessionStore
from ._audit import AuditEntry, AuditLog, MemoryAuditLog
from ._config import ServeConfig
from ._decide import Decider, DecisionRefused
from ._inbox import PendingApproval, pending_approvals, pretty, session_view
from ._redact import Redactor
from ._worker import Worker

__all__ = ["create_app"]

log = structlog.get_logger("agentloop")

COOKIE = "agentloop_serve_token"
_HERE = __file__.rsplit("/", 1)[0]
_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class _TokenGate:
    """Every request needs the token: ``?token=`` once (then a cookie), or a bearer header."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token

    def _valid(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(
            candidate.encode("utf-8", "replace"), self._token.encode()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        query = request.query_params.get("token")
        if query is not None and self._valid(query) and request.method == "GET":
            rest = [
                (k, v)
                for k, v in parse_qsl(scope.get("query_string", b"").decode())
                if k != "token"
            ]
            target = request.url.path + ("?" + urlencode(rest) if rest else "")
            response: Response = Response(status_code=303, headers={"location": target})
            response.set_cookie(COOKIE, self._token, httponly=True, samesite="strict", path="/")
            await _secured(response)(scope, receive, send)
            return
        bearer = request.headers.get("authorization", "")
        supplied = (
            bearer[7:] if bearer.lower().startswith("bearer ") else request.cookies.get(COOKIE)
        )
        if not self._valid(supplied):
            response = Response(
                "401: this agentloop inbox needs its access token; open the URL printed by "
                "`agentloop serve` (it ends in ?token=...)\n",
                status_code=401,
                media_type="text/plain",
            )
            await _secured(response)(scope, receive, send)
            return
        await self._app(scope, receive, send)


def _secured(response: Response) -> Response:
    for name, value in _SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


class _Changes:
    """Tells live pages that something changed: after a decision, a worker run, or a poll."""

    def __init__(self) -> None:
        self.serial = 0
        self._event = anyio.Event()

    def notify(self) -> None:
        self.serial += 1
        self._event.set()
        self._event = anyio.Event()

    async def wait(self, serial: int, seconds: float) -> int:
        if self.serial == serial:
            with anyio.move_on_after(seconds):
                await self._event.wait()
        return self.serial


def create_app(
    store: SessionStore,
    *,
    config: ServeConfig | None = None,
    audit: AuditLog | None = None,
    agent: Agent | None = None,
) -> Starlette:
    """The inbox as an ASGI app over ``store``.

    With ``agent`` and ``config.worker`` (the default), a decision is
    followed by an in-process worker resuming the session with ``agent``;
    without, decisions are only recorded and external workers advance the
    sessions (``store.sessions_ready()``).
    """
    config = config or ServeConfig()
    audit = audit if audit is not None else MemoryAuditLog()
    redactor = Redactor((config.token, *config.secrets))
    schemas = _schemas(agent)
    decider = Decider(
        store,
        audit,
        schemas=lambda: schemas,
        agent_name=config.agent_name,
        ttl=config.approval_ttl,
        redactor=redactor,
    )
    changes = _Changes()
    csrf = hmac.new(config.token.encode(), b"agentloop-serve-csrf", hashlib.sha256).hexdigest()
    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(f"{_HERE}/templates"), autoescape=True
    )

    async def changed() -> None:
        changes.notify()

    worker = (
        Worker(store, agent, on_change=changed, poll_interval=config.poll_interval)
        if agent is not None and config.worker
        else None
    )

    def who(request: Request) -> str:
        if config.identity_header:
            value = request.headers.get(config.identity_header)
            if value:
                return redactor.text(value.strip()[:200])
        return config.identity

    def page(request: Request, name: str, status: int = 200, **values: Any) -> Response:
        html = templates.get_template(name).render(csrf=csrf, who=who(request), **values)
        return _secured(HTMLResponse(html, status_code=status))

    async def inbox_values() -> dict[str, Any]:
        now = datetime.now(UTC)
        rows: list[PendingApproval] = []
        for summary in await store.sessions_awaiting_approval():
            stored = await store.load(summary.session_id)
            if stored is not None:
                rows.extend(
                    pending_approvals(
                        stored,
                        schemas=schemas,
                        agent_name=config.agent_name,
                        ttl=config.approval_ttl,
                        redactor=redactor,
                    )
                )
        rows.sort(key=lambda r: r.asked_at or datetime.min.replace(tzinfo=UTC), reverse=True)
        recent = []
        for entry in await audit.entries(10):
            stored = await store.load(entry.session_id)
            recent.append({**_entry_values(entry, redactor), "status": _status(stored, entry)})
        return {"rows": [_row_values(r, now) for r in rows], "recent": recent}

    async def inbox(request: Request) -> Response:
        values = await inbox_values()
        return page(request, "inbox.html", title="Inbox", partial="/partials/inbox", **values)

    async def inbox_partial(request: Request) -> Response:
        return page(request, "_inbox.html", **(await inbox_values()))

    async def session_values(session_id: str) -> dict[str, Any] | None:
        stored = await store.load(session_id)
        items = await store.transcript(session_id)
        if stored is None or items is None:
            return None
        return {"view": session_view(stored, items, redactor)}

    async def session(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        values = await session_values(session_id)
        if values is None:
            return page(
                request,
                "error.html",
                404,
                title="No such session",
                partial="",
                message=f"The store has no session {session_id!r}.",
            )
        return page(
            request,
            "session.html",
            title=f"Session {session_id}",
            partial=f"/partials/sessions/{_quote(session_id)}",
            **values,
        )

    async def session_partial(request: Request) -> Response:
        values = await session_values(request.path_params["session_id"])
        if values is None:
            return _secured(HTMLResponse("<p class='error'>The session is gone.</p>", 404))
        return page(request, "_session.html", **values)

    async def audit_page(request: Request) -> Response:
        entries = [_entry_values(e, redactor) for e in await audit.entries(500)]
        return page(request, "audit.html", title="Audit log", partial="", entries=entries)

    async def decide(request: Request) -> Response:
        refusal = _check_csrf(request, csrf)
        if refusal is not None:
            return _secured(JSONResponse({"ok": False, "error": refusal, "status": 403}, 403))
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not all(
            isinstance(body.get(k), str) for k in ("session_id", "call_id", "action", "digest")
        ):
            error = "expected a JSON object with session_id, call_id, action and digest strings"
            return _secured(JSONResponse({"ok": False, "error": error, "status": 400}, 400))
        reason, edited = body.get("reason"), body.get("input")
        try:
            entry = await decider.decide(
                body["session_id"],
                body["call_id"],
                action=body["action"],
                shown_digest=body["digest"],
                who=who(request),
                reason=reason if isinstance(reason, str) else None,
                edited_input=edited if isinstance(edited, str) else None,
            )
        except DecisionRefused as refused:
            answer = {"ok": False, "error": refused.message, "status": refused.status}
            return _secured(JSONResponse(answer, refused.status))
        changes.notify()
        if worker is not None:
            worker.wake()
        verb = {
            "approve": "Approved",
            "approve_with": "Approved with edited arguments",
            "deny": "Denied",
        }[entry.action.value]
        then = (
            "a worker resumes the session"
            if worker is not None
            else ("waiting for an external worker to resume the session")
        )
        message = f"{verb} by {entry.decided_by}; {then}."
        return _secured(
            JSONResponse({"ok": True, "message": message, "digest": entry.input_digest})
        )

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[dict[str, str]]:
            serial = changes.serial
            yield {"event": "hello", "data": str(serial)}
            while not await request.is_disconnected():
                now = await changes.wait(serial, 15)
                if now != serial:
                    serial = now
                    yield {"event": "changed", "data": str(serial)}

        return _secured(EventSourceResponse(stream(), ping=15))

    async def poll_store() -> None:
        """Notice changes made by other processes: workers, CLIs, other servers."""
        last: Any = None
        while True:
            try:
                sessions = await store.list_sessions()
                waiting = await store.sessions_awaiting_approval()
                current = (
                    tuple((s.session_id, s.updated_at) for s in sessions),
                    tuple((s.session_id, s.version, s.undecided) for s in waiting),
                )
            except Exception:
                log.exception("polling the store failed")
                current = last
            if last is not None and current != last:
                changes.notify()
            last = current
            await anyio.sleep(config.poll_interval)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            group.start_soon(poll_store)
            if worker is not None:
                group.start_soon(worker.run)
            yield
            group.cancel_scope.cancel()

    routes = [
        Route("/", inbox),
        Route("/partials/inbox", inbox_partial),
        Route("/sessions/{session_id:path}", session),
        Route("/partials/sessions/{session_id:path}", session_partial),
        Route("/audit", audit_page),
        Route("/api/decide", decide, methods=["POST"]),
        Route("/events", events),
        Mount("/static", app=StaticFiles(directory=f"{_HERE}/static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(_TokenGate, token=config.token)
    return app


def _check_csrf(request: Request, csrf: str) -> str | None:
    """Why a state-changing request is refused as cross-site, or ``None``."""
    supplied = request.headers.get("x-csrf-token", "")
    if not hmac.compare_digest(supplied.encode("utf-8", "replace"), csrf.encode()):
        return "refused: missing or wrong CSRF token; reload the page"
    origin = request.headers.get("origin")
    if origin is not None:
        expected = f"{request.url.scheme}://{request.url.netloc}"
        if origin != expected:
            return f"refused: cross-origin request from {origin}"
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "refused: decisions are sent as application/json"
    return None


def _quote(session_id: str) -> str:
    from urllib.parse import quote

    return quote(session_id, safe="")


def _schemas(agent: Agent | None) -> Mapping[str, Any]:
    if agent is None:
        return {}
    found: dict[str, Any] = {}
    for source in agent.tool_sources:
        for spec in source.specs():
            found.setdefault(spec.name, spec.input_schema)
    return found


def _waited(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "(unknown)"
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def _row_values(row: PendingApproval, now: datetime) -> dict[str, Any]:
    return {
        "session_id": row.session_id,
        "agent": row.agent,
        "call_id": row.call_id,
        "tool_name": row.tool_name,
        "digest": row.digest,
        "requests": row.requests,
        "display_input": row.display_input,
        "edit_input": row.display_input,  # redacted too: a secret is never rendered
        "schema_json": "" if row.schema is None else json.dumps(row.schema),
        "waited": _waited(row.asked_at, now),
        "deadline": None if row.deadline is None else f"{row.deadline:%Y-%m-%d %H:%M:%S} UTC",
        "expired": row.expired(now),
    }


def _entry_values(entry: AuditEntry, redactor: Redactor) -> dict[str, Any]:
    return {
        "session_id": entry.session_id,
        "call_id": entry.call_id,
        "tool_name": entry.tool_name,
        "action": entry.action.value.replace("_", " "),
        "decided_by": entry.decided_by,
        "decided_at": entry.decided_at,
        "reason": redactor.text(entry.reason) if entry.reason else None,
        "input": entry.input,
        "input_text": pretty(redactor.json(entry.input)),
        "input_digest": entry.input_digest,
    }


def _status(stored: Any, entry: AuditEntry) -> str:
    """The session's status now, as the "recently decided" table shows it."""
    if stored is None:
        return "deleted"
    return str(stored.status.value).replace("_", " ")
