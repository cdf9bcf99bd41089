"""Triggers: when a compaction pass runs.

A trigger looks at the transcript at a mutation point and returns a reason
(a short string) to compact, or ``None``. Token and item triggers fire only
at the points they are given (turn boundaries by default, so the prompt
prefix stays stable within a turn); :class:`ContextOverflowTrigger` fires
once, at whatever point comes next, after it saw a context-overflow error.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ..core._items import Item
from ..loop._mutators import MutationPoint
from ._report import is_compaction_mark
from ._tokens import TokenEstimator, estimate_tokens, request_tokens

__all__ = [
    "CONTEXT_OVERFLOW",
    "ERROR_KIND_KEY",
    "CompactionTrigger",
    "ContextOverflowTrigger",
    "ItemCountTrigger",
    "TokenBudgetTrigger",
    "is_context_overflow",
]

CONTEXT_OVERFLOW = "context_overflow"
"""The value of a ``ProviderError``'s ``kind`` when the request was too long for the model."""

ERROR_KIND_KEY = "agentloop.error_kind"
"""Turn-result metadata key that :class:`ContextOverflowTrigger` also reads for the error class."""

_TURN_BOUNDARY: tuple[MutationPoint, ...] = (MutationPoint.AFTER_TURN_ENDED,)


@runtime_checkable
class CompactionTrigger(Protocol):
    """Decides whether a compaction pass runs now."""

    def check(self, items: Sequence[Item], point: MutationPoint) -> str | None:
        """A reason to compact ``items`` at ``point``, or ``None``."""
        ...


def _points(points: Collection[MutationPoint | str]) -> frozenset[MutationPoint]:
    return frozenset(MutationPoint(point) for point in points)


def _check_positive(owner: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


@attrs.define(kw_only=True)
class TokenBudgetTrigger:
    """Fires when the next request would hold ``threshold`` x ``max_tokens`` tokens or more.

    The size is the input tokens the provider reported for the last call
    plus the estimate of every item since (:func:`request_tokens`); before
    the first call, or when a compaction ran since that call, it is the
    estimate of the whole transcript.
    """

    max_tokens: int
    threshold: float = 0.8
    points: frozenset[MutationPoint] = attrs.field(default=_TURN_BOUNDARY, converter=_points)
    estimator: TokenEstimator = estimate_tokens
    name: str = "token_budget"

    def __attrs_post_init__(self) -> None:
        _check_positive("TokenBudgetTrigger", "max_tokens", self.max_tokens)
        if not 0 < self.threshold <= 1:
            raise ValueError(
                f"TokenBudgetTrigger: threshold must be in (0, 1], got {self.threshold!r}"
            )

    @property
    def limit(self) -> int:
        """The request size at which the trigger fires."""
        return max(1, int(self.max_tokens * self.threshold))

    def check(self, items: Sequence[Item], point: MutationPoint) -> str | None:
        """``"tokens=N >= limit=L"`` when the request is at the limit."""
        if point not in self.points:
            return None
        tokens, reported = request_tokens(items, self.estimator, stale_before=is_compaction_mark)
        if tokens < self.limit:
            return None
        source = "reported" if reported is not None else "estimated"
        return f"{self.name}: tokens={tokens} ({source}) >= limit={self.limit}"


@attrs.define(kw_only=True)
class ItemCountTrigger:
    """Fires when the transcript has more than ``max_items`` items."""

    max_items: int
    points: frozenset[MutationPoint] = attrs.field(default=_TURN_BOUNDARY, converter=_points)
    name: str = "item_count"

    def __attrs_post_init__(self) -> None:
        _check_positive("ItemCountTrigger", "max_items", self.max_items)

    def check(self, items: Sequence[Item], point: MutationPoint) -> str | None:
        """``"items=N > max_items=M"`` when over the count."""
        if point not in self.points or len(items) <= self.max_items:
            return None
        return f"{self.name}: items={len(items)} > max_items={self.max_items}"


def is_context_overflow(error: object) -> bool:
    """Whether ``error`` says the request was too long for the model's context window.

    Reads the error's ``kind`` attribute (a ``ProviderError`` classified by
    its adapter): true when it is, or its value is, ``"context_overflow"``.
    """
    kind = getattr(error, "kind", None)
    return getattr(kind, "value", kind) == CONTEXT_OVERFLOW


class ContextOverflowTrigger:
    """Fires once, at the next mutation point, after a context-overflow error was seen.

    Arm it with :meth:`observe` (the failed call's error), :meth:`arm`, or by
    registering it as an observer: :meth:`handle_event` arms it on any event
    carrying such an error, as ``event.error``, ``event.result.error``, or
    ``event.result.metadata["agentloop.error_kind"] == "context_overflow"``.
    The next model call (a retry) runs the compaction first.
    """

    name = "context_overflow"

    def __init__(self) -> None:
        self._armed: str | None = None

    def __repr__(self) -> str:
        return f"ContextOverflowTrigger(armed={self._armed is not None})"

    @property
    def armed(self) -> bool:
        """Whether the next check fires."""
        return self._armed is not None

    def arm(self, detail: str = "the last request exceeded the context window") -> None:
        """Make the next check fire, whatever the point."""
        self._armed = detail

    def observe(self, error: object) -> bool:
        """Arm if ``error`` is a context overflow; return whether it was."""
        if not is_context_overflow(error):
            return False
        self.arm(f"the last request exceeded the context window ({error})")
        return True

    def handle_event(self, event: Any) -> None:
        """Observer hook: arm on an event that reports a context overflow."""
        if self.observe(getattr(event, "error", None)):
            return
        result = getattr(event, "result", None)
        if self.observe(getattr(result, "error", None)):
            return
        metadata = getattr(result, "metadata", None)
        if isinstance(metadata, Mapping) and metadata.get(ERROR_KIND_KEY) == CONTEXT_OVERFLOW:
            self.arm()

    def check(self, items: Sequence[Item], point: MutationPoint) -> str | None:
        """The armed reason (then disarmed), or ``None``."""
        detail, self._armed = self._armed, None
        return None if detail is None else f"{self.name}: {detail}"
