"""``agentloop.a2a``: A2A (a2a-sdk 1.x, protocol 1.0) both ways.

``A2AToolSource(url)`` offers a remote A2A agent as a tool; a remote task
waiting in ``input-required`` surfaces as a ``CallQuestion`` (kind
:data:`APPROVAL_KIND`, :data:`INPUT_KIND`, or a remote call's own question with
its kind and schema) and the host's answer continues it.

``create_a2a_app(agent, config=A2AConfig(url=...))`` returns an ASGI app: the
agent card at ``/.well-known/agent-card.json`` and JSON-RPC (``SendMessage``,
``SendStreamingMessage``, ...) at ``/``. A context is a session of the agent's
store; a task whose session parks on approvals or on a running call's question
waits in ``TASK_STATE_INPUT_REQUIRED`` until the client answers on the same task.
Needs the a2a extra (``pip install 'agentloop-runtime[a2a]'``). See
``docs/a2a.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import require_extra
from ..loop._agent import Agent
from ..serve._audit import AuditLog
from ._config import A2AConfig
from ._errors import RemoteAgentConnectionError, RemoteAgentError
from ._remote_questions import (
    APPROVAL_ANSWER_SCHEMA,
    APPROVAL_KIND,
    INPUT_ANSWER_SCHEMA,
    INPUT_KIND,
)
from ._tool_source import A2ATool, A2AToolSource

if TYPE_CHECKING:
    from a2a.server.tasks.task_store import TaskStore
    from starlette.types import ASGIApp

__all__ = [
    "APPROVAL_ANSWER_SCHEMA",
    "APPROVAL_KIND",
    "INPUT_ANSWER_SCHEMA",
    "INPUT_KIND",
    "A2AConfig",
    "A2ATool",
    "A2AToolSource",
    "RemoteAgentConnectionError",
    "RemoteAgentError",
    "create_a2a_app",
]


def create_a2a_app(
    agent: Agent,
    *,
    config: A2AConfig,
    task_store: TaskStore | None = None,
    audit: AuditLog | None = None,
) -> ASGIApp:
    """``agent`` (which needs a store) as an A2A server, an ASGI app.

    ``task_store`` keeps the A2A task records (default: in memory; pass
    a2a-sdk's ``DatabaseTaskStore`` so tasks outlive a restart, as the
    sessions do in the agent's store). Decisions are recorded in ``audit``
    (default: a ``MemoryAuditLog``) and in the store. Raises
    ``ModuleNotFoundError`` naming the extra when the a2a extra is missing,
    ``ValueError`` for an agent without a store.
    """
    require_extra("a2a", "agentloop.a2a", "a2a", "starlette")
    from ._app import build_a2a_app

    return build_a2a_app(agent, config=config, task_store=task_store, audit=audit)
