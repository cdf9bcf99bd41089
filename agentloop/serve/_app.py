"""The ASGI app: routes, the guards around them, and the tasks that run beside them.

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
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..loop._agent import Agent
from ..loop._session_store import SessionStore
from ._access import SessionCookies, TokenGate
from ._api import Changes, DecisionEndpoint, events
from ._audit import AuditLog, MemoryAuditLog
from ._config import ServeConfig
from ._decide import Decider
from ._guards import BodyLimit, HostCheck, SecurityHeaders
from ._pages import Pages, identity
from ._redact import Redactor
from ._views import CallRefs
from ._worker import Worker

__all__ = ["create_app"]

log = structlog.get_logger("agentloop")

_STATIC = __file__.rsplit("/", 1)[0] + "/static"


class _InboxApp(Starlette):
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
    config = config or ServeConfig()
    audit = audit if audit is not None else MemoryAuditLog()
    changes = Changes()

    async def changed() -> None:
        changes.notify()

    worker = (
        Worker(store, agent, on_change=changed, poll_interval=config.poll_interval)
        if agent is not None and config.worker
        else None
    )
    if agui and agent is None:
        raise ValueError("the AG-UI endpoint (agui=True) needs the agent that runs the threads")
    routes = _routes(
        store, audit, config, _schemas(agent), changes, worker, agent if agui else None
    )
    middleware = [
        Middleware(HostCheck, configured=config.allowed_hosts),
        Middleware(
            TokenGate,
            token=config.token,
            cookies=SessionCookies(config.token, config.session_ttl),
        ),
        Middleware(BodyLimit),
    ]
    return _InboxApp(
        routes=routes,
        middleware=middleware,
        lifespan=_lifespan(store, config, changes, worker),
    )


def _routes(
    store: SessionStore,
    audit: AuditLog,
    config: ServeConfig,
    schemas: Mapping[str, Any],
    changes: Changes,
    worker: Worker | None,
    agui: Agent | None = None,
) -> list[BaseRoute]:
    redactor = Redactor((config.token, *config.secrets))
    refs = CallRefs(config.token)
    csrf = hmac.new(config.token.encode(), b"agentloop-serve-csrf", hashlib.sha256).hexdigest()
    pages = Pages(
        store, audit, config=config, redactor=redactor, refs=refs, csrf=csrf, schemas=schemas
    )
    decider = Decider(
        store,
        audit,
        schemas=lambda: schemas,
        agent_name=config.agent_name,
        ttl=config.approval_ttl,
        redactor=redactor,
    )
    decide = DecisionEndpoint(
        store,
        decider,
        refs=refs,
        csrf=csrf,
        who=identity(config, redactor),
        changes=changes,
        worker=worker,
    )
    extra: list[BaseRoute] = []
    if agui is not None:
        from ..ui._app import AguiEndpoint
        from ..ui._config import agui_config

        endpoint = AguiEndpoint(agui, config=agui_config(config), decider=decider)
        extra.append(Route("/agui", endpoint.handle, methods=["POST"]))
    return [
        *extra,
        Route("/", pages.inbox),
        Route("/partials/inbox", pages.inbox_partial),
        Route("/sessions/{session_id:path}", pages.session),
        Route("/partials/sessions/{session_id:path}", pages.session_partial),
        Route("/audit", pages.audit_page),
        Route("/api/decide", decide.handle, methods=["POST"]),
        Route("/events", events(changes)),
        Mount("/static", app=StaticFiles(directory=_STATIC), name="static"),
    ]


def _lifespan(
    store: SessionStore, config: ServeConfig, changes: Changes, worker: Worker | None
) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            group.start_soon(_poll_store, store, config.poll_interval, changes)
            if worker is not None:
                group.start_soon(worker.run)
            yield
            group.cancel_scope.cancel()

    return lifespan


async def _poll_store(store: SessionStore, interval: float, changes: Changes) -> None:
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
        await anyio.sleep(interval)


def _schemas(agent: Agent | None) -> Mapping[str, Any]:
    if agent is None:
        return {}
    found: dict[str, Any] = {}
    for source in agent.tool_sources:
        for spec in source.specs():
            found.setdefault(spec.name, spec.input_schema)
    return found
