"""A session's step history: ``SavedStep`` and the ``SessionHistory`` protocol.

A store that keeps history records every save of a session as a numbered
step (1, 2, 3, ...), up to its retention limit, so any recent step can be
loaded, forked into a new session or rewound to. ``BackendSessionStore`` (so
every shipped store) implements it; ``Agent.fork``, ``Agent.rewind`` and
``Agent.history`` use it. See ``docs/store.md``, "Step history: fork and rewind".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from ._session_store import SessionStatus, StoredSession

__all__ = ["INHERITED_KEYS", "SavedStep", "SessionHistory", "inherited_keys"]

INHERITED_KEYS = "agentloop.inherited_keys"
"""The key of a forked session's config metadata that maps each call the fork inherited
unanswered to the session its idempotency key is derived from (its original's)."""


def inherited_keys(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The calls of a session config's ``metadata`` that keep another session's keys."""
    found = metadata.get(INHERITED_KEYS)
    if not isinstance(found, Mapping):
        return {}
    return {key: value for key, value in found.items() if isinstance(value, str)}


@attrs.frozen(kw_only=True)
class SavedStep:
    """One saved step of a session's history: what ``history()`` lists.

    ``step`` numbers the session's saves from 1; ``version`` is the version
    that save returned; ``state`` is the driver state it was saved in
    (``"IDLE"``, ``"AWAITING_APPROVAL"``, ``"AFTER_TOOL_RESULT"``...) and
    ``status`` what the store derived from it; ``summary`` is a short text:
    the last item's kind and the start of its text; ``origin`` says how a
    step that did not come from a driver came about (``"rewound to step 3"``,
    ``"forked from 'order-7' at step 5"``), else ``None``.
    """

    session_id: str
    step: int
    version: int
    saved_at: datetime
    state: str
    status: SessionStatus
    item_count: int
    summary: str
    origin: str | None = None


@runtime_checkable
class SessionHistory(Protocol):
    """What a store that keeps a step history offers besides ``SessionStore``."""

    async def history(self, session_id: str) -> list[SavedStep]:
        """The session's kept steps, oldest first (``[]`` for an unknown session)."""
        ...

    async def load_step(self, session_id: str, step: int) -> StoredSession:
        """The session as it was saved at ``step``; ``InvalidInputError`` naming the steps
        kept when it is not one of them."""
        ...

    async def fork(self, session_id: str, *, at: int | None, new_session_id: str) -> int:
        """Save the document of step ``at`` (``None``: the latest) as the first step of the
        new session ``new_session_id``; its version. The original is unchanged."""
        ...

    async def rewind(self, session_id: str, *, to: int, expected_version: int | None = None) -> int:
        """Save the document of step ``to`` as the session's latest, a new step; its
        version. The history is kept, so a later step can be rewound to again."""
        ...
