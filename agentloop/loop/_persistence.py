"""Every interaction between a driver and its ``SessionStore``, in one place.

What is written when (the seams where leases and claims attach):

- :meth:`Persistence.save_response` — after a model response with tool calls,
  before any call starts (a restore then runs the calls that never started
  instead of asking the model again);
- :meth:`Persistence.journal_started` — just before a non-idempotent call
  starts (``record_call_started``: at most once across a restart);
- :meth:`Persistence.save_finished_calls` — once a journaled call has its
  result (a restore keeps that result instead of answering "in doubt");
- :meth:`Persistence.save_step` — after every step ``next()`` returns;
- :func:`load` — ``Agent.resume(session_id=...)`` reads the latest document.

A failed save is logged and reported as a ``Warning`` event; the step stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from ..core._errors import CheckpointError, InvalidStateError
from ..core._items import Item
from ..store._protocol import SessionStore
from ._checkpoint import capture
from ._core import LoopCore
from ._effects import Effects
from ._events import Warning
from ._serde import unstructure
from ._state import DriverState, RoundCall, ToolRound

__all__ = ["Persistence", "load"]

log = structlog.get_logger("agentloop")


class Persistence:
    """Saves one driver's state to its store (a no-op without a store)."""

    def __init__(self, store: SessionStore | None, effects: Effects) -> None:
        self._store = store
        self._effects = effects
        self._item_documents: dict[int, tuple[Item, Any]] = {}
        self._journaled: set[str] = set()
        """Calls recorded as started whose result is not saved yet."""

    @property
    def enabled(self) -> bool:
        """Whether a store is attached."""
        return self._store is not None

    async def save_step(self, core: LoopCore) -> None:
        """Save after a step (calls still running are saved as not started)."""
        if self._store is not None:
            await self._save(core, core.state)

    async def save_response(self, core: LoopCore) -> None:
        """Journal a model response before any of its calls starts."""
        if self._store is not None:
            await self._save(core, DriverState.AFTER_TOOL_RESULT)

    async def journal_started(self, call: RoundCall, *, idempotent: bool) -> None:
        """Record a non-idempotent call as started before it runs (at most once)."""
        if self._store is None or idempotent:
            return
        await self._store.record_call_started(
            self._effects.session_id, call.call.id, call.call.name
        )
        self._journaled.add(call.call.id)

    async def save_finished_calls(self, core: LoopCore, tool_round: ToolRound) -> None:
        """Save the round once a call recorded as started has its result.

        A restore then keeps that result instead of answering the call as in
        doubt; calls still running are saved as not started (and answered in
        doubt if they were recorded as started).
        """
        if self._store is None or not self._journaled:
            return
        finished = [c for c in tool_round.calls if c.call.id in self._journaled and c.answered]
        if not finished:
            return
        for call in finished:
            self._journaled.discard(call.call.id)
        await self._save(core, DriverState.AFTER_TOOL_RESULT)

    async def _save(self, core: LoopCore, state: DriverState) -> None:
        assert self._store is not None
        session_id = self._effects.session_id
        try:
            document = capture(core, state, self._effects.config, self._memo_item_document())
            await self._store.save_checkpoint(session_id, document)
        except Exception as error:
            # The step happened; losing it to a storage fault would be worse.
            # The next save tries again.
            log.exception("saving the checkpoint failed", session_id=session_id)
            if self._effects.observed:
                self._effects.emit(
                    Warning(f"checkpoint not saved: {type(error).__name__}: {error}")
                )

    def _memo_item_document(self) -> Callable[[Item], Any]:
        """Reuse each unchanged item's document from the last save (the store skips it)."""
        previous = self._item_documents
        current: dict[int, tuple[Item, Any]] = {}
        self._item_documents = current  # only the current transcript's items are kept

        def document(item: Item) -> Any:
            known = previous.get(id(item))
            data = known[1] if known is not None and known[0] is item else unstructure(item)
            current[id(item)] = (item, data)
            return data

        return document


async def load(store: SessionStore | None, session_id: str) -> tuple[Any, frozenset[str]]:
    """The latest checkpoint document of ``session_id`` and its calls recorded as started."""
    if store is None:
        raise InvalidStateError(
            f"cannot resume session {session_id!r} by id: this agent has no store; "
            "build it with .store(store) or pass the checkpoint document"
        )
    stored = await store.load(session_id)
    if stored is None:
        raise CheckpointError(
            f"cannot resume session {session_id!r}: the store has no checkpoint for it"
        )
    return stored.checkpoint, stored.started_calls
