"""What a compaction did: :class:`CompactionReport` and its metadata form."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import attrs

from ..core._items import Item

__all__ = [
    "REPORT_KEY",
    "CompactionOutcome",
    "CompactionReport",
    "StrategyStep",
    "is_compaction_mark",
    "report_metadata",
]

REPORT_KEY = "agentloop.compaction"
"""Metadata key of the report stamped on the last item of a compaction pass."""


class CompactionOutcome(StrEnum):
    """How a compaction that was triggered ended."""

    COMPACTED = "compacted"
    """Fewer estimated tokens than before, and within ``max_tokens`` (if one is set)."""
    OVER_BUDGET = "over_budget"
    """Fewer tokens than before, but still above ``max_tokens``: the part that no
    strategy may remove (system prompt, the newest input and tool rounds) is too
    big. A retry after a context overflow would fail again."""
    NO_OP = "no_op"
    """Nothing could be removed; the transcript was left as it was. Never a success."""


@attrs.frozen(kw_only=True)
class StrategyStep:
    """One strategy's part of a pass: sizes before and after it ran."""

    strategy: str
    items_before: int
    items_after: int
    tokens_before: int
    tokens_after: int

    @property
    def changed(self) -> bool:
        """Whether this strategy changed the transcript's size."""
        return (self.items_before, self.tokens_before) != (self.items_after, self.tokens_after)


def _to_steps(steps: Any) -> tuple[StrategyStep, ...]:
    return tuple(steps)


@attrs.frozen(kw_only=True)
class CompactionReport:
    """What one triggered compaction pass did.

    Token figures are the compactor's estimates (``reported_input_tokens`` is
    the provider's count for the last request, when a fresh one was known).
    ``steps`` lists the strategies that ran, in order; a pipeline stops early
    once the transcript is within its target.
    """

    outcome: CompactionOutcome
    reason: str
    point: str
    session_id: str
    turn_id: str | None
    items_before: int
    items_after: int
    tokens_before: int
    tokens_after: int
    max_tokens: int | None = None
    target_tokens: int | None = None
    reported_input_tokens: int | None = None
    steps: tuple[StrategyStep, ...] = attrs.field(default=(), converter=_to_steps)

    @property
    def strategies(self) -> tuple[str, ...]:
        """The names of the strategies that ran, in order."""
        return tuple(step.strategy for step in self.steps)

    @property
    def fits(self) -> bool:
        """Whether the transcript is now within ``max_tokens`` (true when none is set)."""
        return self.max_tokens is None or self.tokens_after <= self.max_tokens

    @property
    def summary(self) -> str:
        """One line for logs and warnings."""
        budget = f" (max {self.max_tokens})" if self.max_tokens is not None else ""
        return (
            f"compaction {self.outcome.value} at {self.point} ({self.reason}): "
            f"{self.items_before} -> {self.items_after} items, ~{self.tokens_before} -> "
            f"~{self.tokens_after} tokens{budget}; strategies: "
            f"{', '.join(self.strategies) or 'none'}"
        )


def report_metadata(report: CompactionReport) -> dict[str, Any]:
    """``report`` as the JSON value stored under :data:`REPORT_KEY`."""
    data: dict[str, Any] = attrs.asdict(report, recurse=True)
    data["outcome"] = report.outcome.value
    data["steps"] = [attrs.asdict(step) for step in report.steps]
    return data


def is_compaction_mark(item: Item) -> bool:
    """Whether ``item`` carries the report of a pass that changed the transcript.

    Provider usage reported before such an item describes a request that no
    longer exists, so token triggers estimate instead.
    """
    stamp = item.metadata.get(REPORT_KEY)
    return isinstance(stamp, dict) and stamp.get("outcome") != CompactionOutcome.NO_OP.value
