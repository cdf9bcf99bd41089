"""The AG-UI endpoint as an ASGI app: ``POST`` a ``RunAgentInput``, read AG-UI events (SSE).

The requests pass, outermost first: ``SecurityHeaders``, CORS for the
configured origins (preflights answered before the token is asked for),
``HostCheck`` (421), ``TokenGate`` (401), ``BodyLimit`` (413), then the
endpoint: an ``Origin`` that is neither the endpoint's own nor allowed is
refused (403), a body that is not ``application/json`` (415), too deep (400)
or not a ``RunAgentInput`` (422); a valid one is answered by a stream of AG-UI
events, framed by the ``ag-ui-protocol`` package's encoder.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import anyio
import pydantic
from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..loop._agent import Agent
from ..serve._access import SessionCookies, TokenGate
from ..serve._audit import AuditLog, MemoryAuditLog
from ..serve._decide import Decider
from ..serve._guards import BodyLimit, HostCheck, RequestRefused, SecurityHeaders, read_json
from ..serve._redact import Redactor
from ._config import AguiConfig
from ._run import AguiRunner

__all__ = ["AguiEndpoint", "build_agui_app"]


def _schemas(agent: Agent) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for source in agent.tool_sources:
        for spec in source.specs():
            found.setdefault(spec.name, spec.input_schema)
    return found


class AguiEndpoint:
    """``POST``: one AG-UI run per request, answered as ``text/event-stream``."""

    def __init__(
        self,
        agent: Agent,
        *,
        config: AguiConfig,
        audit: AuditLog | None = None,
        decider: Decider | None = None,
    ) -> None:
        store = agent.store
        if store is None:
            raise ValueError(
                "the AG-UI endpoint needs an agent with a session store "
                "(Agent.builder().store(store)): threads are sessions of that store"
            )
        self._config = config
        self._redactor = Redactor((config.token, *config.secrets))
        schemas = _schemas(agent)
        decider = decider or Decider(
            store,
            audit if audit is not None else MemoryAuditLog(),
            schemas=lambda: schemas,
            agent_name=config.agent_name,
            ttl=config.approval_ttl,
            redactor=self._redactor,
        )
        self._runner = AguiRunner(
            agent,
            store,
            config=config,
            decider=decider,
            redactor=self._redactor,
            schemas=lambda: schemas,
        )

    def _who(self, request: Request) -> str:
        header = self._config.identity_header
        if header:
            value = request.headers.get(header)
            if value:
                return self._redactor.text(value.strip()[:200])
        return self._config.identity

    def _origin_refusal(self, request: Request) -> str | None:
        origin = request.headers.get("origin")
        if origin is None:
            return None
        own = f"{request.url.scheme}://{request.url.netloc}"
        if origin == own or origin in self._config.allowed_origins:
            return None
        return (
            f"refused: cross-origin request from {origin}; allow it with "
            "AguiConfig(allowed_origins=(...)) or serve the frontend from this origin"
        )

    async def handle(self, request: Request) -> Response:
        """Answer one request: the run's event stream, or a JSON refusal."""
        refusal = self._origin_refusal(request)
        if refusal is not None:
            return _refused(refusal, 403)
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _refused(
                f"refused: a run is sent as application/json, got {content_type or 'none'}", 415
            )
        try:
            body = await read_json(request)
        except RequestRefused as refused:
            return _refused(refused.message, refused.status)
        if body is None:
            return _refused("refused: the body is not JSON; send a RunAgentInput", 400)
        try:
            run_input = RunAgentInput.model_validate(body)
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in error.errors()[:5]
            )
            return _refused(f"refused: the body is not a RunAgentInput: {problems}", 422)
        return _EventStream(self._runner.run, run_input, self._who(request))


def _refused(message: str, status: int) -> Response:
    return JSONResponse({"ok": False, "error": message, "status": status}, status)


class _EventStream(Response):
    """Streams the events one run emits, as Server-Sent Events, while it runs."""

    def __init__(
        self,
        run: Callable[[RunAgentInput, str, Callable[[BaseEvent], None]], Any],
        run_input: RunAgentInput,
        who: str,
    ) -> None:
        self._encoder = EventEncoder()
        super().__init__(
            status_code=200,
            media_type=self._encoder.get_content_type(),
            headers={"x-accel-buffering": "no"},
        )
        # A stream has no length: drop the ``content-length: 0`` of the empty body.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self._run = run
        self._input = run_input
        self._who = who

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        # Unbounded: one run's events, produced between the driver's awaits.
        sender, receiver = anyio.create_memory_object_stream[BaseEvent](math.inf)

        def emit(event: BaseEvent) -> None:
            # After a disconnect the turn closes (cancelled) with nobody reading.
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                sender.send_nowait(event)

        async def produce() -> None:
            with sender:
                await self._run(self._input, self._who, emit)

        gone: list[bool] = []

        async def watch(scope: anyio.CancelScope) -> None:
            # A client that goes away cancels the run: its step closes the turn.
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.append(True)
            scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(produce)
            group.start_soon(watch, group.cancel_scope)
            with receiver:
                async for event in receiver:
                    frame = self._encoder.encode(event).encode("utf-8")
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
            group.cancel_scope.cancel()  # the run ended: stop watching
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class _AguiApp(Starlette):
    """Starlette with ``SecurityHeaders`` outside its own error middleware."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


def build_agui_app(
    agent: Agent, *, config: AguiConfig | None = None, audit: AuditLog | None = None
) -> Starlette:
    """The AG-UI endpoint at ``/`` behind the inbox's guards (see the module docstring)."""
    config = config or AguiConfig()
    endpoint = AguiEndpoint(agent, config=config, audit=audit)
    middleware = []
    if config.allowed_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.allowed_origins),
                allow_methods=["POST"],
                allow_headers=["authorization", "content-type", "accept"],
            )
        )
    middleware += [
        Middleware(HostCheck, configured=config.allowed_hosts),
        Middleware(
            TokenGate, token=config.token, cookies=SessionCookies(config.token, 12 * 3600.0)
        ),
        Middleware(BodyLimit),
    ]
    return _AguiApp(routes=[Route("/", endpoint.handle, methods=["POST"])], middleware=middleware)
