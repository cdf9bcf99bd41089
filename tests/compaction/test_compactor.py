"""The Compactor in a real driver session: triggers, reports, no-ops, prefix stability,
the validator's guard, overflow recovery and read_result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from compaction_support import answer, calls, result, system, texts, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.tools
import agentloop.transcript
from agentloop.compaction import (
    REPORT_KEY,
    CompactionOutcome,
    CompactionRequest,
    Compactor,
    ContextOverflowTrigger,
    DropFailedResults,
    ItemCountTrigger,
    KeepRecent,
    SummarizeOlder,
    TokenBudgetTrigger,
    TrimLargeOutputs,
    default_compactor,
    estimate_transcript,
)
from agentloop.testing import Reply, ScriptedModel, call, fail, hang, text, tool_calls

pytestmark = pytest.mark.anyio


class Events:
    def __init__(self) -> None:
        self.events: list[al.observe.AgentEvent] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events.append(event)

    def warnings(self) -> list[str]:
        return [event.message for event in self.events if isinstance(event, al.observe.LoopWarning)]


def usage_of(request: al.model.TurnRequest) -> al.Usage:
    """What a provider would report: the request's size (here, the estimate)."""
    return al.Usage(input_tokens=estimate_transcript(request.transcript), output_tokens=8)


def chatty(request: al.model.TurnRequest) -> Reply:
    return text(f"answer {len(request.transcript)} " + "words " * 40, usage=usage_of(request))


async def start(
    compactor: Compactor,
    model: ScriptedModel,
    *,
    prior: Sequence[al.Item] = (system(),),
    tools: Sequence[al.Tool] = (),
) -> tuple[al.LoopDriver, Events]:
    events = Events()
    builder = al.Agent.builder().model(model).transcript(list(prior)).observer(events)
    if tools:
        registry = al.ToolRegistry()
        for tool in tools:
            registry.add(tool)
        builder.add_tool_source(registry)
    compactor.install(builder)
    return await builder.build().start("s"), events


async def turn(driver: al.LoopDriver, message: str) -> al.TurnResult:
    driver.submit_input([user(message)])
    while True:
        step = await driver.next()
        if isinstance(step, al.Finished):
            return step.result
        assert isinstance(step, al.AfterToolResult), step


async def test_token_budget_compaction_in_a_session_reports_what_it_did() -> None:
    model = ScriptedModel(chatty)
    compactor = Compactor(
        [KeepRecent()],
        triggers=[TokenBudgetTrigger(max_tokens=400, threshold=0.8)],
        max_tokens=400,
        target_tokens=200,
    )
    driver, events = await start(compactor, model)
    for number in range(8):
        await turn(driver, f"question {number}")
    model.assert_requests_valid()
    sizes = [estimate_transcript(request.transcript) for request in model.requests]
    assert max(sizes) <= 400
    assert compactor.reports, "the budget was reached, so compaction must have run"
    report = compactor.reports[0]
    assert report.outcome is CompactionOutcome.COMPACTED
    assert report.point == "after_turn_ended"
    assert report.session_id == "s"
    assert report.strategies == ("keep_recent",)
    assert report.tokens_after <= 200 < report.tokens_before
    assert report.items_after < report.items_before
    assert report.reported_input_tokens is not None
    assert report.reason.startswith("token_budget: tokens=")
    assert report.fits
    # the compacted request carries the report on its newest item
    compacted = next(r for r in model.requests if len(r.transcript) == report.items_after)
    stamp = compacted.transcript[-1].metadata[REPORT_KEY]
    assert stamp["outcome"] == "compacted"
    assert stamp["tokens_before"] == report.tokens_before
    assert stamp["steps"][0]["strategy"] == "keep_recent"
    assert compacted.transcript[0] == system()
    assert events.warnings() == []
    finished = [e for e in events.events if isinstance(e, al.observe.MutationFinished)]
    assert [e.dirty for e in finished].count(True) == len(compactor.reports)


async def test_two_requests_share_their_prefix_when_no_compaction_ran() -> None:
    model = ScriptedModel(chatty)
    compactor = Compactor(
        [KeepRecent()],
        triggers=[TokenBudgetTrigger(max_tokens=600)],
        max_tokens=600,
        target_tokens=250,
    )
    driver, _ = await start(compactor, model)
    compacted_at: list[int] = []
    for number in range(12):
        before = len(compactor.reports)
        await turn(driver, f"question {number}")
        if len(compactor.reports) > before:
            compacted_at.append(number)
    assert compacted_at, "the session must compact at least once"
    shared = 0
    for index, (first, second) in enumerate(zip(model.requests, model.requests[1:], strict=False)):
        if index + 1 in compacted_at:
            continue  # this request is the compacted one
        assert list(second.transcript[: len(first.transcript)]) == list(first.transcript)
        shared += 1
    assert shared >= 12 - 1 - len(compacted_at)


async def test_a_no_op_is_reported_as_a_no_op_not_a_success() -> None:
    model = ScriptedModel(["hello"])
    compactor = Compactor([KeepRecent(max_items=1)], triggers=[ItemCountTrigger(max_items=1)])
    driver, events = await start(compactor, model)
    await turn(driver, "only message")
    report = compactor.last_report
    assert report is not None
    assert report.outcome is CompactionOutcome.NO_OP
    assert (report.items_before, report.items_after) == (2, 2)
    assert report.tokens_before == report.tokens_after
    assert report.steps[0].changed is False
    sent = model.last_request.transcript
    assert texts(sent) == [("system", "You are helpful."), ("user", "only message")]
    assert sent[-1].metadata[REPORT_KEY]["outcome"] == "no_op"
    assert events.warnings() == [
        "turn-1: compaction no_op at after_turn_ended (item_count: items=2 > max_items=1): "
        "2 -> 2 items, ~15 -> ~15 tokens; strategies: keep_recent"
    ]


async def test_over_budget_is_reported_when_the_system_prompt_alone_is_too_big() -> None:
    model = ScriptedModel(["a", "b"])
    big_prompt = system("rules " * 400)
    compactor = Compactor(
        [KeepRecent()], triggers=[TokenBudgetTrigger(max_tokens=100)], max_tokens=100
    )
    driver, events = await start(
        compactor, model, prior=[big_prompt, user("old " * 50), answer("x " * 50)]
    )
    await turn(driver, "new")
    report = compactor.last_report
    assert report is not None
    assert report.outcome is CompactionOutcome.OVER_BUDGET
    assert not report.fits
    assert texts(model.last_request.transcript)[0] == ("system", "rules " * 399 + "rules ")
    assert len(events.warnings()) == 1
    assert "compaction over_budget" in events.warnings()[0]


class SplitsPairs:
    """A broken strategy: drops the three items before the last one, whatever they are."""

    name = "splits_pairs"

    async def apply(self, items: list[al.Item], request: CompactionRequest) -> list[al.Item]:
        return [*items[:-3], items[-1]]


async def test_a_strategy_that_splits_a_pair_fails_the_step_and_is_named() -> None:
    def model_fn(request: al.model.TurnRequest) -> Reply | str:
        if request.transcript[-1].kind is al.ItemKind.USER:
            return tool_calls(call("echo", {"value": "v"}, id="c1"), call("echo", id="c2"))
        return "done"

    compactor = Compactor(
        [SplitsPairs()],
        triggers=[ItemCountTrigger(max_items=1, points=list(al.transcript.MutationPoint))],
    )
    driver, _ = await start(compactor, ScriptedModel(model_fn), tools=[echo_tool()])
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.AfterToolResult)
    with pytest.raises(
        al.MutatorError,
        match="compaction strategy 'splits_pairs' broke the transcript at after_tool_result: "
        "orphaned tool_result for call c2",
    ):
        await driver.next()
    assert driver.state is al.DriverState.FAILED
    assert len(compactor.reports) == 1  # the valid pass at the turn boundary only


def echo_tool(big: int = 0) -> al.Tool:
    @al.tool
    def echo(value: str = "pong") -> str:
        """Echo the value (padded to ``big`` characters)."""
        return value + "." * big

    return echo


async def test_large_outputs_are_trimmed_mid_turn_and_read_back_with_read_result() -> None:
    def model_fn(request: al.model.TurnRequest) -> Reply | str:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.USER:
            return tool_calls(call("echo", {"value": "head"}, id="big-1"), usage=usage_of(request))
        (part,) = last.tool_results()
        if part.call_id == "big-1":
            return tool_calls(
                call("read_result", {"call_id": "big-1", "offset": 3_000}, id="read-1"),
                usage=usage_of(request),
            )
        return text(f"read: {part.output}", usage=usage_of(request))

    compactor = default_compactor(600)
    model = ScriptedModel(model_fn)
    driver, _ = await start(compactor, model, tools=[echo_tool(big=5_000)])
    outcome = await turn(driver, "fetch the big thing")
    (report,) = compactor.reports
    assert report.point == "after_tool_result"
    assert report.outcome is CompactionOutcome.COMPACTED
    assert report.strategies == ("drop_failed_results", "trim_large_outputs")
    trimmed = next(model.requests[1].transcript[-1].tool_results())
    assert trimmed.call_id == "big-1"
    assert "call read_result with call_id='big-1' to read the full output" in trimmed.output
    assert trimmed.output.startswith("head....")
    assert len(trimmed.output) < 600
    assert outcome.final_items[0].text_content == (
        "read: " + "." * 240 + "\n[characters 3000-3240 of 5004; call read_result with "
        "call_id='big-1' and offset=3240 for the next page]"
    )
    model.assert_requests_valid()


async def test_overflow_then_retry_compacts_before_the_next_call() -> None:
    overflow = al.ProviderError(
        "prompt is too long", status=400, kind=al.ProviderErrorKind.CONTEXT_OVERFLOW
    )
    model = ScriptedModel([fail(overflow), "fits now"])
    compactor = Compactor([KeepRecent(max_items=1)], triggers=[ContextOverflowTrigger()])
    history = [system(), user("u1 " * 30), answer("a1 " * 30), user("u2 " * 30), answer("a2")]
    driver, _ = await start(compactor, model, prior=history)
    driver.submit_input([user("u3")])
    failed = await driver.next()
    # The failed call ends the turn; the compactor, installed as an observer, saw the
    # overflow in the turn's result and armed its trigger.
    assert isinstance(failed, al.Finished)
    assert failed.result.finish_reason is al.FinishReason.ERROR
    assert failed.result.error is overflow
    assert compactor.reports == type(compactor.reports)()  # nothing fired yet
    step = await driver.retry()
    assert isinstance(step, al.Finished)
    assert step.result.final_items[0].text_content == "fits now"
    report = compactor.last_report
    assert report is not None
    assert report.reason == (
        "context_overflow: the last request exceeded the context window (prompt is too long)"
    )
    assert texts(model.last_request.transcript) == [
        ("system", "You are helpful."),
        (
            "context",
            "[Compaction removed 4 earlier items to fit the context window.]",
        ),
        ("user", "u3"),
    ]


async def test_install_adds_mutator_observer_and_read_result_only_with_an_archive() -> None:
    with_archive = default_compactor(1_000)
    agent = with_archive.install(al.Agent.builder().model(ScriptedModel([]))).build()
    assert agent.mutators == (with_archive,)
    assert agent.observers == (with_archive,)
    assert [spec.name for source in agent.tool_sources for spec in source.specs()] == [
        "read_result"
    ]
    bare = Compactor([KeepRecent()], triggers=[ItemCountTrigger(max_items=5)])
    agent = bare.install(al.Agent.builder().model(ScriptedModel([]))).build()
    assert agent.tool_sources == ()


def make_overflow(kind: Any) -> al.ProviderError:
    error = al.ProviderError("too long")
    error.kind = kind  # type: ignore[attr-defined]
    return error


async def test_compactor_as_observer_arms_its_overflow_trigger() -> None:
    trigger = ContextOverflowTrigger()
    compactor = Compactor([KeepRecent()], triggers=[ItemCountTrigger(max_items=99), trigger])

    class Failed:
        error = make_overflow("context_overflow")

    compactor.handle_event(Failed())
    assert trigger.armed
    assert compactor.observe_error(make_overflow("auth")) is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"triggers": []}, "needs at least one trigger"),
        ({"max_tokens": 0}, "max_tokens must be a positive int"),
        ({"target_tokens": -1}, "target_tokens must be a positive int"),
        ({"max_tokens": 2.5}, "max_tokens must be a positive int"),
    ],
)
async def test_compactor_rejects_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {"triggers": [ItemCountTrigger(max_items=3)], **kwargs}
    with pytest.raises(ValueError, match=message):
        Compactor([KeepRecent()], **settings)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((0,), {}, "max_context_tokens must be a positive int"),
        (("1000",), {}, "max_context_tokens must be a positive int"),
        ((1000,), {"target": 0.9, "threshold": 0.8}, "need 0 < target < threshold <= 1"),
        ((1000,), {"threshold": 1.2}, "need 0 < target < threshold <= 1"),
    ],
)
async def test_default_compactor_rejects_bad_settings(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        default_compactor(*args, **kwargs)


async def test_default_compactor_summarizes_with_the_given_model() -> None:
    summarizer = ScriptedModel(lambda request: "the user asked many questions")
    compactor = default_compactor(500, summary_model=summarizer)
    model = ScriptedModel(chatty)
    driver, _ = await start(compactor, model)
    for number in range(10):
        await turn(driver, f"question {number}")
    assert summarizer.requests, "the summary model was called"
    assert any("summarize_older" in report.strategies for report in compactor.reports)
    last = model.last_request.transcript
    summaries = [item for item in last if al.compaction.SUMMARY_KEY in item.metadata]
    assert len(summaries) == 1
    assert "the user asked many questions" in summaries[0].text_content
    assert all(estimate_transcript(r.transcript) <= 500 for r in model.requests)
    model.assert_requests_valid()


async def test_trim_without_archive_in_a_compactor_still_validates() -> None:
    model = ScriptedModel(chatty)
    compactor = Compactor(
        [TrimLargeOutputs(max_chars=50, head_chars=10, tail_chars=10)],
        triggers=[ItemCountTrigger(max_items=2)],
    )
    prior = [system(), user("u"), calls("c1"), result("c1", "z" * 300), answer("a")]
    driver, _ = await start(compactor, model, prior=prior)
    await turn(driver, "next")
    sent = texts(model.requests[0].transcript)
    assert sent[3][1].startswith("result c1: zzzzzzzzzz\n[... 280 characters trimmed")


async def test_an_interrupt_during_the_summary_call_discards_the_whole_pass() -> None:
    entered = anyio.Event()

    def summarize(request: al.model.TurnRequest) -> Reply:
        entered.set()
        return hang()

    summarizer = ScriptedModel(summarize)
    controller = al.CancellationController()
    compactor = Compactor(
        [DropFailedResults(), SummarizeOlder(model=summarizer, keep_last=1)],
        triggers=[ItemCountTrigger(max_items=3)],
    )
    model = ScriptedModel([])
    prior = [system(), user("u1"), calls("c1"), result("c1", "e" * 500, error=True), answer("a1")]
    builder = al.Agent.builder().model(model).transcript(prior).cancellation(controller.handle())
    driver = await compactor.install(builder).build().start("s")
    driver.submit_input([user("u2")])

    async def interrupt_once_summarizing() -> None:
        await entered.wait()
        controller.interrupt()

    async with anyio.create_task_group() as group:
        group.start_soon(interrupt_once_summarizing)
        step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    assert step.result.metadata["agentloop.interrupt_stage"] == "mutator"
    assert model.requests == []
    assert len(compactor.reports) == 0
    transcript = driver.snapshot().transcript
    assert list(transcript[:5]) == prior  # the failed result kept its body
    assert texts(transcript[5:]) == [
        ("user", "u2"),
        ("assistant", "Previous assistant response was interrupted by the user before completion."),
    ]
