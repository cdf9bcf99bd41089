"""Size knobs of the transcript strategies, and growing a transcript between passes."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import ItemKind
from agentloop.testing import TranscriptShape, continuations, transcripts
from agentloop.tools import ResultOutcome, result_outcome
from agentloop.transcript import find_violation

FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def largest_output(items: list) -> int:
    return max((len(str(r.output)) for i in items for r in i.tool_results()), default=0)


@FAST
@given(transcripts(min_turns=10, max_turns=20, max_rounds=2))
def test_long_histories_are_long_and_valid(items: list) -> None:
    assert find_violation(items) is None
    assert (
        sum(item.kind is ItemKind.USER or item.kind is ItemKind.NOTIFICATION for item in items)
        >= 10
    )
    assert len(items) >= 20


@FAST
@given(transcripts(max_output_size=4000))
def test_outputs_stay_under_the_limit(items: list) -> None:
    assert find_violation(items) is None
    assert largest_output(items) <= 4000


def test_big_outputs_wide_rounds_and_notifications_occur() -> None:
    find = hypothesis.find
    # the first example found is enough: shrinking it (most of the time) shows nothing more
    quick = settings(
        max_examples=500, deadline=None, database=None, phases=[hypothesis.Phase.generate]
    )
    big = find(transcripts(max_output_size=4000), lambda t: largest_output(t) > 500, settings=quick)
    assert largest_output(big) > 500
    wide = find(
        transcripts(max_parallel=12),
        lambda t: any(sum(1 for _ in i.tool_calls()) > 6 for i in t),
        settings=quick,
    )
    assert any(sum(1 for _ in i.tool_calls()) > 6 for i in wide)

    def notified_after_placeholder(items: list) -> bool:
        placeholders = {
            r.call_id
            for i in items
            for r in i.tool_results()
            if result_outcome(r) in (ResultOutcome.DETACHED, ResultOutcome.BACKGROUND)
        }
        return any(
            i.kind is ItemKind.NOTIFICATION and f"Background tool call {c} " in i.text_content
            for i in items
            for c in placeholders
        )

    notified = find(transcripts(), notified_after_placeholder, settings=quick)
    assert find_violation(notified) is None


@FAST
@given(data=st.data(), ending=st.sampled_from(["input", "tool_result"]))
def test_continuations_grow_a_transcript_validly(data: st.DataObject, ending: str) -> None:
    base = data.draw(transcripts(ends_with=ending))  # type: ignore[arg-type]
    grown = data.draw(continuations(base, ends_with=ending, call_id_prefix="p2_"))  # type: ignore[arg-type]
    assert grown[: len(base)] == base
    assert len(grown) > len(base)
    assert find_violation(grown) is None
    new_calls = [c.id for i in grown[len(base) :] for c in i.tool_calls()]
    assert all(call_id.startswith("p2_") for call_id in new_calls)
    if ending == "input":
        assert grown[-1].kind in (ItemKind.USER, ItemKind.NOTIFICATION)
    else:
        assert any(i.kind is ItemKind.TOOL for i in grown[len(base) :])


@pytest.mark.parametrize(
    "knobs",
    [{"min_turns": 4, "max_turns": 2}, {"max_parallel": 0}, {"max_output_size": -1}],
)
def test_bad_knobs_are_refused(knobs: dict) -> None:
    with pytest.raises(ValueError, match="TranscriptShape: counts must be >= 0"):
        TranscriptShape(**knobs)
    with pytest.raises(ValueError, match="TranscriptShape"):
        transcripts(**knobs)
