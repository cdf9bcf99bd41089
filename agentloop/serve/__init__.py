"""``agentloop serve``: the approval inbox, a web UI over a session store.

``create_app(store, config=..., audit=..., agent=...)`` returns the ASGI app
(Starlette); ``agentloop serve --store sqlite:///PATH.db`` runs it with
uvicorn. Needs the serve extra (``pip install 'agentloop-runtime[serve]'``). See ``docs/serve.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import is_installed
from ..loop._agent import Agent
from ..loop._session_store import SessionStore
from ._audit import (
    AnswerEntry,
    AuditEntry,
    AuditLog,
    DecisionAction,
    MemoryAuditLog,
    ResolutionEntry,
)
from ._audit_sql import PostgresAuditLog, SqliteAuditLog
from ._config import SERVE_MODULES, ServeConfig
from ._run import open_store
from ._worker import Worker

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = [
    "AnswerEntry",
    "AuditEntry",
    "AuditLog",
    "DecisionAction",
    "MemoryAuditLog",
    "PostgresAuditLog",
    "ResolutionEntry",
    "ServeConfig",
    "SqliteAuditLog",
    "Worker",
    "create_app",
    "open_store",
]


def create_app(
    store: SessionStore,
    *,
    config: ServeConfig | None = None,
    audit: AuditLog | None = None,
    agent: Agent | None = None,
    agui: bool = False,
) -> Starlette:
    """The inbox as an ASGI app (Starlette) over ``store``.

    ``config`` defaults to a generated token and in-process resumes;
    ``audit`` to a ``MemoryAuditLog``. With ``agent`` (and ``config.worker``)
    a decision is followed by an in-process worker resuming the session;
    without, decisions are only recorded for external workers. With
    ``agui`` (and ``agent``), ``POST /agui`` is the AG-UI endpoint
    (``docs/agui.md``; needs the agui extra). Raises
    ``ModuleNotFoundError`` naming the extra when the serve extra is
    not installed.
    """
    try:
        from ._app import create_app as build
    except ModuleNotFoundError as error:
        # Name the extra's first missing module in its declared order, not whichever
        # one the app's imports happen to reach first.
        name = next((m for m in SERVE_MODULES if not is_installed(m)), error.name)
        raise ModuleNotFoundError(
            f"agentloop serve needs the serve extra ({name} is missing): "
            "pip install 'agentloop-runtime[serve]'",
            name=name,
        ) from None
    return build(store, config=config, audit=audit, agent=agent, agui=agui)
