"""Triggers: provider-reported usage, estimates, item counts and context overflow."""

from __future__ import annotations

from enum import StrEnum

import attrs
import pytest
from compaction_support import answer, calls, result, system, user

import agentloop as al
import agentloop.observe
from agentloop.compaction import (
    REPORT_KEY,
    ContextOverflowTrigger,
    ItemCountTrigger,
    TokenBudgetTrigger,
    estimate_tokens,
    estimate_transcript,
    is_context_overflow,
    request_tokens,
)
from agentloop.transcript import MutationPoint

TURN = MutationPoint.AFTER_TURN_ENDED
ROUND = MutationPoint.AFTER_TOOL_RESULT


def with_usage(item: al.Item, input_tokens: int) -> al.Item:
    return attrs.evolve(item, usage=al.Usage(input_tokens=input_tokens, output_tokens=5))


def test_request_tokens_adds_estimates_of_later_items_to_the_reported_input() -> None:
    reply = with_usage(answer("a1"), 900)
    items = [system(), user("u1"), reply, user("u2")]
    tail = estimate_tokens(reply) + estimate_tokens(items[-1])
    assert request_tokens(items) == (900 + tail, 900)


def test_request_tokens_estimates_without_usage_or_after_a_compaction() -> None:
    items = [system(), user("u1"), answer("a1"), user("u2")]
    assert request_tokens(items) == (estimate_transcript(items), None)
    marked = attrs.evolve(user("u2"), metadata={REPORT_KEY: {"outcome": "compacted"}})
    stale = [system(), with_usage(answer("a1"), 10_000), marked]
    assert request_tokens(stale, stale_before=al.compaction.is_compaction_mark) == (
        estimate_transcript(stale),
        None,
    )
    no_op = attrs.evolve(user("u2"), metadata={REPORT_KEY: {"outcome": "no_op"}})
    fresh = [system(), with_usage(answer("a1"), 10_000), no_op]
    assert request_tokens(fresh, stale_before=al.compaction.is_compaction_mark)[1] == 10_000


def test_token_budget_trigger_fires_at_the_threshold_at_turn_boundaries_only() -> None:
    trigger = TokenBudgetTrigger(max_tokens=1_000, threshold=0.8)
    assert trigger.limit == 800
    under = [user("u1"), with_usage(answer("a"), 700), user("u2")]
    over = [user("u1"), with_usage(answer("a"), 800), user("u2")]
    assert trigger.check(under, TURN) is None
    tokens = 800 + estimate_tokens(over[1]) + estimate_tokens(over[2])
    assert trigger.check(over, TURN) == f"token_budget: tokens={tokens} (reported) >= limit=800"
    assert trigger.check(over, ROUND) is None
    both = TokenBudgetTrigger(max_tokens=1_000, points=list(MutationPoint))
    assert both.check(over, ROUND) is not None


def test_token_budget_trigger_estimates_before_the_first_call() -> None:
    items = [system("x" * 4_000), user("u")]
    trigger = TokenBudgetTrigger(max_tokens=1_000)
    assert trigger.check(items, TURN) == (
        f"token_budget: tokens={estimate_transcript(items)} (estimated) >= limit=800"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be a positive int"),
        ({"max_tokens": -5}, "max_tokens must be a positive int"),
        ({"max_tokens": 1.5}, "max_tokens must be a positive int"),
        ({"max_tokens": True}, "max_tokens must be a positive int"),
        ({"max_tokens": 10, "threshold": 0}, r"threshold must be in \(0, 1\]"),
        ({"max_tokens": 10, "threshold": 1.5}, r"threshold must be in \(0, 1\]"),
    ],
)
def test_token_budget_trigger_rejects_bad_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TokenBudgetTrigger(**kwargs)  # type: ignore[arg-type]


def test_token_budget_trigger_rejects_unknown_points() -> None:
    with pytest.raises(ValueError, match="'after_lunch' is not a valid MutationPoint"):
        TokenBudgetTrigger(max_tokens=10, points=["after_lunch"])


def test_item_count_trigger() -> None:
    trigger = ItemCountTrigger(max_items=3)
    items = [user("u"), calls("c1"), result("c1"), answer("a")]
    assert trigger.check(items[:3], TURN) is None
    assert trigger.check(items, TURN) == "item_count: items=4 > max_items=3"
    assert trigger.check(items, ROUND) is None
    with pytest.raises(ValueError, match="ItemCountTrigger: max_items must be a positive int"):
        ItemCountTrigger(max_items=0)


class Kind(StrEnum):
    CONTEXT_OVERFLOW = "context_overflow"
    RETRYABLE = "retryable"


def provider_error(kind: object) -> al.ProviderError:
    error = al.ProviderError("prompt is too long: 210000 tokens > 200000 maximum", status=400)
    error.kind = kind  # type: ignore[attr-defined]  # the classification issue 14 adds
    return error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (provider_error(Kind.CONTEXT_OVERFLOW), True),
        (provider_error("context_overflow"), True),
        (provider_error(Kind.RETRYABLE), False),
        (provider_error(None), False),
        (al.ProviderError("plain, unclassified"), False),
        (ValueError("context_overflow"), False),
        (None, False),
    ],
)
def test_is_context_overflow_reads_the_errors_kind(error: object, expected: bool) -> None:
    assert is_context_overflow(error) is expected


def test_overflow_trigger_fires_once_at_any_point_after_an_overflow() -> None:
    trigger = ContextOverflowTrigger()
    items = [user("u")]
    assert trigger.check(items, TURN) is None
    assert trigger.observe(provider_error(Kind.RETRYABLE)) is False
    assert not trigger.armed
    assert trigger.observe(provider_error(Kind.CONTEXT_OVERFLOW)) is True
    assert trigger.armed
    assert trigger.check(items, ROUND) == (
        "context_overflow: the last request exceeded the context window "
        "(prompt is too long: 210000 tokens > 200000 maximum)"
    )
    assert trigger.check(items, ROUND) is None


@attrs.frozen
class ModelCallFailed:  # the shape of the event issue 14 plans
    error: object


@attrs.frozen
class Finished:
    result: object


def test_overflow_trigger_arms_from_events_carrying_the_error() -> None:
    trigger = ContextOverflowTrigger()
    trigger.handle_event(ModelCallFailed(provider_error(Kind.RETRYABLE)))
    assert not trigger.armed
    trigger.handle_event(ModelCallFailed(provider_error(Kind.CONTEXT_OVERFLOW)))
    assert trigger.check([], TURN) is not None
    trigger.handle_event(Finished(ModelCallFailed(provider_error("context_overflow"))))
    assert trigger.check([], TURN) is not None
    turn = al.TurnResult(
        "t", al.FinishReason.ERROR, (), metadata={"agentloop.error_kind": "context_overflow"}
    )
    trigger.handle_event(al.observe.TurnFinished(turn))
    assert (
        trigger.check([], TURN) == "context_overflow: the last request exceeded the context window"
    )
    trigger.handle_event(al.observe.TurnFinished(attrs.evolve(turn, metadata={})))
    trigger.handle_event(al.observe.LoopWarning("unrelated"))
    assert not trigger.armed
