"""The A2A server as an ASGI app: the agent card, and JSON-RPC behind the inbox's guards.

``GET /.well-known/agent-card.json`` is public (clients discover the agent
and its bearer scheme there); every other request passes ``HostCheck``
(421), ``TokenGate`` (401) and ``BodyLimit`` (413) before a2a-sdk's JSON-RPC
dispatcher (``SendMessage``, ``SendStreamingMessage``, ``GetTask``...) at
``/``. ``SecurityHeaders`` wraps everything.
"""

from __future__ import annotations

from typing import Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_store import TaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from ..loop._agent import Agent
from ..serve._access import SessionCookies, TokenGate
from ..serve._audit import AuditLog, MemoryAuditLog
from ..serve._decide import Decider
from ..serve._guards import BodyLimit, HostCheck, SecurityHeaders
from ..serve._redact import Redactor
from ._config import A2AConfig
from ._executor import AgentLoopExecutor
from ._run import A2ARunner

__all__ = ["agent_card", "build_a2a_app"]


def agent_card(config: A2AConfig, agent: Agent) -> AgentCard:
    """The card describing ``agent`` at ``config.url``: JSON-RPC, streaming, a bearer token."""
    tools = sorted(spec.name for source in agent.tool_sources for spec in source.specs())
    return AgentCard(
        name=config.name,
        description=config.description,
        version=config.version,
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=config.url)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="agent",
                name=config.name,
                description=config.description + (f" Tools: {', '.join(tools)}." if tools else ""),
                tags=["agentloop"],
            )
        ],
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
    )


class _PublicCard:
    """Routes the agent card's path to ``card`` and every other request to ``guarded``."""

    def __init__(self, card: ASGIApp, guarded: ASGIApp) -> None:
        self._card = card
        self._guarded = guarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == AGENT_CARD_WELL_KNOWN_PATH:
            await self._card(scope, receive, send)
        else:
            await self._guarded(scope, receive, send)


def build_a2a_app(
    agent: Agent,
    *,
    config: A2AConfig,
    task_store: TaskStore | None = None,
    audit: AuditLog | None = None,
) -> ASGIApp:
    """The A2A server for ``agent`` (see the module docstring)."""
    store = agent.store
    if store is None:
        raise ValueError(
            "the A2A server needs an agent with a session store (Agent.builder().store(store)): "
            "A2A contexts are sessions of that store"
        )
    redactor = Redactor((config.token, *config.secrets))
    schemas: dict[str, Any] = {}
    for source in agent.tool_sources:
        for spec in source.specs():
            schemas.setdefault(spec.name, spec.input_schema)
    decider = Decider(
        store,
        audit if audit is not None else MemoryAuditLog(),
        schemas=lambda: schemas,
        agent_name=config.agent_name,
        ttl=config.approval_ttl,
        redactor=redactor,
    )
    runner = A2ARunner(
        agent,
        store,
        decider=decider,
        redactor=redactor,
        schemas=lambda: schemas,
        agent_name=config.agent_name,
        approval_ttl=config.approval_ttl,
        lease_ttl=config.lease_ttl,
    )
    card = agent_card(config, agent)
    handler = DefaultRequestHandler(
        agent_executor=AgentLoopExecutor(runner, who=config.identity),
        task_store=task_store if task_store is not None else InMemoryTaskStore(),
        agent_card=card,
    )
    guarded = Starlette(
        routes=create_jsonrpc_routes(handler, rpc_url="/"),
        middleware=[
            Middleware(TokenGate, token=config.token, cookies=SessionCookies(config.token, 3600.0)),
            Middleware(BodyLimit),
        ],
    )
    public = Starlette(routes=create_agent_card_routes(card))
    return SecurityHeaders(HostCheck(_PublicCard(public, guarded), config.allowed_hosts))
