"""Transcript views and the tool_call/tool_result invariant."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import overload

import attrs

from ._errors import TranscriptError
from ._items import Item, ItemKind, ToolCallPart, ToolResultPart

__all__ = [
    "TranscriptView",
    "TranscriptViolation",
    "find_violation",
    "has_pending_input",
    "validate_transcript",
]


class TranscriptView(Sequence[Item]):
    """A read-only, fixed-length view of the first ``length`` items of a list.

    The driver only ever appends to its transcript list or replaces it whole,
    so a view taken at one moment never changes: handing one to a model costs
    O(1), not a copy.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Item], length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            # Only the selected items are copied, not the whole prefix.
            items = self._items
            return [items[position] for position in range(self._length)[index]]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("transcript index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Item]:
        return islice(self._items, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TranscriptView({list(self)!r})"


@attrs.frozen
class TranscriptViolation:
    """One broken rule: ``kind`` is ``orphaned``, ``duplicate``, ``duplicate_call`` or
    ``unanswered``; ``item_index`` is where it was found (``None`` for unanswered)."""

    kind: str
    call_ids: tuple[str, ...]
    item_index: int | None

    @property
    def message(self) -> str:
        """A sentence naming the rule and the call ids."""
        ids = ", ".join(self.call_ids)
        if self.kind == "orphaned":
            return f"orphaned tool_result for call {ids}: no earlier tool_call has this id"
        if self.kind == "duplicate":
            return f"duplicate tool_result for call {ids}: the call was already answered"
        if self.kind == "duplicate_call":
            return f"duplicate tool_call id {ids}: call ids must be unique in a transcript"
        return f"tool_call(s) without matching tool_result: {ids}"


def find_violation(items: Iterable[Item]) -> TranscriptViolation | None:
    """The first violation of the pairing invariant in ``items``, or ``None``.

    Rules: every tool_call id appears once; each is answered by exactly one
    tool_result later in the transcript; no tool_result comes without its call.
    """
    open_calls: dict[str, None] = {}
    seen_calls: set[str] = set()
    for index, item in enumerate(items):
        for part in item.parts:
            if isinstance(part, ToolCallPart):
                if part.id in seen_calls:
                    return TranscriptViolation("duplicate_call", (part.id,), index)
                seen_calls.add(part.id)
                open_calls[part.id] = None
            elif isinstance(part, ToolResultPart):
                if part.call_id in open_calls:
                    del open_calls[part.call_id]
                elif part.call_id in seen_calls:
                    return TranscriptViolation("duplicate", (part.call_id,), index)
                else:
                    return TranscriptViolation("orphaned", (part.call_id,), index)
    if open_calls:
        return TranscriptViolation("unanswered", tuple(open_calls), None)
    return None


def validate_transcript(items: Iterable[Item]) -> None:
    """Raise :class:`TranscriptError` if ``items`` break the tool_call/tool_result pairing."""
    violation = find_violation(items)
    if violation is not None:
        raise TranscriptError(
            f"transcript invariant violation: {violation.message}",
            violation=violation.kind,
            call_ids=violation.call_ids,
        )


_INPUT_BEARING = frozenset({ItemKind.USER, ItemKind.TOOL, ItemKind.NOTIFICATION})


def has_pending_input(items: Sequence[Item]) -> bool:
    """Whether the transcript ends in something a model should answer (user, tool, notification)."""
    return bool(items) and items[-1].kind in _INPUT_BEARING
