"""Token estimates for items, and the size of the next request."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from ..core._items import (
    CustomPart,
    FilePart,
    Item,
    ItemKind,
    MediaPart,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..loop._converter import unstructure

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "TokenEstimator",
    "estimate_tokens",
    "estimate_transcript",
    "output_text",
    "request_tokens",
]

TokenEstimator: TypeAlias = Callable[[Item], int]
"""A function that estimates how many tokens an item costs in a request."""

CHARS_PER_TOKEN = 4
"""The estimate's ratio: about four characters of English or JSON per token."""

MEDIA_TOKENS = 1_000
"""What one image, audio, video or file part is assumed to cost."""

_ITEM_OVERHEAD = 4  # role markers and separators per message


def output_text(output: Any) -> str:
    """A tool result's output as text: ``str`` as is, a list of text parts joined,
    anything else as compact JSON."""
    if isinstance(output, str):
        return output
    if (
        isinstance(output, list | tuple)
        and output
        and all(isinstance(part, TextPart) for part in output)
    ):
        return "\n".join(part.text for part in output)
    return _json(output)


def _json(value: Any) -> str:
    try:
        return json.dumps(unstructure(value), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _part_chars(part: Part) -> int:
    if isinstance(part, TextPart | ReasoningPart):
        return len(part.text)
    if isinstance(part, ToolCallPart):
        return len(part.name) + len(part.id) + len(_json(part.input))
    if isinstance(part, ToolResultPart):
        return len(part.call_id) + len(output_text(part.output))
    if isinstance(part, StructuredPart):
        return len(_json(part.value))
    if isinstance(part, MediaPart | FilePart):
        return MEDIA_TOKENS * CHARS_PER_TOKEN
    if isinstance(part, CustomPart):
        return len(part.kind) + len(_json(part.value))
    return 0  # pragma: no cover - every Part is handled above


def estimate_tokens(item: Item) -> int:
    """Estimated tokens of ``item`` in a request: its characters / 4, media at a flat
    :data:`MEDIA_TOKENS`, plus a small per-item overhead. Deterministic."""
    chars = sum(_part_chars(part) for part in item.parts)
    return _ITEM_OVERHEAD + -(-chars // CHARS_PER_TOKEN)


def estimate_transcript(items: Sequence[Item], estimator: TokenEstimator = estimate_tokens) -> int:
    """The estimated tokens of every item in ``items``."""
    return sum(estimator(item) for item in items)


def request_tokens(
    items: Sequence[Item],
    estimator: TokenEstimator = estimate_tokens,
    *,
    stale_before: Callable[[Item], bool] | None = None,
) -> tuple[int, int | None]:
    """The size of a request made of ``items``, preferring what the provider reported.

    Finds the newest assistant item carrying ``usage``: its ``input_tokens``
    (what the provider counted for the request that produced it) plus the
    estimate of that item and every later one. Without such an item, or when
    ``stale_before(item)`` is true for an item after it (the transcript was
    compacted since that call), the whole transcript is estimated. Returns
    ``(tokens, reported_input_tokens)``; the second is ``None`` when no fresh
    provider figure was used.
    """
    tail = 0
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        tail += estimator(item)
        if stale_before is not None and stale_before(item):
            break
        usage = item.usage
        if item.kind is ItemKind.ASSISTANT and usage is not None and usage.input_tokens > 0:
            return usage.input_tokens + tail, usage.input_tokens
    return estimate_transcript(items, estimator), None
