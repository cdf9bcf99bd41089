"""What a session store is: the ``SessionStore`` protocol and the values it returns.

A store keeps, per session, the last checkpoint document a driver saved and
the ids of tool calls recorded as started. The driver imports these names
from :mod:`agentloop.store`; this module imports nothing outside ``core`` so
the loop can depend on it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from ..core._items import Item

__all__ = ["SessionInfo", "SessionStore", "StoredSession"]


@attrs.frozen(kw_only=True)
class StoredSession:
    """A session as loaded from a store.

    ``checkpoint`` is deep-equal to the last document saved; ``started_calls``
    are the calls recorded as started that have no tool result in that
    checkpoint's transcript (calls in doubt); ``updated_at`` is in UTC.
    """

    session_id: str
    checkpoint: dict[str, Any]
    started_calls: frozenset[str]
    updated_at: datetime


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One row of :meth:`SessionStore.list_sessions`: a session and its size."""

    session_id: str
    updated_at: datetime
    item_count: int


@runtime_checkable
class SessionStore(Protocol):
    """Durable storage for checkpoint documents and started tool calls.

    Every method is safe to call from several tasks at once. Run
    :mod:`agentloop.testing.store_conformance` against an implementation to
    check it keeps this contract.
    """

    async def save_checkpoint(self, session_id: str, checkpoint: Mapping[str, Any]) -> None:
        """Replace the session's document with ``checkpoint``, atomically.

        Raises ``CheckpointError`` (and changes nothing) when the document has
        no ``format``/``version``, names another session, has no transcript
        list or holds a value JSON cannot represent exactly. Records of
        started calls whose result the new transcript holds are cleared.
        """
        ...

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run; durable before it returns."""
        ...

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document and calls in doubt, or ``None`` if never saved."""
        ...

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Forget the session and its started calls; ``True`` if it had a document."""
        ...

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None`` if never saved."""
        ...
