"""Loop mutators: transcript passes (compaction, redaction) run before model calls."""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableSequence
from enum import StrEnum
from typing import Protocol, overload, runtime_checkable

import attrs

from ..core._cancellation import TurnCancellation
from ..core._items import Item
from ._events import AgentEvent

__all__ = ["LoopMutator", "MutationContext", "MutationPoint", "TranscriptCursor"]


class MutationPoint(StrEnum):
    """Where in the loop a mutator runs."""

    AFTER_TURN_ENDED = "after_turn_ended"
    """Before a fresh turn's first model call (new input already in the transcript)."""
    AFTER_TOOL_RESULT = "after_tool_result"
    """Before a continuation call, right after a tool round's results."""


@attrs.frozen
class MutationContext:
    """What a mutator knows about where it runs; ``emit`` reaches the observers."""

    session_id: str
    turn_id: str | None
    point: MutationPoint
    cancellation: TurnCancellation | None
    emit: Callable[[AgentEvent], None]


class TranscriptCursor(MutableSequence[Item]):
    """The transcript as a mutator sees it: a list that records whether it was changed.

    Reads go to the driver's list; the first write copies it, so earlier
    model requests keep seeing what they were given.
    """

    __slots__ = ("_items", "dirty")

    def __init__(self, items: list[Item]) -> None:
        self._items = items
        self.dirty = False

    def _writable(self) -> list[Item]:
        if not self.dirty:
            self._items = list(self._items)
            self.dirty = True
        return self._items

    @property
    def items(self) -> list[Item]:
        """The current contents (do not mutate; use the cursor's methods)."""
        return self._items

    def replace(self, items: Iterable[Item]) -> None:
        """Replace the whole transcript (marks the cursor dirty)."""
        self._items = list(items)
        self.dirty = True

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> MutableSequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | MutableSequence[Item]:
        return self._items[index]

    @overload
    def __setitem__(self, index: int, value: Item) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Item]) -> None: ...
    def __setitem__(self, index: int | slice, value: Item | Iterable[Item]) -> None:
        self._writable()[index] = value  # type: ignore[index,assignment]

    def __delitem__(self, index: int | slice) -> None:
        del self._writable()[index]

    def insert(self, index: int, value: Item) -> None:
        """Insert ``value`` before ``index``."""
        self._writable().insert(index, value)


@runtime_checkable
class LoopMutator(Protocol):
    """Rewrites the transcript at a mutation point.

    A pass that changes the cursor is validated; breaking the
    tool_call/tool_result pairing raises ``MutatorError``. An optional
    ``name`` attribute labels the mutator in events.
    """

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        """Read and optionally rewrite ``cursor``."""
        ...
