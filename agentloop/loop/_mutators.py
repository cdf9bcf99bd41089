"""Loop mutators: transcript passes (compaction, redaction) run before model calls."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableSequence, Sequence
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


class _ItemsView(Sequence[Item]):
    """A live, read-only view of the cursor's current list (no copy, no writes)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[Item]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return tuple(self._items[index])
        return self._items[index]

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TranscriptCursor.items({self._items!r})"


class TranscriptCursor(MutableSequence[Item]):
    """The transcript as a mutator sees it: a list that records whether it was changed.

    Reads go to the driver's list; the first write copies it, so earlier
    model requests keep seeing what they were given. Every change goes
    through the cursor (``cursor[i] = item``, ``del cursor[a:b]``,
    ``insert``, ``append``, ``replace``), so every change marks it
    ``dirty`` and gets validated: :attr:`items` is a read-only view.
    """

    __slots__ = ("_items", "_view", "dirty")

    def __init__(self, items: list[Item]) -> None:
        self._items = items
        self._view = _ItemsView(items)
        self.dirty = False

    def _writable(self) -> list[Item]:
        if not self.dirty:
            self._items = list(self._items)
            self.dirty = True
        self._view = _ItemsView(self._items)  # a new view per write: ``items is before`` fails
        return self._items

    def _set(self, items: list[Item]) -> None:
        self._items = items
        self._view = _ItemsView(items)
        self.dirty = True

    @property
    def items(self) -> Sequence[Item]:
        """The current contents, read-only (write through the cursor's methods).

        The same view object is returned until the cursor first copies or
        replaces its list, so ``cursor.items is before`` tells whether a
        mutator changed anything.
        """
        return self._view

    def replace(self, items: Iterable[Item]) -> None:
        """Replace the whole transcript (marks the cursor dirty)."""
        self._set(list(items))

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
