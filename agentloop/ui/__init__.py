"""``agentloop.ui``: the AG-UI endpoint, for the frontends that speak AG-UI.

``create_agui_app(agent, config=AguiConfig(token=...))`` returns an ASGI app
(Starlette) that takes a ``RunAgentInput`` by ``POST`` and streams AG-UI
events. A thread is a session of the agent's store; an approval ends the run
with an interrupt outcome, answered by the next run's ``resume``. Needs the
agui extra (``pip install 'agentloop-runtime[agui]'``). See ``docs/agui.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import require_extra
from ..loop._agent import Agent
from ..serve._audit import AuditLog
from ._config import AguiConfig

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["AguiConfig", "create_agui_app"]


def create_agui_app(
    agent: Agent, *, config: AguiConfig | None = None, audit: AuditLog | None = None
) -> Starlette:
    """The AG-UI endpoint for ``agent`` (which needs a store) as an ASGI app.

    ``POST /`` with a ``RunAgentInput`` (JSON) and ``Authorization: Bearer
    TOKEN`` answers with the run's AG-UI events (``text/event-stream``).
    Decisions made through ``resume`` are recorded in ``audit`` (default: a
    ``MemoryAuditLog``) and in the store. Raises ``ModuleNotFoundError``
    naming the extra when the agui extra is not installed, and
    ``ValueError`` for an agent without a store.
    """
    require_extra("agui", "agentloop.ui", "ag_ui", "pydantic", "starlette")
    from ._app import build_agui_app

    return build_agui_app(agent, config=config, audit=audit)
