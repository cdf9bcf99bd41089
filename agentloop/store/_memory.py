"""``MemorySessionStore``: the simplest conforming store, in-process only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import anyio.lowlevel
import attrs

from ..core._items import Item
from ._documents import (
    ItemTexts,
    answered_call_ids,
    check_items,
    common_prefix_length,
    decode_checkpoint,
    decode_items,
    encode_checkpoint,
)
from ._protocol import SessionInfo, StoredSession

__all__ = ["MemorySessionStore"]


@attrs.frozen
class _Record:
    head: str
    items: tuple[str, ...]
    updated_at: datetime
    sequence: int


class MemorySessionStore:
    """A :class:`SessionStore` that keeps documents in this process's memory.

    Documents are stored as JSON text, so what you save and what you load
    never share objects. Nothing survives the process; closing it keeps the
    data (``aclose`` has nothing to release), so one instance can stand for a
    store that is reopened. Good for tests and short-lived hosts.
    """

    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}
        self._started: dict[str, dict[str, str]] = {}
        self._sequence = 0
        self._texts = ItemTexts()

    async def __aenter__(self) -> MemorySessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing to release; the data stays readable."""

    async def save_checkpoint(self, session_id: str, checkpoint: Mapping[str, Any]) -> None:
        """Replace the session's document (see :meth:`SessionStore.save_checkpoint`)."""
        encoded = encode_checkpoint(session_id, checkpoint, self._texts.for_session(session_id))
        await anyio.lowlevel.checkpoint()
        previous = self._records.get(session_id)
        start = common_prefix_length(previous.items, encoded.items) if previous else 0
        answered = check_items(session_id, encoded.items, start)
        self._sequence += 1
        self._records[session_id] = _Record(
            encoded.head, encoded.items, datetime.now(UTC), self._sequence
        )
        self._texts.remember(encoded)
        started = self._started.get(session_id, {})
        for call_id in answered:
            started.pop(call_id, None)

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        """Record that ``call_id`` is about to run."""
        await anyio.lowlevel.checkpoint()
        self._started.setdefault(session_id, {})[call_id] = tool_name

    async def load(self, session_id: str) -> StoredSession | None:
        """The session's last document and its calls in doubt, or ``None``."""
        await anyio.lowlevel.checkpoint()
        record = self._records.get(session_id)
        if record is None:
            return None
        document = decode_checkpoint(record.head, record.items)
        answered = answered_call_ids(document["transcript"])
        started = frozenset(self._started.get(session_id, {})) - answered
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=started,
            updated_at=record.updated_at,
        )

    async def list_sessions(self) -> list[SessionInfo]:
        """Every saved session, most recently updated first."""
        await anyio.lowlevel.checkpoint()
        newest_first = sorted(self._records.items(), key=lambda entry: -entry[1].sequence)
        return [
            SessionInfo(
                session_id=session_id, updated_at=record.updated_at, item_count=len(record.items)
            )
            for session_id, record in newest_first
        ]

    async def delete(self, session_id: str) -> bool:
        """Forget the session and its started calls; ``True`` if it had a document."""
        await anyio.lowlevel.checkpoint()
        self._started.pop(session_id, None)
        self._texts.forget(session_id)
        return self._records.pop(session_id, None) is not None

    async def transcript(self, session_id: str) -> list[Item] | None:
        """The items of the session's last document, or ``None``."""
        await anyio.lowlevel.checkpoint()
        record = self._records.get(session_id)
        return None if record is None else decode_items(record.items)
