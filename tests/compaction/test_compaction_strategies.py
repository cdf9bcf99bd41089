"""Each strategy on hand-built transcripts: exact outcomes."""

from __future__ import annotations

import pytest
from compaction_support import answer, calls, request, result, system, texts, user

import agentloop as al
import agentloop.tools
import agentloop.transcript
from agentloop.compaction import (
    DROPPED_KEY,
    ELIDED_KEY,
    SUMMARY_KEY,
    CompactionPipeline,
    DropFailedResults,
    KeepRecent,
    MemoryResultArchive,
    SummarizeOlder,
    TrimLargeOutputs,
    estimate_transcript,
)
from agentloop.testing import ScriptedModel, call, text, tool_calls

pytestmark = pytest.mark.anyio

MARKER = "[Compaction removed {} earlier items to fit the context window.]"


def history() -> list[al.Item]:
    return [
        system(),
        user("u1"),
        calls("c1", "c2"),
        result("c1", "r1"),
        result("c2", "r2"),
        answer("a1"),
        user("u2"),
        calls("c3"),
        result("c3", "r3"),
        answer("a2"),
        user("u3"),
    ]


# -- KeepRecent ---------------------------------------------------------------


async def test_keep_recent_keeps_the_last_items_from_an_input_with_a_marker() -> None:
    out = await KeepRecent(max_items=4).apply(history(), request())
    assert texts(out) == [
        ("system", "You are helpful."),
        ("context", MARKER.format(5)),
        ("user", "u2"),
        ("assistant", "call c3"),
        ("tool", "result c3: r3"),
        ("assistant", "a2"),
        ("user", "u3"),
    ]
    assert out[1].metadata == {DROPPED_KEY: 5}


async def test_keep_recent_widens_to_whole_tool_pairs() -> None:
    # The last 2 items are a result and an answer: the kept part widens to the input
    # that starts the turn, so the call stays with its result.
    items = history()[:10]
    out = await KeepRecent(max_items=2).apply(items, request())
    assert texts(out)[2:] == [
        ("user", "u2"),
        ("assistant", "call c3"),
        ("tool", "result c3: r3"),
        ("assistant", "a2"),
    ]
    al.transcript.validate_transcript(out)


async def test_keep_recent_with_nothing_before_the_first_input_changes_nothing() -> None:
    items = [system(), user("u1"), calls("c1"), result("c1"), answer("a")]
    assert await KeepRecent(max_items=1).apply(items, request()) is items


async def test_keep_recent_keeps_everything_when_under_its_limit() -> None:
    items = history()
    assert await KeepRecent(max_items=50).apply(items, request()) is items


async def test_keep_recent_counts_items_dropped_by_earlier_passes() -> None:
    first = await KeepRecent(max_items=4).apply(history(), request())
    grown = [*first, answer("a3"), user("u4")]
    second = await KeepRecent(max_items=2).apply(grown, request())
    # the marker's 5 + u2, call, result, a2 now; the kept part starts at u3
    assert texts(second) == [
        ("system", "You are helpful."),
        ("context", MARKER.format(5 + 4)),
        ("user", "u3"),
        ("assistant", "a3"),
        ("user", "u4"),
    ]


async def test_keep_recent_drops_more_to_fit_a_token_target() -> None:
    items = history()
    floor = estimate_transcript([system(), user("u3")])
    out = await KeepRecent(max_items=50, marker=False).apply(items, request(floor))
    assert texts(out) == [("system", "You are helpful."), ("user", "u3")]


async def test_keep_recent_without_marker_and_with_preserved_kinds() -> None:
    items = [
        system(),
        user("u1"),
        al.Item.text(al.ItemKind.CONTEXT, "ctx"),
        answer("a"),
        user("u2"),
    ]
    out = await KeepRecent(
        max_items=1, marker=False, preserve={al.ItemKind.SYSTEM, al.ItemKind.CONTEXT}
    ).apply(items, request())
    assert texts(out) == [("system", "You are helpful."), ("context", "ctx"), ("user", "u2")]


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
async def test_keep_recent_rejects_bad_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="KeepRecent: max_items must be an int >= 0"):
        KeepRecent(max_items=bad)  # type: ignore[arg-type]


# -- DropFailedResults --------------------------------------------------------


async def test_drop_failed_results_empties_failed_bodies_and_keeps_pairs() -> None:
    long = "traceback line\n" * 20
    items = [
        user("u"),
        calls("c1", "c2", "c3", "c4"),
        result("c1", long, error=True),
        result("c2", long, error=True, outcome="denied"),
        result("c3", long, error=True, outcome="cancelled"),
        result("c4", long),
        answer("a"),
        user("next"),
    ]
    out = await DropFailedResults().apply(items, request())
    assert texts(out)[2:6] == [
        ("tool", "result c1: [error: output removed by compaction]"),
        ("tool", "result c2: [denied: output removed by compaction]"),
        ("tool", "result c3: [cancelled: output removed by compaction]"),
        ("tool", f"result c4: {long}"),
    ]
    dropped = [part for item in out for part in item.tool_results()]
    assert [part.is_error for part in dropped] == [True, True, True, False]
    assert dropped[1].metadata == {
        al.tools.OUTCOME_KEY: "denied",
        ELIDED_KEY: "drop_failed_results",
    }
    al.transcript.validate_transcript(out)
    # a second pass finds nothing left to do
    assert await DropFailedResults().apply(out, request()) is out


async def test_drop_failed_results_leaves_short_bodies_and_the_protected_tail() -> None:
    items = [
        user("u"),
        calls("c1"),
        result("c1", "no", error=True),
        answer("a"),
        user("v"),
        calls("c2"),
        result("c2", "x" * 500, error=True),
    ]
    assert await DropFailedResults(keep_last=1).apply(items, request()) is items


# -- TrimLargeOutputs ---------------------------------------------------------


async def test_trim_large_outputs_keeps_head_and_tail_and_archives_the_whole() -> None:
    archive = MemoryResultArchive()
    output = "".join(f"{n:04d}" for n in range(100))  # 400 characters
    items = [user("u"), calls("c1"), result("c1", output), answer("a"), user("v")]
    strategy = TrimLargeOutputs(max_chars=100, head_chars=8, tail_chars=4, archive=archive)
    out = await strategy.apply(items, request(session_id="sess"))
    trimmed = next(out[2].tool_results())
    assert trimmed.output == (
        "00000001\n[... 388 characters trimmed by compaction; call read_result with "
        "call_id='c1' to read the full output ...]\n0099"
    )
    assert trimmed.metadata == {ELIDED_KEY: "trim_large_outputs"}
    assert await archive.get("sess", "c1") == output
    assert await archive.get("other", "c1") is None
    assert await strategy.apply(out, request(session_id="sess")) is out  # nothing left


async def test_trim_large_outputs_turns_json_into_text_and_without_archive_says_so() -> None:
    output = {"rows": list(range(100))}
    items = [user("u"), calls("c1"), result("c1", output), user("v")]
    out = await TrimLargeOutputs(max_chars=50, head_chars=10, tail_chars=5).apply(items, request())
    trimmed = next(out[2].tool_results()).output
    assert trimmed.startswith('{"rows":[0')
    assert "characters trimmed by compaction; the full output was not kept" in trimmed
    assert trimmed.endswith("99]}")


async def test_trim_large_outputs_leaves_small_outputs_and_the_protected_tail() -> None:
    items = [user("u"), calls("c1"), result("c1", "x" * 60), calls("c2"), result("c2", "y" * 500)]
    strategy = TrimLargeOutputs(max_chars=100, head_chars=10, tail_chars=10, keep_last=2)
    assert await strategy.apply(items, request()) is items


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_chars": 0}, "max_chars must be an int >= 1"),
        ({"head_chars": -1}, "head_chars must be an int >= 0"),
        ({"keep_last": None}, "keep_last must be an int >= 0"),
        ({"max_chars": 100, "head_chars": 60, "tail_chars": 40}, "must be below max_chars"),
    ],
)
async def test_trim_large_outputs_rejects_bad_settings(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TrimLargeOutputs(**kwargs)  # type: ignore[arg-type]


# -- SummarizeOlder -----------------------------------------------------------


async def test_summarize_older_replaces_old_turns_with_the_models_summary() -> None:
    model = ScriptedModel(["The user asked u1 and u2; echo answered r1, r2, r3."])
    out = await SummarizeOlder(model=model, keep_last=1).apply(history(), request())
    assert texts(out) == [
        ("system", "You are helpful."),
        (
            "context",
            "Summary of the earlier conversation (written by compaction):\n"
            "The user asked u1 and u2; echo answered r1, r2, r3.",
        ),
        ("user", "u3"),
    ]
    assert out[1].metadata == {SUMMARY_KEY: 9}
    nested = model.last_request
    assert nested.session_id == "s/compaction"
    assert [item.kind for item in nested.transcript] == [al.ItemKind.SYSTEM, al.ItemKind.USER]
    asked = nested.transcript[1].text_content
    assert asked.startswith("Compress the transcript below into a note of at most 800 tokens.")
    assert "[USER]\nu1" in asked
    assert "(called tool echo [c1] with" in asked
    assert "(result of call c3: r3)" in asked
    assert "You are helpful." not in asked  # the system prompt is kept, not summarized


async def test_summarize_older_folds_an_earlier_summary_into_the_next() -> None:
    model = ScriptedModel(["first summary", "second summary"])
    strategy = SummarizeOlder(model=model, keep_last=1)
    first = await strategy.apply(history(), request())
    second = await strategy.apply([*first, answer("a3"), user("u4")], request())
    assert texts(second)[1:] == [
        ("context", "Summary of the earlier conversation (written by compaction):\nsecond summary"),
        ("user", "u4"),
    ]
    assert second[1].metadata == {SUMMARY_KEY: 9 + 2}
    assert "first summary" in model.last_request.transcript[1].text_content


async def test_summarize_older_without_text_raises_and_names_the_strategy() -> None:
    model = ScriptedModel([tool_calls(call("echo", id="x"))])
    with pytest.raises(
        al.MutatorError, match="summarize_older: the summary model answered without text"
    ):
        await SummarizeOlder(model=model, keep_last=1).apply(history(), request())


async def test_summarize_older_makes_no_call_when_nothing_is_old_enough() -> None:
    model = ScriptedModel([])
    items = history()
    assert await SummarizeOlder(model=model, keep_last=50).apply(items, request()) is items
    assert model.requests == []


# -- CompactionPipeline -------------------------------------------------------


async def test_pipeline_runs_in_order_and_stops_once_within_target() -> None:
    items = [user("u"), calls("c1"), result("c1", "e" * 4000, error=True), answer("a"), user("v")]
    after_drop = await DropFailedResults().apply(items, request())
    pipeline = CompactionPipeline(DropFailedResults(), KeepRecent(max_items=1))
    out, steps = await pipeline.run(items, request(estimate_transcript(after_drop)))
    assert out == after_drop
    assert [step.strategy for step in steps] == ["drop_failed_results"]
    assert steps[0].items_before == steps[0].items_after == 5
    assert steps[0].tokens_before == estimate_transcript(items)
    assert steps[0].tokens_after == estimate_transcript(after_drop)
    assert steps[0].changed

    everything, all_steps = await CompactionPipeline(
        DropFailedResults(), KeepRecent(max_items=1), stop_when_within_target=False
    ).run(items, request(10**6))
    assert [step.strategy for step in all_steps] == ["drop_failed_results", "keep_recent"]
    assert texts(everything)[-1] == ("user", "v")


async def test_pipelines_nest_and_reject_non_strategies() -> None:
    inner = CompactionPipeline(KeepRecent(max_items=1, marker=False))
    out = await CompactionPipeline(inner).apply(history(), request())
    assert texts(out) == [("system", "You are helpful."), ("user", "u3")]
    with pytest.raises(ValueError, match="needs at least one strategy"):
        CompactionPipeline()
    with pytest.raises(TypeError, match="is not a CompactionStrategy"):
        CompactionPipeline(object())  # type: ignore[arg-type]


async def test_summary_then_keep_recent_keeps_the_summary() -> None:
    model = ScriptedModel([text("short note")])
    pipeline = CompactionPipeline(
        SummarizeOlder(model=model, keep_last=4),
        KeepRecent(max_items=1),
        stop_when_within_target=False,
    )
    out = await pipeline.apply(history(), request())
    assert [kind for kind, _ in texts(out)] == ["system", "context", "context", "user"]
    assert SUMMARY_KEY in out[1].metadata
    assert out[2].metadata == {DROPPED_KEY: 4}
