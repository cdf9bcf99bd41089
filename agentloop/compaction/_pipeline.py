"""Strategies and pipelines: the protocol every compaction step follows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from ..core._cancellation import TurnCancellation
from ..core._errors import MutatorError
from ..core._items import Item
from ..core._transcript import find_violation
from ._report import StrategyStep
from ._tokens import TokenEstimator, estimate_tokens, estimate_transcript

__all__ = ["CompactionPipeline", "CompactionRequest", "CompactionStrategy", "strategy_name"]


@attrs.frozen(kw_only=True)
class CompactionRequest:
    """What a strategy knows about the pass it is part of.

    ``target_tokens`` is the size the pass aims for (``None``: no token
    target, e.g. an item-count trigger); ``estimator`` is how sizes are measured.
    """

    session_id: str
    turn_id: str | None
    point: str
    reason: str
    target_tokens: int | None = None
    estimator: TokenEstimator = estimate_tokens
    cancellation: TurnCancellation | None = None

    def tokens(self, items: Sequence[Item]) -> int:
        """The estimated size of ``items``."""
        return estimate_transcript(items, self.estimator)


@runtime_checkable
class CompactionStrategy(Protocol):
    """One way to make a transcript smaller.

    ``apply`` returns the new transcript (the same list when it changes
    nothing) and must keep it valid: every tool call with its results, right
    after the call's item, and the system prompt in place. It must be
    deterministic, so equal inputs give byte-identical requests. An optional
    ``name`` attribute labels it in reports.
    """

    async def apply(self, items: list[Item], request: CompactionRequest) -> list[Item]:
        """The compacted transcript."""
        ...


def strategy_name(strategy: object) -> str:
    """``strategy.name`` if it has one, else its class name."""
    return str(getattr(strategy, "name", type(strategy).__name__))


class CompactionPipeline:
    """Strategies run in order, each on the previous one's output.

    With ``stop_when_within_target`` (the default), the pipeline stops as
    soon as the transcript fits the request's ``target_tokens``, so cheap
    strategies placed first spare the later ones (a summary call, say).
    """

    name = "pipeline"

    def __init__(
        self, *strategies: CompactionStrategy, stop_when_within_target: bool = True
    ) -> None:
        if not strategies:
            raise ValueError("CompactionPipeline needs at least one strategy")
        for strategy in strategies:
            if not callable(getattr(strategy, "apply", None)):
                raise TypeError(
                    f"CompactionPipeline: {strategy!r} is not a CompactionStrategy "
                    "(it has no apply() method)"
                )
        self.strategies: tuple[CompactionStrategy, ...] = strategies
        self.stop_when_within_target = stop_when_within_target

    def __repr__(self) -> str:
        names = ", ".join(strategy_name(strategy) for strategy in self.strategies)
        return f"CompactionPipeline({names})"

    async def run(
        self, items: list[Item], request: CompactionRequest
    ) -> tuple[list[Item], tuple[StrategyStep, ...]]:
        """The compacted transcript and one step per strategy that ran.

        Raises ``MutatorError`` naming the strategy if one leaves a call
        without its result (or a result without its call).
        """
        steps: list[StrategyStep] = []
        current = items
        tokens = request.tokens(current)
        for strategy in self.strategies:
            if (
                self.stop_when_within_target
                and request.target_tokens is not None
                and tokens <= request.target_tokens
            ):
                break
            after = await strategy.apply(current, request)
            if after is not current and (violation := find_violation(after)) is not None:
                raise MutatorError(
                    f"compaction strategy {strategy_name(strategy)!r} broke the transcript at "
                    f"{request.point}: {violation.message}; nothing was changed"
                )
            after_tokens = tokens if after is current else request.tokens(after)
            steps.append(
                StrategyStep(
                    strategy=strategy_name(strategy),
                    items_before=len(current),
                    items_after=len(after),
                    tokens_before=tokens,
                    tokens_after=after_tokens,
                )
            )
            current, tokens = after, after_tokens
        return current, tuple(steps)

    async def apply(self, items: list[Item], request: CompactionRequest) -> list[Item]:
        """Run the pipeline as one strategy (pipelines nest)."""
        result, _ = await self.run(items, request)
        return result
