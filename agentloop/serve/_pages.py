"""The HTML pages: the inbox, a session, the audit log, and the partials live pages reload."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import attrs
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..loop._session_history import SessionHistory
from ..loop._session_store import SessionStore
from ._attention import AttentionList
from ._audit import AuditLog
from ._config import ServeConfig
from ._in_doubt import doubt_cards
from ._inbox import InboxRow, pending_approvals, session_view
from ._questions import question_cards
from ._redact import Redactor
from ._views import CallRefs, decision_status, entry_values, row_values

__all__ = ["Pages", "identity"]

_TEMPLATES = __file__.rsplit("/", 1)[0] + "/templates"


def identity(config: ServeConfig, redactor: Redactor) -> Callable[[Request], str]:
    """Who a request's decisions are recorded as: the identity header's value, or the default."""

    def who(request: Request) -> str:
        if config.identity_header:
            value = request.headers.get(config.identity_header)
            if value:
                return redactor.text(value.strip()[:200])
        return config.identity

    return who


class Pages:
    """Renders each page from the store and the audit log (autoescaped Jinja2 templates)."""

    def __init__(
        self,
        store: SessionStore,
        audit: AuditLog,
        *,
        config: ServeConfig,
        redactor: Redactor,
        refs: CallRefs,
        csrf: str,
        schemas: Mapping[str, Any],
    ) -> None:
        self._store = store
        self._audit = audit
        self._config = config
        self._redactor = redactor
        self._refs = refs
        self._csrf = csrf
        self._schemas = schemas
        self._who = identity(config, redactor)
        self._attention = AttentionList(store, redactor)
        self._templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True
        )

    def _page(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        template = self._templates.get_template(name)
        html = template.render(csrf=self._csrf, who=self._who(request), **values)
        return HTMLResponse(html, status_code=status)

    async def _waiting_rows(self) -> list[InboxRow]:
        rows: list[InboxRow] = []
        for summary in await self._store.sessions_awaiting_approval():
            stored = await self._store.load(summary.session_id)
            if stored is not None:
                rows.extend(
                    pending_approvals(
                        stored,
                        schemas=self._schemas,
                        agent_name=self._config.agent_name,
                        ttl=self._config.approval_ttl,
                        redactor=self._redactor,
                    )
                )
        rows.sort(key=lambda r: r.asked_at or datetime.min.replace(tzinfo=UTC), reverse=True)
        return rows

    async def _inbox_values(self) -> dict[str, Any]:
        now = datetime.now(UTC)
        rows = [row_values(r, now, self._refs, self._redactor) for r in await self._waiting_rows()]
        recent = []
        for entry in await self._audit.entries(10):
            stored = await self._store.load(entry.session_id)
            recent.append(
                {
                    **entry_values(entry, self._redactor),
                    "call_ref": self._refs.ref(entry.session_id, entry.call_id),
                    "status": decision_status(stored, entry, self._redactor),
                }
            )
        return {
            "rows": rows,
            "questions": await question_cards(self._store, self._refs, self._redactor),
            "doubts": await doubt_cards(self._store, self._refs, self._redactor),
            "recent": recent,
            "attention": await self._attention.rows(),
        }

    async def inbox(self, request: Request) -> Response:
        values = await self._inbox_values()
        return self._page(request, "inbox.html", title="Inbox", partial="/partials/inbox", **values)

    async def inbox_partial(self, request: Request) -> Response:
        return self._page(request, "_inbox.html", **(await self._inbox_values()))

    async def _session_values(self, session_id: str) -> dict[str, Any] | None:
        stored = await self._store.load(session_id)
        items = await self._store.transcript(session_id)
        if stored is None or items is None:
            return None
        steps = []
        if isinstance(self._store, SessionHistory):  # read-only: fork and rewind are the API's
            steps = [
                attrs.evolve(step, summary=self._redactor.text(step.summary))
                for step in reversed(await self._store.history(session_id))
            ]
        return {"view": session_view(stored, items, self._redactor), "steps": steps}

    async def session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        values = await self._session_values(session_id)
        if values is None:
            return self._page(
                request,
                "error.html",
                404,
                title="No such session",
                partial="",
                message=f"The store has no session {session_id!r}; pick one from the inbox.",
            )
        return self._page(
            request,
            "session.html",
            title=f"Session {session_id}",
            partial=f"/partials/sessions/{quote(session_id, safe='')}",
            **values,
        )

    async def session_partial(self, request: Request) -> Response:
        values = await self._session_values(request.path_params["session_id"])
        if values is None:
            return HTMLResponse("<p class='error'>The session is gone.</p>", 404)
        return self._page(request, "_session.html", **values)

    async def audit_page(self, request: Request) -> Response:
        entries = [entry_values(e, self._redactor) for e in await self._audit.entries(500)]
        return self._page(request, "audit.html", title="Audit log", partial="", entries=entries)
