"""The history one agent hands to another: provider-neutral and still paired.

What a model wrote for itself does not travel: reasoning parts (Anthropic's
signed thinking, OpenAI's encrypted reasoning items, Gemini's thought
signatures) are bound to the model and account that made them, and a
provider refuses them from another (or, for OpenAI Responses, a reasoning
item without its following item). :func:`portable_history` drops them, the
provider metadata that replays them (``anthropic.``, ``openai.``,
``gemini.`` keys: signatures, encrypted content, item ids) and the provider's
own items (custom parts of those providers), and the system and developer
items (the receiving agent brings its own instructions). Every tool call
keeps its one result, so the history is valid for every adapter.

:func:`without_round` takes the handoff's own round out: the transfer call,
its result, and its assistant item when nothing else is left in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs

from ..core._errors import InvalidInputError
from ..core._items import (
    CustomPart,
    Item,
    ItemKind,
    Part,
    ReasoningPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core._transcript import find_violation, has_pending_input

__all__ = [
    "HistoryFilter",
    "checked_history",
    "portable_history",
    "without_round",
    "without_tool_rounds",
]

HistoryFilter = Callable[[tuple[Item, ...]], Sequence[Item]]
"""What a handoff passes on: given the portable history, the items the next agent gets."""

_PROVIDER_PREFIXES = ("anthropic.", "openai.", "gemini.")
_INSTRUCTIONS = (ItemKind.SYSTEM, ItemKind.DEVELOPER)


def _neutral_metadata(metadata: object) -> dict[str, object] | None:
    """``metadata`` without provider replay keys (``None``: nothing to drop)."""
    if not isinstance(metadata, dict) or not any(
        key.startswith(_PROVIDER_PREFIXES) for key in metadata
    ):
        return None
    return {k: v for k, v in metadata.items() if not k.startswith(_PROVIDER_PREFIXES)}


def _portable_part(part: Part) -> Part | None:
    if isinstance(part, ReasoningPart):
        return None
    if isinstance(part, CustomPart) and part.kind.startswith(_PROVIDER_PREFIXES):
        return None
    metadata = _neutral_metadata(dict(part.metadata))
    if metadata is None:
        return part
    return attrs.evolve(part, metadata=metadata)


def portable_history(items: Iterable[Item]) -> tuple[Item, ...]:
    """``items`` as any model may receive them (see the module docstring)."""
    kept: list[Item] = []
    for item in items:
        if item.kind in _INSTRUCTIONS:
            continue
        parts = [p for p in map(_portable_part, item.parts) if p is not None]
        if not parts:
            continue
        metadata = _neutral_metadata(dict(item.metadata))
        if (
            len(parts) != len(item.parts)
            or metadata is not None
            or any(new is not old for new, old in zip(parts, item.parts, strict=True))
        ):
            item = Item(
                item.kind,
                tuple(parts),
                id=item.id,
                metadata=item.metadata if metadata is None else metadata,
                usage=item.usage,
                finish_reason=item.finish_reason,
                created_at=item.created_at,
            )
        kept.append(item)
    return tuple(kept)


def without_round(items: Sequence[Item], call_ids: frozenset[str]) -> tuple[Item, ...]:
    """``items`` without the calls ``call_ids`` and their results; an assistant item left
    with text only at the end of the history (nothing answers it) goes too."""
    kept: list[Item] = []
    for item in items:
        parts = [
            p
            for p in item.parts
            if not (isinstance(p, ToolCallPart) and p.id in call_ids)
            and not (isinstance(p, ToolResultPart) and p.call_id in call_ids)
        ]
        if len(parts) == len(item.parts):
            kept.append(item)
        elif parts:
            kept.append(Item(item.kind, tuple(parts), id=item.id, metadata=item.metadata,
                             usage=item.usage, finish_reason=item.finish_reason,
                             created_at=item.created_at))  # fmt: skip
    while kept and kept[-1].kind is ItemKind.ASSISTANT and not any(kept[-1].tool_calls()):
        kept.pop()
    return tuple(kept)


def without_tool_rounds(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """A :data:`HistoryFilter`: the conversation's text only (every tool call and result
    dropped, items left empty dropped)."""
    every_call = frozenset(
        part.id for item in items for part in item.parts if isinstance(part, ToolCallPart)
    )
    kept = without_round(items, every_call)
    return tuple(item for item in kept if item.parts)


def checked_history(operation: str, items: Sequence[Item]) -> tuple[Item, ...]:
    """``items`` if they are a valid transcript ending in input a model can answer; else
    ``InvalidInputError`` naming what is wrong."""
    history = tuple(items)
    for position, item in enumerate(history):
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"{operation}: the history filter returned {type(item).__name__} at "
                f"position {position}, not an Item"
            )
    violation = find_violation(history)
    if violation is not None:
        raise InvalidInputError(
            f"{operation}: the history filter returned an invalid transcript: "
            f"{violation.message}; keep each tool call with its one result"
        )
    if not has_pending_input(history):
        found = f"an item of kind {history[-1].kind.value!r}" if history else "nothing"
        raise InvalidInputError(
            f"{operation}: the handed-over history must end with input the next agent can "
            f"answer (a user, tool or notification item), found {found}"
        )
    return history
