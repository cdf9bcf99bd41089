"""Price tables: exact costs, prefix matching, and refusal of bad prices."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop.core._items import Usage
from agentloop.model._pricing import DEFAULT_PRICES, ModelPrice, PriceTable


def test_cost_splits_plain_cached_and_written_input() -> None:
    price = ModelPrice(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=200_000,
        cache_read_tokens=500_000,
        cache_write_tokens=100_000,
    )
    # 400k plain * 3 + 500k * 0.3 + 100k * 3.75 + 200k * 15, per million
    assert price.cost(usage) == pytest.approx(1.2 + 0.15 + 0.375 + 3.0)


def test_unpriced_cache_tokens_cost_the_input_price() -> None:
    price = ModelPrice(input=2.0, output=8.0)
    usage = Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert price.cost(usage) == pytest.approx(2.0)


def test_longest_prefix_wins_and_dated_names_match() -> None:
    assert (
        DEFAULT_PRICES.price_for("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES.prices["gpt-4o-mini"]
    )
    assert DEFAULT_PRICES.price_for("gpt-4o-2024-08-06") == DEFAULT_PRICES.prices["gpt-4o"]
    assert (
        DEFAULT_PRICES.price_for("claude-opus-4-5-20251101")
        == DEFAULT_PRICES.prices["claude-opus-4-5"]
    )
    assert (
        DEFAULT_PRICES.price_for("claude-opus-4-1-20250805")
        == DEFAULT_PRICES.prices["claude-opus-4"]
    )
    assert DEFAULT_PRICES.price_for("smollm2-135m") is None


def test_fill_keeps_a_reported_cost_and_fills_a_missing_one() -> None:
    table = PriceTable({"m": ModelPrice(input=1.0, output=2.0)})
    reported = Usage(input_tokens=10, cost=0.5)
    assert table.fill("m", reported) is reported
    filled = table.fill("m", Usage(input_tokens=1_000_000, output_tokens=1_000_000))
    assert filled.cost == pytest.approx(3.0)
    unknown = Usage(input_tokens=5)
    assert table.fill("other", unknown) is unknown
    assert table.fill(None, unknown) is unknown


def test_with_prices_overrides_without_touching_the_original() -> None:
    mine = DEFAULT_PRICES.with_prices({"gpt-4o": ModelPrice(input=0.0, output=0.0)})
    assert mine.cost("gpt-4o", Usage(input_tokens=10**6)) == 0.0
    assert DEFAULT_PRICES.cost("gpt-4o", Usage(input_tokens=10**6)) == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (-1.0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (True, TypeError),
        ("1.0", TypeError),
        (None, TypeError),
    ],
)
def test_bad_prices_are_refused(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="input must be"):
        ModelPrice(input=value, output=1.0)  # type: ignore[arg-type]


def test_bad_table_entries_are_refused() -> None:
    with pytest.raises(TypeError, match="must be a ModelPrice"):
        PriceTable({"m": 1.0})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="non-empty model names"):
        PriceTable({"": ModelPrice(input=1.0, output=1.0)})


counts = st.integers(min_value=0, max_value=10**9)


@given(counts, counts, counts, counts)
def test_cost_is_finite_non_negative_and_monotonic(
    plain: int, read: int, written: int, output: int
) -> None:
    price = DEFAULT_PRICES.prices["claude-sonnet-4"]
    usage = Usage(
        input_tokens=plain + read + written,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )
    cost = price.cost(usage)
    assert math.isfinite(cost)
    assert cost >= 0
    more = Usage(
        input_tokens=plain + read + written + 1,
        output_tokens=output + 1,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )
    assert price.cost(more) > cost
