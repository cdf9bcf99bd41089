"""Structural strategies: keep the recent part, empty failed results, trim large outputs."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

import attrs

from ..core._items import (
    Item,
    ItemKind,
    ResultOutcome,
    TextPart,
    ToolResultPart,
    result_outcome,
)
from ._archive import READ_RESULT_TOOL, ResultArchive
from ._blocks import input_cuts, protected_start
from ._pipeline import CompactionRequest
from ._tokens import output_text

__all__ = [
    "DROPPED_KEY",
    "ELIDED_KEY",
    "SUMMARY_KEY",
    "DropFailedResults",
    "KeepRecent",
    "TrimLargeOutputs",
]

DROPPED_KEY = "agentloop.compaction.dropped_items"
"""Metadata of a :class:`KeepRecent` marker item: how many items were dropped in all."""

ELIDED_KEY = "agentloop.compaction.elided"
"""Metadata of a tool result whose body a strategy replaced: the strategy's name."""

SUMMARY_KEY = "agentloop.compaction.summary"
"""Metadata of a summary item written by :class:`SummarizeOlder`: how many items it covers."""

_SYSTEM_PROMPT = frozenset({ItemKind.SYSTEM, ItemKind.DEVELOPER})


def to_kinds(kinds: Iterable[ItemKind | str]) -> frozenset[ItemKind]:
    """``kinds`` as a frozenset of :class:`ItemKind` (strings are converted)."""
    return frozenset(ItemKind(kind) for kind in kinds)


def check_count(owner: str, name: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an int >= {minimum}, got {value!r}")
    return value


def is_preserved(item: Item, kinds: Collection[ItemKind], *, summaries: bool) -> bool:
    """Whether a dropping strategy keeps ``item``: the system prompt (its kind is in
    ``kinds``) and, with ``summaries``, earlier summaries."""
    return item.kind in kinds or (summaries and SUMMARY_KEY in item.metadata)


def choose_cut(
    items: Sequence[Item],
    request: CompactionRequest,
    *,
    keep_last: int | None,
    preserve: Collection[ItemKind],
    summaries: bool,
    replacement_tokens: int,
) -> int:
    """Where the kept part begins: 0 when nothing can be dropped.

    Candidates are block starts at input items (:func:`input_cuts`). The cut
    keeps at least ``keep_last`` items; with a token target it moves later,
    to the first candidate whose result (preserved items, a replacement of
    ``replacement_tokens`` and the kept part) fits, or to the last candidate
    if none does.
    """
    droppable = (
        index
        for index, item in enumerate(items)
        if not is_preserved(item, preserve, summaries=summaries)
    )
    first_droppable = next(droppable, len(items))
    candidates = [cut for cut in input_cuts(items) if cut > first_droppable]
    if not candidates:
        return 0
    base = 0
    if keep_last is not None:
        base = max((c for c in candidates if c <= len(items) - keep_last), default=0)
    target = request.target_tokens
    if target is None:
        return base
    sizes = [request.estimator(item) for item in items]
    if sum(sizes) <= target:
        return base
    suffix = [0] * (len(items) + 1)
    for index in range(len(items) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + sizes[index]
    preserved = 0
    position = 0
    for candidate in candidates:
        while position < candidate:
            if is_preserved(items[position], preserve, summaries=summaries):
                preserved += sizes[position]
            position += 1
        if candidate >= base and preserved + replacement_tokens + suffix[candidate] <= target:
            return candidate
    return candidates[-1]


def split_at(
    items: Sequence[Item], cut: int, preserve: Collection[ItemKind], *, summaries: bool
) -> tuple[list[Item], list[Item]]:
    """``(preserved items before cut, dropped items before cut)``."""
    kept: list[Item] = []
    dropped: list[Item] = []
    for item in items[:cut]:
        (kept if is_preserved(item, preserve, summaries=summaries) else dropped).append(item)
    return kept, dropped


@attrs.define(kw_only=True)
class KeepRecent:
    """Drop old items, keeping the system prompt, earlier summaries and the recent part.

    Keeps at least the newest ``max_items`` items (``None``: no item limit),
    widened so the kept part starts at an input item and no call is
    separated from its results; with a token target, drops more until the
    transcript fits (never the newest input). Dropped items are replaced by
    one context item saying how many were removed (``marker=False``: none).
    ``preserve`` are the kinds never dropped (the system prompt).
    """

    max_items: int | None = None
    preserve: frozenset[ItemKind] = attrs.field(default=_SYSTEM_PROMPT, converter=to_kinds)
    marker: bool = True
    name: str = "keep_recent"

    def __attrs_post_init__(self) -> None:
        if self.max_items is not None:
            check_count("KeepRecent", "max_items", self.max_items, 0)

    async def apply(self, items: list[Item], request: CompactionRequest) -> list[Item]:
        """Drop what does not fit (see the class docstring)."""
        marker_tokens = request.estimator(_marker(10**6)) if self.marker else 0
        cut = choose_cut(
            items,
            request,
            keep_last=self.max_items,
            preserve=self.preserve,
            summaries=True,
            replacement_tokens=marker_tokens,
        )
        if cut == 0:
            return items
        kept, dropped = split_at(items, cut, self.preserve, summaries=True)
        if not dropped:
            return items
        total = sum(_dropped_count(item) for item in dropped)
        replacement = [_marker(total)] if self.marker else []
        if request.target_tokens is not None and request.tokens(replacement) >= request.tokens(
            dropped
        ):
            return items  # the marker would cost more than what it replaces
        return [*kept, *replacement, *items[cut:]]


def _dropped_count(item: Item) -> int:
    earlier = item.metadata.get(DROPPED_KEY)
    return earlier if isinstance(earlier, int) and not isinstance(earlier, bool) else 1


def _marker(count: int) -> Item:
    text = f"[Compaction removed {count} earlier items to fit the context window.]"
    return Item(ItemKind.CONTEXT, (TextPart(text),), metadata={DROPPED_KEY: count})


def _replace_results(
    items: list[Item], start: int, end: int, edit: Callable[[ToolResultPart], ToolResultPart]
) -> list[Item]:
    changed: list[Item] | None = None
    for index in range(start, end):
        item = items[index]
        if not any(isinstance(part, ToolResultPart) for part in item.parts):
            continue
        parts = tuple(
            edit(part) if isinstance(part, ToolResultPart) else part for part in item.parts
        )
        if any(new is not old for new, old in zip(parts, item.parts, strict=True)):
            if changed is None:
                changed = list(items)
            changed[index] = attrs.evolve(item, parts=parts)
    return items if changed is None else changed


_FAILED = frozenset(
    {
        ResultOutcome.DENIED,
        ResultOutcome.PERMISSION_DENIED,
        ResultOutcome.CANCELLED,
        ResultOutcome.SKIPPED,
        ResultOutcome.TIMED_OUT,
        ResultOutcome.INVALID_INPUT,
        ResultOutcome.UNKNOWN_TOOL,
        ResultOutcome.FAILED,
        ResultOutcome.LIMIT_REACHED,
    }
)


@attrs.define(kw_only=True)
class DropFailedResults:
    """Empty the bodies of failed, denied and cancelled tool results; keep the pairs.

    A result counts when ``is_error`` is set or its typed outcome is a
    failure (denied, cancelled, timed out, ...). Its output becomes a short
    note naming the outcome; the call and the result stay, so the transcript
    stays valid and the model still knows the call happened. The newest
    ``keep_last`` items (whole tool pairs) are left alone, so the model can
    react to a fresh error.
    """

    keep_last: int = 0
    name: str = "drop_failed_results"

    def __attrs_post_init__(self) -> None:
        check_count("DropFailedResults", "keep_last", self.keep_last, 0)

    async def apply(self, items: list[Item], request: CompactionRequest) -> list[Item]:
        """Replace failed results' bodies outside the protected tail."""
        return _replace_results(
            items, 0, protected_start(items, self.keep_last), _EmptyFailed(self.name)
        )


class _EmptyFailed:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, part: ToolResultPart) -> ToolResultPart:
        outcome = result_outcome(part) if _valid_outcome(part) else None
        if not part.is_error and outcome not in _FAILED:
            return part
        if ELIDED_KEY in part.metadata:
            return part
        label = outcome.value if outcome is not None else "error"
        note = f"[{label}: output removed by compaction]"
        if len(output_text(part.output)) <= len(note):
            return part
        return attrs.evolve(part, output=note, metadata={**part.metadata, ELIDED_KEY: self.name})


def _valid_outcome(part: ToolResultPart) -> bool:
    try:
        result_outcome(part)
    except ValueError:
        return False
    return True


@attrs.define(kw_only=True)
class TrimLargeOutputs:
    """Cut tool outputs longer than ``max_chars`` to their head and tail, with a marker.

    The full output goes to ``archive`` under ``(session_id, call_id)``
    first, and the marker tells the model to call ``read_result`` with the
    call id to read it. Without an archive the middle is simply dropped and
    the marker says so. The newest ``keep_last`` items (whole tool pairs)
    and the results of ``skip_tools`` (``read_result`` itself: its pages are
    already bounded) are left alone. A trimmed output is text, whatever its
    shape before.
    """

    max_chars: int = 2_000
    head_chars: int = 600
    tail_chars: int = 400
    keep_last: int = 0
    archive: ResultArchive | None = None
    skip_tools: frozenset[str] = attrs.field(
        default=frozenset({READ_RESULT_TOOL}), converter=frozenset
    )
    name: str = "trim_large_outputs"

    def __attrs_post_init__(self) -> None:
        check_count("TrimLargeOutputs", "max_chars", self.max_chars, 1)
        check_count("TrimLargeOutputs", "head_chars", self.head_chars, 0)
        check_count("TrimLargeOutputs", "tail_chars", self.tail_chars, 0)
        check_count("TrimLargeOutputs", "keep_last", self.keep_last, 0)
        if self.head_chars + self.tail_chars >= self.max_chars:
            raise ValueError(
                "TrimLargeOutputs: head_chars + tail_chars must be below max_chars "
                f"({self.head_chars} + {self.tail_chars} >= {self.max_chars}), or trimming "
                "would not make outputs shorter"
            )

    async def apply(self, items: list[Item], request: CompactionRequest) -> list[Item]:
        """Trim large outputs outside the protected tail, archiving them first."""
        end = protected_start(items, self.keep_last)
        skipped = {
            call.id
            for item in items[:end]
            for call in item.tool_calls()
            if call.name in self.skip_tools
        }
        large = [
            part
            for item in items[:end]
            for part in item.tool_results()
            if ELIDED_KEY not in part.metadata
            and part.call_id not in skipped
            and len(output_text(part.output)) > self.max_chars
        ]
        if not large:
            return items
        if self.archive is not None:
            for part in large:
                await self.archive.put(request.session_id, part.call_id, output_text(part.output))
        return _replace_results(items, 0, end, _Trim(self, {id(part) for part in large}))


class _Trim:
    def __init__(self, owner: TrimLargeOutputs, targets: Iterable[int]) -> None:
        self.owner = owner
        self.targets = set(targets)

    def __call__(self, part: ToolResultPart) -> ToolResultPart:
        if id(part) not in self.targets:
            return part
        owner = self.owner
        text = output_text(part.output)
        removed = len(text) - owner.head_chars - owner.tail_chars
        if owner.archive is not None:
            how = f"call {READ_RESULT_TOOL} with call_id={part.call_id!r} to read the full output"
        else:
            how = "the full output was not kept"
        marker = f"\n[... {removed} characters trimmed by compaction; {how} ...]\n"
        tail = text[len(text) - owner.tail_chars :] if owner.tail_chars else ""
        trimmed = text[: owner.head_chars] + marker + tail
        return attrs.evolve(
            part, output=trimmed, metadata={**part.metadata, ELIDED_KEY: owner.name}
        )
