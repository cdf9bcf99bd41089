"""Assertions over transcripts: ``assert_transcript_valid`` and ``format_transcript``
(they need nothing but agentloop; ``check_mutator`` is in ``_mutator_checks``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..core._items import (
    Item,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core._transcript import TranscriptViolation, find_violation

__all__ = ["assert_transcript_valid", "format_transcript", "violation_report"]

_CONTEXT = 2  # items shown around each highlighted one


def _brief(value: Any, limit: int = 40) -> str:
    try:
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
    except (TypeError, ValueError):
        shown = repr(value)
    shown = repr(shown) if isinstance(value, str) else shown
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _describe_part(part: Part) -> str:
    if isinstance(part, ToolCallPart):
        return f"tool_call {part.id} {part.name}({_brief(part.input)})"
    if isinstance(part, ToolResultPart):
        error = " error" if part.is_error else ""
        return f"tool_result {part.call_id}{error}: {_brief(part.output)}"
    if isinstance(part, TextPart):
        return f"text {_brief(part.text)}"
    if isinstance(part, ReasoningPart):
        return f"reasoning {_brief(part.text)}"
    return type(part).__name__


def _involved(items: Sequence[Item], violation: TranscriptViolation) -> set[int]:
    ids = set(violation.call_ids)
    marked = {violation.item_index} if violation.item_index is not None else set()
    for index, item in enumerate(items):
        for part in item.parts:
            if (isinstance(part, ToolCallPart) and part.id in ids) or (
                isinstance(part, ToolResultPart) and part.call_id in ids
            ):
                marked.add(index)
    return marked


def format_transcript(items: Iterable[Item], highlight: Iterable[int] = ()) -> str:
    """One line per item (``[index] kind: parts``); highlighted items are marked ``>>``.

    With highlights, only those items and their neighbours are shown; runs of
    other items are elided.
    """
    listed = list(items)
    marked = set(highlight)
    shown = set(range(len(listed)))
    if marked:
        shown = {
            index
            for mark in marked
            for index in range(mark - _CONTEXT, mark + _CONTEXT + 1)
            if 0 <= index < len(listed)
        }
    lines: list[str] = []
    skipped = 0
    for index, item in enumerate(listed):
        if index not in shown:
            skipped += 1
            continue
        if skipped:
            lines.append(f"       ... {skipped} item(s) ...")
            skipped = 0
        arrow = ">>" if index in marked else "  "
        parts = "; ".join(_describe_part(part) for part in item.parts) or "(no parts)"
        lines.append(f"  {arrow} [{index}] {item.kind.value}: {parts}")
    if skipped:
        lines.append(f"       ... {skipped} item(s) ...")
    return "\n".join(lines) if lines else "  (empty transcript)"


def violation_report(items: Sequence[Item], violation: TranscriptViolation) -> str:
    where = f" at item {violation.item_index}" if violation.item_index is not None else ""
    return f"{violation.message}{where}; transcript of {len(items)} item(s):\n" + format_transcript(
        items, _involved(items, violation)
    )


def assert_transcript_valid(items: Iterable[Item]) -> None:
    """Fail with the broken rule and the offending items if ``items`` break the pairing.

    Raises ``AssertionError`` (so pytest shows it as a test failure) naming
    the violation and listing the items involved, marked ``>>``.
    """
    listed = list(items)
    violation = find_violation(listed)
    if violation is not None:
        raise AssertionError(
            "transcript invariant violation: " + violation_report(listed, violation)
        )
