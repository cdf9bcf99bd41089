"""Where a transcript may be cut: blocks that keep every call with its results."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..core._items import Item, ItemKind, ToolCallPart, ToolResultPart

__all__ = ["block_starts", "input_cuts", "protected_start"]

_INPUT = frozenset({ItemKind.USER, ItemKind.NOTIFICATION})


def block_starts(items: Sequence[Item]) -> list[int]:
    """The indexes where a block begins.

    A block is the shortest run of items in which every tool call is answered:
    an assistant item with calls extends to the item holding its last result
    (so a call, its results and anything between them stay together); every
    other item is a block of its own. Cutting only at block starts never
    separates a call from its results or results from the call's item.
    """
    starts: list[int] = []
    open_calls: set[str] = set()
    for index, item in enumerate(items):
        if not open_calls:
            starts.append(index)
        for part in item.parts:
            if isinstance(part, ToolCallPart):
                open_calls.add(part.id)
            elif isinstance(part, ToolResultPart):
                open_calls.discard(part.call_id)
    return starts


def input_cuts(items: Sequence[Item]) -> list[int]:
    """Block starts at a user or notification item, in order.

    The kept part of a transcript begins at one of these, so the first
    message after the system prompt is input (what every provider accepts),
    and no tool pair is split.
    """
    return [index for index in block_starts(items) if items[index].kind in _INPUT]


def protected_start(items: Sequence[Item], keep_last: int) -> int:
    """The index from which the newest ``keep_last`` items, widened to whole blocks, begin.

    ``len(items)`` when ``keep_last`` is 0 (nothing protected).
    """
    if keep_last <= 0:
        return len(items)
    first = max(0, len(items) - keep_last)
    return max((start for start in block_starts(items) if start <= first), default=0)


def preserved_indexes(items: Sequence[Item], kinds: Collection[ItemKind]) -> list[int]:
    """The indexes of items whose kind is in ``kinds``."""
    return [index for index, item in enumerate(items) if item.kind in kinds]
