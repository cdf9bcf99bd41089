"""Session configuration: prompt-cache requests and loop limits."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, TypeAlias

import attrs

from ..core._items import Metadata, _empty_metadata
from ..output._spec import OutputSpec
from ._pricing import PriceTable

__all__ = [
    "AutomaticCache",
    "LimitAction",
    "CacheBreakpoint",
    "ExplicitCache",
    "LoopLimits",
    "PromptCacheMode",
    "PromptCacheRequest",
    "PromptCacheRetention",
    "PromptCacheStrategy",
    "QueueMode",
    "SessionConfig",
    "AfterTools",
    "AfterItem",
    "AfterPart",
]


class PromptCacheMode(StrEnum):
    """How strongly caching is asked for: ``REQUIRED`` fails a turn the provider can't cache."""

    DISABLED = "disabled"
    BEST_EFFORT = "best_effort"
    REQUIRED = "required"


class PromptCacheRetention(StrEnum):
    """A provider-neutral retention hint."""

    DEFAULT = "default"
    SHORT = "short"
    EXTENDED = "extended"


@attrs.frozen
class AfterTools:
    """Cache breakpoint after the last tool definition (``PromptCacheRequest.explicit``)."""


@attrs.frozen
class AfterItem:
    """Cache breakpoint after transcript item ``index``."""

    index: int


@attrs.frozen
class AfterPart:
    """Cache breakpoint after part ``part_index`` of transcript item ``item_index``."""

    item_index: int
    part_index: int


CacheBreakpoint: TypeAlias = AfterTools | AfterItem | AfterPart


@attrs.frozen
class AutomaticCache:
    """Let the adapter (or the provider) choose the cached prefix."""


def _to_breakpoints(value: Iterable[CacheBreakpoint]) -> tuple[CacheBreakpoint, ...]:
    return tuple(value)


@attrs.frozen
class ExplicitCache:
    """Cache at the listed breakpoints, in transcript order."""

    breakpoints: tuple[CacheBreakpoint, ...] = attrs.field(converter=_to_breakpoints)


PromptCacheStrategy: TypeAlias = AutomaticCache | ExplicitCache


@attrs.frozen
class PromptCacheRequest:
    """A provider-neutral prompt-cache request, mapped by each adapter."""

    mode: PromptCacheMode = PromptCacheMode.BEST_EFFORT
    strategy: PromptCacheStrategy = attrs.field(factory=AutomaticCache)
    retention: PromptCacheRetention | None = None
    key: str | None = None

    @classmethod
    def automatic(cls) -> PromptCacheRequest:
        """Best-effort automatic caching."""
        return cls(PromptCacheMode.BEST_EFFORT, AutomaticCache())

    @classmethod
    def automatic_required(cls) -> PromptCacheRequest:
        """Required automatic caching."""
        return cls(PromptCacheMode.REQUIRED, AutomaticCache())

    @classmethod
    def explicit(cls, breakpoints: Iterable[CacheBreakpoint]) -> PromptCacheRequest:
        """Best-effort caching at explicit breakpoints."""
        return cls(PromptCacheMode.BEST_EFFORT, ExplicitCache(tuple(breakpoints)))

    @classmethod
    def explicit_required(cls, breakpoints: Iterable[CacheBreakpoint]) -> PromptCacheRequest:
        """Required caching at explicit breakpoints."""
        return cls(PromptCacheMode.REQUIRED, ExplicitCache(tuple(breakpoints)))

    @classmethod
    def disabled(cls) -> PromptCacheRequest:
        """No caching."""
        return cls(PromptCacheMode.DISABLED, AutomaticCache())

    @classmethod
    def best_effort(cls, strategy: PromptCacheStrategy) -> PromptCacheRequest:
        """Best-effort caching with ``strategy``."""
        return cls(PromptCacheMode.BEST_EFFORT, strategy)

    @classmethod
    def required(cls, strategy: PromptCacheStrategy) -> PromptCacheRequest:
        """Required caching with ``strategy``."""
        return cls(PromptCacheMode.REQUIRED, strategy)

    def with_retention(self, retention: PromptCacheRetention | None) -> PromptCacheRequest:
        """A copy with the given retention hint."""
        return attrs.evolve(self, retention=retention)

    def with_key(self, key: str | None) -> PromptCacheRequest:
        """A copy with the given cache key."""
        return attrs.evolve(self, key=key)

    def with_mode(self, mode: PromptCacheMode) -> PromptCacheRequest:
        """A copy with the given mode."""
        return attrs.evolve(self, mode=mode)

    @property
    def is_enabled(self) -> bool:
        """Whether caching is asked for at all."""
        return self.mode is not PromptCacheMode.DISABLED


def _positive_or_none(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise ValueError(
            f"LoopLimits.{attribute.name} must be a positive number or None, got {value!r}"
        )


class LimitAction(StrEnum):
    """What a turn does when it reaches ``max_model_calls_per_turn``."""

    LIMIT_REACHED = "limit_reached"
    """Finish the turn at once with ``FinishReason.LIMIT_REACHED`` (the default)."""
    FINAL_ANSWER = "final_answer"
    """Make one last model call with the tools withheld, so the user gets an answer;
    the turn then finishes ``LIMIT_REACHED`` (at most N+1 model calls)."""


def _limit_action(value: Any) -> LimitAction:
    try:
        return LimitAction(value)
    except ValueError:
        raise ValueError(
            f"LoopLimits.on_limit must be 'limit_reached' or 'final_answer', got {value!r}"
        ) from None


@attrs.frozen(kw_only=True)
class LoopLimits:
    """Guards that end a turn with a stated reason instead of looping or hanging.

    Counts are per turn unless named ``per_round`` or ``per_session``; ``None``
    means no limit. Timeouts are in seconds. ``on_limit`` says what reaching
    ``max_model_calls_per_turn`` does (:class:`LimitAction`).
    """

    max_model_calls_per_turn: int | None = attrs.field(default=25, validator=_positive_or_none)
    on_limit: LimitAction = attrs.field(default=LimitAction.LIMIT_REACHED, converter=_limit_action)
    max_tool_calls_per_round: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_tool_calls_per_turn: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_tool_calls_per_session: int | None = attrs.field(default=None, validator=_positive_or_none)
    tool_timeout: float | None = attrs.field(default=None, validator=_positive_or_none)
    request_timeout: float | None = attrs.field(default=None, validator=_positive_or_none)
    max_input_tokens_per_turn: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_output_tokens_per_turn: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_total_tokens_per_turn: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_cost_per_turn: float | None = attrs.field(default=None, validator=_positive_or_none)
    max_input_tokens_per_session: int | None = attrs.field(
        default=None, validator=_positive_or_none
    )
    max_output_tokens_per_session: int | None = attrs.field(
        default=None, validator=_positive_or_none
    )
    max_total_tokens_per_session: int | None = attrs.field(
        default=None, validator=_positive_or_none
    )
    max_cost_per_session: float | None = attrs.field(default=None, validator=_positive_or_none)


class QueueMode(StrEnum):
    """How many queued steering or follow-up messages one delivery takes."""

    ONE_AT_A_TIME = "one-at-a-time"
    """One message per delivery (the default); the rest wait for the next one."""
    ALL = "all"
    """Every queued message at once."""


def _queue_mode(value: Any) -> QueueMode:
    try:
        return QueueMode(value)
    except ValueError:
        raise ValueError(f"queue mode must be 'one-at-a-time' or 'all', got {value!r}") from None


@attrs.frozen
class SessionConfig:
    """What a session starts with: its id, default cache request, limits and metadata."""

    session_id: str
    cache: PromptCacheRequest | None = attrs.field(default=None, kw_only=True)
    limits: LoopLimits = attrs.field(factory=LoopLimits, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    steering_mode: QueueMode = attrs.field(
        default=QueueMode.ONE_AT_A_TIME, converter=_queue_mode, kw_only=True
    )
    """How many ``driver.steer()`` messages each tool-call boundary delivers."""
    follow_up_mode: QueueMode = attrs.field(
        default=QueueMode.ONE_AT_A_TIME, converter=_queue_mode, kw_only=True
    )
    """How many ``driver.follow_up()`` messages start the next turn."""
    price_table: PriceTable | None = attrs.field(default=None, kw_only=True)
    """Prices used to fill ``Usage.cost`` when a provider reports none (``None``: the
    built-in ``DEFAULT_PRICES``). Cost limits rely on it."""
    output: OutputSpec[Any] | None = attrs.field(default=None, kw_only=True)
    """The structured output every turn answers with (set by ``Agent.start`` from
    ``AgentBuilder.output``); checkpoints keep it, so a restored session validates
    the same way."""

    def with_cache(self, cache: PromptCacheRequest | None) -> SessionConfig:
        """A copy with a different default cache request."""
        return attrs.evolve(self, cache=cache)
