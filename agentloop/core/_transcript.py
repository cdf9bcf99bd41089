"""Transcript views and the provider invariant (tool_call/tool_result pairing and adjacency)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import overload

import attrs

from ._errors import TranscriptError
from ._items import Item, ItemKind, ToolCallPart, ToolResultPart

__all__ = [
    "VIOLATION_KINDS",
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


VIOLATION_KINDS: tuple[str, ...] = (
    "orphaned",
    "duplicate",
    "duplicate_call",
    "unanswered",
    "interleaved",
    "misplaced",
)
"""Every :attr:`TranscriptViolation.kind`, in the order the rules are documented."""


@attrs.frozen
class TranscriptViolation:
    """One broken rule of the provider invariant (see :func:`find_violation`).

    ``kind`` is one of :data:`VIOLATION_KINDS`; ``call_ids`` names the calls
    involved; ``item_index`` is the item where the rule broke (``None`` for
    calls still open at the end of the transcript).
    """

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
        if self.kind == "interleaved":
            return (
                f"item between tool_call(s) {ids} and their tool_result(s): providers need the "
                "results right after the assistant item that made the calls"
            )
        if self.kind == "misplaced":
            return (
                f"misplaced tool part for call {ids}: tool_calls belong in assistant items "
                "and tool_results in tool items"
            )
        if self.item_index is not None:
            return (
                f"tool_call(s) without matching tool_result: {ids} (the results must come "
                "right after the assistant item that made the calls)"
            )
        return f"tool_call(s) without matching tool_result: {ids}"


def find_violation(items: Iterable[Item]) -> TranscriptViolation | None:
    """The first violation of the provider invariant in ``items``, or ``None``.

    The invariant, as OpenAI, Anthropic and Gemini check it:

    - tool_call parts are in assistant items, tool_result parts in tool items
      (``misplaced``);
    - every tool_call id appears once (``duplicate_call``);
    - the calls of an assistant item are answered by the tool items right
      after it, each call exactly once, in any order, one result per tool item
      or several (``duplicate``; a result for no earlier call is ``orphaned``);
    - nothing else comes between an assistant item's calls and their last
      result: no context, user, notification or assistant item
      (``interleaved`` if the results come later, ``unanswered`` if they never
      do);
    - tail: the transcript does not end with calls still open
      (``unanswered``, ``item_index`` ``None``).

    Notifications (a background call's late result), interjected input and
    new turns come after a round's last result, never inside the round.
    """
    listed = items if isinstance(items, Sequence) else list(items)
    answered_at: dict[str, int] = {}
    for index, item in enumerate(listed):
        for part in item.parts:
            if isinstance(part, ToolResultPart):
                answered_at.setdefault(part.call_id, index)
    open_calls: dict[str, None] = {}  # the open round's unanswered calls, in call order
    seen_calls: set[str] = set()
    for index, item in enumerate(listed):
        if (misplaced := _misplaced(item)) is not None:
            return TranscriptViolation("misplaced", (misplaced,), index)
        for call in item.tool_calls():
            if call.id in seen_calls:
                return TranscriptViolation("duplicate_call", (call.id,), index)
            seen_calls.add(call.id)
        if open_calls and item.kind is not ItemKind.TOOL:
            ids = tuple(open_calls)
            later = any(answered_at.get(call_id, -1) > index for call_id in ids)
            return TranscriptViolation("interleaved" if later else "unanswered", ids, index)
        for part in item.parts:
            if isinstance(part, ToolCallPart):
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


def _misplaced(item: Item) -> str | None:
    for part in item.parts:
        if isinstance(part, ToolCallPart) and item.kind is not ItemKind.ASSISTANT:
            return part.id
        if isinstance(part, ToolResultPart) and item.kind is not ItemKind.TOOL:
            return part.call_id
    return None


def validate_transcript(items: Iterable[Item]) -> None:
    """Raise :class:`TranscriptError` if ``items`` break the provider invariant.

    The rules are those of :func:`find_violation`.
    """
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
