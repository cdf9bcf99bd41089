"""The inbox's "needs attention" list: stored sessions whose status disagrees with their
transcript (``agentloop.store.session_problems``), so none is silently parked."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..host._problems import session_problems
from ..loop._session_store import SessionStore
from ._redact import Redactor

__all__ = ["AttentionList"]


class AttentionList:
    """Checks every stored session, loading again only those updated since the last look."""

    def __init__(self, store: SessionStore, redactor: Redactor) -> None:
        self._store = store
        self._redactor = redactor
        self._seen: dict[str, tuple[datetime, str, tuple[str, ...]]] = {}

    async def rows(self) -> list[dict[str, Any]]:
        """One row per session with problems, most recently updated first."""
        seen: dict[str, tuple[datetime, str, tuple[str, ...]]] = {}
        for info in await self._store.list_sessions():
            cached = self._seen.get(info.session_id)
            if cached is None or cached[0] != info.updated_at:
                stored = await self._store.load(info.session_id)
                if stored is None:  # deleted since it was listed
                    continue
                problems = tuple(self._redactor.text(p) for p in session_problems(stored))
                cached = (info.updated_at, stored.status.value, problems)
            seen[info.session_id] = cached
        self._seen = seen
        return [
            {"session_id": self._redactor.text(session_id), "status": status, "problems": problems}
            for session_id, (_, status, problems) in seen.items()
            if problems
        ]
