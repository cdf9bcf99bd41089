"""What a model call cost, when the provider does not say.

Most providers report tokens but not money. Cost limits
(``LoopLimits.max_cost_per_turn`` / ``max_cost_per_session``) must work for
every provider, so the driver fills ``Usage.cost`` from a :class:`PriceTable`
when a call's usage has none. The default table is small and dated; prices
change, so hosts that enforce cost limits should pass their own table.

Token accounting follows agentloop's :class:`~agentloop.Usage`:
``input_tokens`` counts every input token, cached ones included, and
``cache_read_tokens`` / ``cache_write_tokens`` say how many of them were read
from or written to the provider's prompt cache. Reasoning tokens are billed as
output and are already part of ``output_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import attrs

from ..core._items import Usage

__all__ = ["DEFAULT_PRICES", "ModelPrice", "PriceTable"]

PER_MILLION = 1_000_000


def _price(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{attribute.name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


def _optional_price(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value is not None:
        _price(instance, attribute, value)


@attrs.frozen(kw_only=True)
class ModelPrice:
    """Prices in currency units (USD in the default table) per million tokens.

    ``cached_input`` is the price of an input token read from the prompt
    cache, ``cache_write`` of one written to it; each defaults to ``input``
    when the provider does not price them separately.
    """

    input: float = attrs.field(validator=_price)
    output: float = attrs.field(validator=_price)
    cached_input: float | None = attrs.field(default=None, validator=_optional_price)
    cache_write: float | None = attrs.field(default=None, validator=_optional_price)

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at these prices."""
        read = usage.cache_read_tokens
        written = usage.cache_write_tokens
        plain = max(usage.input_tokens - read - written, 0)
        cached = self.input if self.cached_input is None else self.cached_input
        writing = self.input if self.cache_write is None else self.cache_write
        total = (
            plain * self.input
            + read * cached
            + written * writing
            + usage.output_tokens * self.output
        )
        return total / PER_MILLION


def _copy_prices(prices: Mapping[str, ModelPrice]) -> dict[str, ModelPrice]:
    return dict(prices)


@attrs.frozen
class PriceTable:
    """Prices by model name; a name matches its entry exactly or by prefix.

    Provider model names carry dates and suffixes
    (``claude-sonnet-4-5-20250929``, ``gpt-4o-mini-2024-07-18``), so an entry
    applies to every name that starts with it; the longest matching entry
    wins (``gpt-4o-mini`` before ``gpt-4o``). ``with_prices`` returns a table
    with entries added or replaced.
    """

    prices: Mapping[str, ModelPrice] = attrs.field(factory=dict, converter=_copy_prices)

    def __attrs_post_init__(self) -> None:
        for name, price in self.prices.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"price table keys must be non-empty model names, got {name!r}")
            if not isinstance(price, ModelPrice):
                raise TypeError(
                    f"price for {name!r} must be a ModelPrice, got {type(price).__name__}"
                )

    def price_for(self, model: str) -> ModelPrice | None:
        """The price entry for ``model``, or None when no entry matches."""
        exact = self.prices.get(model)
        if exact is not None:
            return exact
        best: str | None = None
        for name in self.prices:
            if model.startswith(name) and (best is None or len(name) > len(best)):
                best = name
        return None if best is None else self.prices[best]

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """The cost of ``usage`` on ``model``, or None when the model is unknown."""
        if model is None:
            return None
        price = self.price_for(model)
        return None if price is None else price.cost(usage)

    def with_prices(
        self, prices: Mapping[str, ModelPrice] | Iterable[tuple[str, ModelPrice]]
    ) -> PriceTable:
        """A copy with ``prices`` added (replacing entries of the same name)."""
        merged = dict(self.prices)
        merged.update(dict(prices))
        return PriceTable(merged)

    def fill(self, model: str | None, usage: Usage) -> Usage:
        """``usage`` with its cost filled in when it has none and the model is known."""
        if usage.cost is not None:
            return usage
        cost = self.cost(model, usage)
        return usage if cost is None else attrs.evolve(usage, cost=cost)


def _entry(
    input: float, output: float, cached: float | None = None, write: float | None = None
) -> ModelPrice:
    return ModelPrice(input=input, output=output, cached_input=cached, cache_write=write)


DEFAULT_PRICES = PriceTable(
    {
        # OpenAI, USD per million tokens (standard tier), as published in 2025.
        "gpt-4o": _entry(2.50, 10.00, 1.25),
        "gpt-4o-mini": _entry(0.15, 0.60, 0.075),
        "gpt-4.1": _entry(2.00, 8.00, 0.50),
        "gpt-4.1-mini": _entry(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _entry(0.10, 0.40, 0.025),
        "gpt-5": _entry(1.25, 10.00, 0.125),
        "gpt-5-mini": _entry(0.25, 2.00, 0.025),
        "gpt-5-nano": _entry(0.05, 0.40, 0.005),
        "o3": _entry(2.00, 8.00, 0.50),
        "o3-mini": _entry(1.10, 4.40, 0.55),
        "o4-mini": _entry(1.10, 4.40, 0.275),
        # Anthropic: cache reads 0.1x input, 5-minute cache writes 1.25x input.
        "claude-opus-4": _entry(15.00, 75.00, 1.50, 18.75),
        "claude-opus-4-5": _entry(5.00, 25.00, 0.50, 6.25),
        "claude-sonnet-4": _entry(3.00, 15.00, 0.30, 3.75),
        "claude-haiku-4-5": _entry(1.00, 5.00, 0.10, 1.25),
        "claude-3-5-haiku": _entry(0.80, 4.00, 0.08, 1.00),
        # Google Gemini (prompts up to 200k tokens).
        "gemini-2.5-pro": _entry(1.25, 10.00, 0.31),
        "gemini-2.5-flash": _entry(0.30, 2.50, 0.075),
        "gemini-2.5-flash-lite": _entry(0.10, 0.40, 0.025),
    }
)
"""A small default table (USD per million tokens, 2025 list prices).

Verify against your provider's price page before relying on it for limits,
and pass your own with ``PriceTable(...)`` or ``DEFAULT_PRICES.with_prices(...)``.
"""
