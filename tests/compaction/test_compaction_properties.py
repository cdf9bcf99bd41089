"""Properties: any compaction pipeline over generated long transcripts leaves them
provider-valid, reports honestly, and fits the budget whenever the budget can be met."""

from __future__ import annotations

import anyio
import pytest
from compaction_support import irreducible_tokens, long_transcripts, provider_violation, user
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.tools
import agentloop.transcript
from agentloop.compaction import (
    CompactionOutcome,
    CompactionStrategy,
    Compactor,
    DropFailedResults,
    ItemCountTrigger,
    KeepRecent,
    MemoryResultArchive,
    SummarizeOlder,
    TrimLargeOutputs,
    default_compactor,
    estimate_transcript,
)
from agentloop.testing import Reply, ScriptedModel, call, check_mutator, text, tool_calls

SLACK = 100  # room for a marker and the scripted summary, in estimated tokens
POINTS = list(al.transcript.MutationPoint)
SETTINGS = settings(
    max_examples=60,
    # Shrinking transcripts of hundreds of items takes minutes; the unshrunk
    # failing example is printed instead.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def summarizer() -> ScriptedModel:
    return ScriptedModel(
        lambda request: f"summary of a {len(request.transcript[1].text_content)}-character history"
    )


def strategy_pool(archive: MemoryResultArchive) -> dict[str, CompactionStrategy]:
    return {
        "drop_failed": DropFailedResults(keep_last=3),
        "trim": TrimLargeOutputs(max_chars=400, head_chars=100, tail_chars=50, archive=archive),
        "trim_all": TrimLargeOutputs(max_chars=300, head_chars=80, tail_chars=40),
        "summarize": SummarizeOlder(model=summarizer(), keep_last=None),
        "summarize_6": SummarizeOlder(model=summarizer(), keep_last=6),
        "keep_recent": KeepRecent(),
        "keep_recent_8": KeepRecent(max_items=8),
        "keep_recent_bare": KeepRecent(max_items=4, marker=False),
    }


FITTERS = ("keep_recent", "summarize")


def run_pass(
    compactor: Compactor, items: list[al.Item], point: al.transcript.MutationPoint, backend: str
) -> tuple[list[al.Item], list[al.observe.AgentEvent]]:
    cursor = al.transcript.TranscriptCursor(list(items))
    emitted: list[al.observe.AgentEvent] = []
    ctx = al.transcript.MutationContext("prop", "turn-1", point, None, emitted.append)
    anyio.run(compactor.mutate, cursor, ctx, backend=backend)
    return list(cursor.items), emitted


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("ending", ["input", "tool_result"])
def test_any_pipeline_keeps_long_transcripts_valid_and_within_budget(
    backend: str, ending: str
) -> None:
    point = (
        al.transcript.MutationPoint.AFTER_TURN_ENDED
        if ending == "input"
        else al.transcript.MutationPoint.AFTER_TOOL_RESULT
    )

    @SETTINGS
    @given(
        items=long_transcripts(ending=ending),
        names=st.lists(
            st.sampled_from(sorted(strategy_pool(MemoryResultArchive()))),
            min_size=1,
            max_size=4,
            unique=True,
        ),
        fitter=st.sampled_from([None, *FITTERS]),
        budget=st.integers(150, 6_000),
    )
    def check(items: list[al.Item], names: list[str], fitter: str | None, budget: int) -> None:
        pool = strategy_pool(MemoryResultArchive())
        chosen = [pool[name] for name in names]
        if fitter is not None:
            chosen.append(pool[fitter])
        compactor = Compactor(
            chosen,
            triggers=[ItemCountTrigger(max_items=1, points=POINTS)],
            max_tokens=budget,
            target_tokens=budget // 2,
        )
        after, emitted = run_pass(compactor, items, point, backend)
        problem = provider_violation(items, after)
        assert problem is None, f"{problem} after {names} + {fitter}"
        report = compactor.last_report
        if report is None:  # a one-item transcript: the trigger did not fire
            assert len(items) == 1
            assert after == items
            assert emitted == []
            return
        assert report.items_before == len(items)
        assert report.items_after == len(after)
        assert report.tokens_after == estimate_transcript(after)
        warned = [e for e in emitted if isinstance(e, al.observe.LoopWarning)]
        if report.outcome is CompactionOutcome.NO_OP:
            assert [item.parts for item in after] == [item.parts for item in items]
            assert len(warned) == 1
            assert "compaction no_op" in warned[0].message
        else:
            assert report.tokens_after < report.tokens_before
            assert (report.outcome is CompactionOutcome.COMPACTED) == report.fits
            assert len(warned) == (0 if report.fits else 1)
        event(f"outcome: {report.outcome.value}")
        if fitter is not None and irreducible_tokens(items) + SLACK <= budget // 2:
            event("budget checked")
            assert report.fits, f"{report.summary}; floor {irreducible_tokens(items)}"
            assert report.tokens_after <= budget

    check()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_compactors_pass_the_testing_kits_mutator_check(backend: str) -> None:
    check_mutator(lambda: default_compactor(40), max_examples=60, backend=backend)

    def everything() -> Compactor:
        return Compactor(
            [
                DropFailedResults(),
                TrimLargeOutputs(
                    max_chars=20, head_chars=5, tail_chars=5, archive=MemoryResultArchive()
                ),
                SummarizeOlder(model=summarizer(), keep_last=3),
                KeepRecent(max_items=2),
            ],
            triggers=[ItemCountTrigger(max_items=2, points=POINTS)],
        )

    check_mutator(everything, max_examples=60, backend=backend)


def session_model() -> ScriptedModel:
    """A model that calls a tool on every input and answers after the results, reporting
    the request's size as its usage (as a provider would)."""

    def reply(request: al.model.TurnRequest) -> Reply:
        usage = al.Usage(input_tokens=estimate_transcript(request.transcript), output_tokens=20)
        last = request.transcript[-1]
        if last.kind is al.ItemKind.USER:
            number = len(request.transcript)
            return tool_calls(
                call("lookup", {"n": number}), call("lookup", {"n": -number}), usage=usage
            )
        return text("summary of the lookups " * 5, usage=usage)

    return ScriptedModel(reply)


@al.tool
def lookup(n: int) -> str | al.ToolOutput:
    """Look a number up (a large output; negative numbers fail with an error result)."""
    if n < 0:
        return al.ToolOutput(f"no record {n}: " + "stack frame\n" * 40, is_error=True)
    return f"record {n}: " + "data " * (200 + 50 * (n % 7))


async def run_session(turns: int, budget: int) -> tuple[ScriptedModel, Compactor]:
    model = session_model()
    compactor = default_compactor(budget)
    builder = (
        al.Agent.builder()
        .model(model)
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "You look things up.")])
        .add_tool_source(al.ToolRegistry().with_tool(lookup))
    )
    driver = await compactor.install(builder).build().start("long")
    for number in range(turns):
        driver.submit_input([user(f"look up item {number}")])
        while not isinstance(step := await driver.next(), al.Finished):
            assert isinstance(step, al.AfterToolResult), step
    return model, compactor


@pytest.mark.anyio
async def test_a_long_session_stays_valid_and_under_budget() -> None:
    model, compactor = await run_session(turns=60, budget=3_000)
    sizes = [estimate_transcript(request.transcript) for request in model.requests]
    assert len(sizes) == 120
    assert max(sizes) <= 3_000
    assert all(report.fits for report in compactor.reports)
    for request in model.requests:
        assert provider_violation(request.transcript, request.transcript) is None
        assert request.transcript[0].text_content == "You look things up."
    assert len(compactor.reports) >= 5
    # between compactions, each request extends the one before (a stable prefix)
    extended = sum(
        list(b.transcript[: len(a.transcript)]) == list(a.transcript)
        for a, b in zip(model.requests, model.requests[1:], strict=False)
    )
    assert extended == len(model.requests) - 1 - len(compactor.reports)
