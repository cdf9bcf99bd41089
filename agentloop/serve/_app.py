"""The inbox app: one method per route, the guards around them, the tasks beside them.

The requests pass, outermost first: ``SecurityHeaders`` (on every response,
errors included), ``HostCheck`` (421), ``TokenGate`` (401; session cookies),
``BodyLimit`` (413), then the routes: the pages (``_pages``), the decision
endpoint and the event stream (``_api``), the static files.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import structlog
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..loop._agent import Agent
from ..loop._session_store import AnswerStore, SessionStore
from ._access import SessionCookies, TokenGate
from ._api import Changes, DecisionEndpoint, check_csrf
from ._audit import AuditLog, MemoryAuditLog
from ._config import ServeConfig
from ._decide import Decider
from ._guards import BodyLimit, HostCheck, SecurityHeaders
from ._in_doubt import ResolveEndpoint
from ._pages import Pages, identity
from ._questions import AnswerEndpoint
from ._redact import Redactor
from ._views import CallRefs
from ._worker import Worker

__all__ = ["InboxApp", "create_app"]

log = structlog.get_logger("agentloop")

_STATIC = __file__.rsplit("/", 1)[0] + "/static"


class _GuardedStarlette(Starlette):
    """Starlette with ``SecurityHeaders`` outside its own error middleware (so 500s carry them)."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


def create_app(
    store: SessionStore,
    *,
    config: ServeConfig | None = None,
    audit: AuditLog | None = None,
    agent: Agent | None = None,
    agui: bool = False,
) -> Starlette:
    """The inbox as an ASGI app over ``store``.

    With ``agent`` and ``config.worker`` (the default), a decision is
    followed by an in-process worker resuming the session with ``agent``;
    without, decisions are only recorded and external workers advance the
    sessions (``store.sessions_ready()``). With ``agui`` (and ``agent``), the
    AG-UI endpoint answers ``POST /agui`` behind the same guards.
    """
    if agui and agent is None:
        raise ValueError("the AG-UI endpoint (agui=True) needs the agent that runs the threads")
    return InboxApp(store, config=config, audit=audit, agent=agent, agui=agui).asgi()


class InboxApp:
    """The inbox over one store: one method per route, the guards, and the background tasks.

    :meth:`routes` is the route table; :meth:`asgi` wraps it in the guards
    (``HostCheck``, ``TokenGate``, ``BodyLimit``, and ``SecurityHeaders`` outside
    everything) with a lifespan that polls the store and runs the worker.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        config: ServeConfig | None = None,
        audit: AuditLog | None = None,
        agent: Agent | None = None,
        agui: bool = False,
    ) -> None:
        self.store = store
        self.config = config = config or ServeConfig()
        audit = audit if audit is not None else MemoryAuditLog()
        self.changes = Changes()
        self.worker = (
            Worker(store, agent, on_change=self._changed, poll_interval=config.poll_interval)
            if agent is not None and config.worker
            else None
        )
        schemas = _schemas(agent)
        redactor = Redactor((config.token, *config.secrets))
        refs = CallRefs(config.token)
        csrf = hmac.new(config.token.encode(), b"agentloop-serve-csrf", hashlib.sha256).hexdigest()
        self._pages = Pages(
            store, audit, config=config, redactor=redactor, refs=refs, csrf=csrf, schemas=schemas
        )
        self._decider = Decider(
            store,
            audit,
            schemas=lambda: schemas,
            agent_name=config.agent_name,
            ttl=config.approval_ttl,
            redactor=redactor,
        )
        self._decision = DecisionEndpoint(
            store,
            self._decider,
            refs=refs,
            csrf=csrf,
            who=identity(config, redactor),
            changes=self.changes,
            worker=self.worker,
        )
        self._answer = AnswerEndpoint(
            store,
            refs=refs,
            check=lambda request: check_csrf(request, csrf),
            who=identity(config, redactor),
            changed=self.changes.notify,
            worker=self.worker,
            audit=audit,
            redactor=redactor,
            agent=agent,
        )
        self._resolve = ResolveEndpoint(
            store,
            agent=agent,
            refs=refs,
            check=lambda request: check_csrf(request, csrf),
            who=identity(config, redactor),
            changed=self.changes.notify,
            worker=self.worker,
            audit=audit,
            redactor=redactor,
        )
        self._agui = agent if agui else None

    async def _changed(self) -> None:
        self.changes.notify()

    # -- the routes ----------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """Every route, each answered by the method of the same name."""
        return [
            *self._agui_routes(),
            Route("/", self.inbox),
            Route("/partials/inbox", self.inbox_partial),
            Route("/sessions/{session_id:path}", self.session),
            Route("/partials/sessions/{session_id:path}", self.session_partial),
            Route("/audit", self.audit),
            Route("/api/decide", self.decide, methods=["POST"]),
            Route("/api/answer", self.answer, methods=["POST"]),
            Route("/api/resolve", self.resolve, methods=["POST"]),
            Route("/events", self.events),
            Mount("/static", app=StaticFiles(directory=_STATIC), name="static"),
        ]

    async def inbox(self, request: Request) -> Response:
        """``GET /``: the calls waiting for a decision, the recent decisions, what needs care."""
        return await self._pages.inbox(request)

    async def inbox_partial(self, request: Request) -> Response:
        """``GET /partials/inbox``: the inbox's body, for the live page to swap in."""
        return await self._pages.inbox_partial(request)

    async def session(self, request: Request) -> Response:
        """``GET /sessions/{id}``: one session's transcript and pending calls (404 if gone)."""
        return await self._pages.session(request)

    async def session_partial(self, request: Request) -> Response:
        """``GET /partials/sessions/{id}``: the session page's body."""
        return await self._pages.session_partial(request)

    async def audit(self, request: Request) -> Response:
        """``GET /audit``: the last 500 decisions."""
        return await self._pages.audit_page(request)

    async def decide(self, request: Request) -> Response:
        """``POST /api/decide``: CSRF and origin checked, decision recorded, worker woken."""
        return await self._decision.handle(request)

    async def answer(self, request: Request) -> Response:
        """``POST /api/answer``: CSRF and origin checked, answer recorded, worker woken."""
        return await self._answer.handle(request)

    async def resolve(self, request: Request) -> Response:
        """``POST /api/resolve``: CSRF and origin checked, a call in doubt settled, failed or
        run again under the session's lease, worker woken."""
        return await self._resolve.handle(request)

    async def events(self, request: Request) -> Response:
        """``GET /events``: a Server-Sent Events stream, one ``changed`` event per change."""
        changes = self.changes

        async def stream() -> AsyncIterator[dict[str, str]]:
            serial = changes.serial
            yield {"event": "hello", "data": str(serial)}
            while not await request.is_disconnected():
                now = await changes.wait(serial, 15)
                if now != serial:
                    serial = now
                    yield {"event": "changed", "data": str(serial)}

        return EventSourceResponse(stream(), ping=15)

    def _agui_routes(self) -> list[BaseRoute]:
        """``POST /agui`` (the AG-UI endpoint) when the app was made with ``agui=True``."""
        if self._agui is None:
            return []
        from ..ui._app import AguiEndpoint
        from ..ui._config import agui_config

        endpoint = AguiEndpoint(self._agui, config=agui_config(self.config), decider=self._decider)
        return [Route("/agui", endpoint.handle, methods=["POST"])]

    # -- the app around them ---------------------------------------------------------------

    def asgi(self) -> Starlette:
        """The routes behind the guards, with the store poller and the worker as lifespan."""
        config = self.config
        middleware = [
            Middleware(HostCheck, configured=config.allowed_hosts),
            Middleware(
                TokenGate,
                token=config.token,
                cookies=SessionCookies(config.token, config.session_ttl),
            ),
            Middleware(BodyLimit),
        ]
        return _GuardedStarlette(
            routes=self.routes(), middleware=middleware, lifespan=self.lifespan
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Poll the store (changes made by other processes) and run the worker, if any."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._poll_store)
            if self.worker is not None:
                group.start_soon(self.worker.run)
            yield
            group.cancel_scope.cancel()

    async def _poll_store(self) -> None:
        """Notice changes made by other processes: workers, CLIs, other servers."""
        store, last = self.store, None
        current: Any = None
        while True:
            try:
                sessions = await store.list_sessions()
                waiting = await store.sessions_awaiting_approval()
                asked = (
                    await store.sessions_awaiting_answer() if isinstance(store, AnswerStore) else []
                )
                current = (
                    tuple((s.session_id, s.updated_at) for s in sessions),
                    tuple((s.session_id, s.version, s.undecided) for s in waiting),
                    tuple((s.session_id, s.version, s.unanswered) for s in asked),
                )
            except Exception:
                log.exception("polling the store failed")
                current = last
            if last is not None and current != last:
                self.changes.notify()
            last = current
            await anyio.sleep(self.config.poll_interval)


def _schemas(agent: Agent | None) -> Mapping[str, Any]:
    if agent is None:
        return {}
    found: dict[str, Any] = {}
    for source in agent.tool_sources:
        for spec in source.specs():
            found.setdefault(spec.name, spec.input_schema)
    return found
