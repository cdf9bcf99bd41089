"""LoopLimits guards: each ends the turn with its stated reason and a valid transcript."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, hang, text, tool_calls

pytestmark = pytest.mark.anyio

LIMIT_KEY = "agentloop.limit"


def user(content: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, content)


counted: list[int] = []


@al.tool
async def tick(n: int = 0) -> str:
    """Count a call."""
    counted.append(n)
    return f"tick {n}"


@al.tool
async def sleepy() -> str:
    """Never returns."""
    await anyio.sleep_forever()
    return "unreachable"


async def drive(
    script: Any, limits: al.LoopLimits, *inputs: str
) -> tuple[al.LoopDriver, al.testing.ScriptedModel, list[al.Finished]]:
    """Run one turn per input; return every turn's ``Finished`` (never hangs)."""
    model = al.testing.ScriptedModel(script)
    registry = al.ToolRegistry().with_tool(tick).with_tool(sleepy)
    agent = al.Agent.builder().model(model).add_tool_source(registry).build()
    driver = await agent.start(al.SessionConfig("s1", limits=limits))
    finished: list[al.Finished] = []
    with anyio.fail_after(10):
        for content in inputs:
            driver.submit_input([user(content)])
            step = await driver.run_until_blocked()
            assert isinstance(step, al.Finished), step
            finished.append(step)
    al.transcript.validate_transcript(driver.snapshot().transcript)
    return driver, model, finished


def limited(finished: al.Finished, name: str) -> None:
    assert finished.result.finish_reason is al.FinishReason.LIMIT_REACHED
    assert dict(finished.result.metadata) == {LIMIT_KEY: name}


def always_tick(request: al.model.TurnRequest) -> Reply:
    return tool_calls(call("tick", {"n": len(request.transcript)}))


def test_default_limits() -> None:
    assert al.LoopLimits() == al.LoopLimits(
        max_model_calls_per_turn=25,
        on_limit=al.LimitAction.LIMIT_REACHED,
        max_tool_calls_per_round=None,
        max_tool_calls_per_turn=None,
        max_tool_calls_per_session=None,
        tool_timeout=None,
        request_timeout=None,
        max_input_tokens_per_turn=None,
        max_output_tokens_per_turn=None,
        max_total_tokens_per_turn=None,
        max_cost_per_turn=None,
        max_input_tokens_per_session=None,
        max_output_tokens_per_session=None,
        max_total_tokens_per_session=None,
        max_cost_per_session=None,
    )
    with pytest.raises(ValueError, match="tool_timeout") as caught:
        al.LoopLimits(tool_timeout=0)
    assert str(caught.value) == "LoopLimits.tool_timeout must be a positive number or None, got 0"


async def test_max_model_calls_per_turn_default_stops_an_endless_tool_loop() -> None:
    counted.clear()
    driver, model, (finished,) = await drive(always_tick, al.LoopLimits(), "go")
    limited(finished, "max_model_calls_per_turn")
    assert len(model.requests) == 25
    assert len(counted) == 25
    assert driver.snapshot().transcript[-1].kind is al.ItemKind.TOOL


async def test_max_model_calls_per_turn_is_per_turn() -> None:
    _, model, finished = await drive(
        always_tick, al.LoopLimits(max_model_calls_per_turn=2), "one", "two"
    )
    for turn in finished:
        limited(turn, "max_model_calls_per_turn")
    assert [turn.result.turn_id for turn in finished] == ["turn-1", "turn-2"]
    assert len(model.requests) == 4


async def test_max_tool_calls_per_round_runs_none_of_an_oversized_round() -> None:
    counted.clear()
    script = [tool_calls(*(call("tick", {"n": i}, id=f"call-{i}") for i in range(3)))]
    driver, model, (finished,) = await drive(
        script, al.LoopLimits(max_tool_calls_per_round=2), "go"
    )
    limited(finished, "max_tool_calls_per_round")
    assert counted == []
    results = [p for item in driver.snapshot().transcript for p in item.tool_results()]
    message = (
        "not run: the model asked for 3 tool calls in one round, more than the limit of 2; "
        "ask for fewer calls at a time"
    )
    assert results == [
        al.ToolResultPart(
            f"call-{i}", message, True, metadata={al.tools.OUTCOME_KEY: "limit_reached"}
        )
        for i in range(3)
    ]
    model.assert_complete()


async def test_max_tool_calls_per_round_allows_a_round_at_the_limit() -> None:
    counted.clear()
    script = [tool_calls(call("tick", {"n": 1}), call("tick", {"n": 2})), "done"]
    _, model, (finished,) = await drive(script, al.LoopLimits(max_tool_calls_per_round=2), "go")
    assert finished.result.finish_reason is al.FinishReason.COMPLETED
    assert counted == [1, 2]
    model.assert_complete()


async def test_tool_timeout_answers_the_call_and_the_turn_goes_on() -> None:
    script = [tool_calls(call("sleepy", id="call-1")), "gave up waiting"]
    driver, model, (finished,) = await drive(script, al.LoopLimits(tool_timeout=0.05), "go")
    assert finished.result.finish_reason is al.FinishReason.COMPLETED
    results = [p for item in driver.snapshot().transcript for p in item.tool_results()]
    assert results == [
        al.ToolResultPart(
            "call-1",
            "tool 'sleepy' timed out after 0.05 s",
            True,
            metadata={al.tools.OUTCOME_KEY: "timed_out"},
        )
    ]
    model.assert_complete()


async def test_request_timeout_ends_a_hanging_model_call() -> None:
    driver, _, (finished,) = await drive([hang()], al.LoopLimits(request_timeout=0.05), "go")
    limited(finished, "request_timeout")
    assert [item.kind for item in driver.snapshot().transcript] == [al.ItemKind.USER]


async def test_request_timeout_after_a_tool_round_keeps_the_transcript_valid() -> None:
    script = [tool_calls(call("tick", id="call-1")), hang()]
    driver, _, (finished,) = await drive(script, al.LoopLimits(request_timeout=0.05), "go")
    limited(finished, "request_timeout")
    assert [item.kind for item in driver.snapshot().transcript] == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        al.ItemKind.TOOL,
    ]


USAGE = al.Usage(input_tokens=60, output_tokens=40, cost=0.5)


@pytest.mark.parametrize(
    ("limits", "name"),
    [
        (al.LoopLimits(max_input_tokens_per_turn=100), "max_input_tokens_per_turn"),
        (al.LoopLimits(max_output_tokens_per_turn=70), "max_output_tokens_per_turn"),
        (al.LoopLimits(max_total_tokens_per_turn=150), "max_total_tokens_per_turn"),
        (al.LoopLimits(max_cost_per_turn=0.75), "max_cost_per_turn"),
    ],
)
async def test_token_limits_per_turn_stop_before_the_next_model_call(
    limits: al.LoopLimits, name: str
) -> None:
    def script(request: al.model.TurnRequest) -> Reply:
        return tool_calls(call("tick"), usage=USAGE)

    _, model, (finished,) = await drive(script, limits, "go")
    limited(finished, name)
    assert len(model.requests) == 2  # 100 tokens after one call, 200 after two
    assert finished.result.usage == USAGE + USAGE


@pytest.mark.parametrize(
    ("limits", "name"),
    [
        (al.LoopLimits(max_input_tokens_per_session=120), "max_input_tokens_per_session"),
        (al.LoopLimits(max_output_tokens_per_session=80), "max_output_tokens_per_session"),
        (al.LoopLimits(max_total_tokens_per_session=200), "max_total_tokens_per_session"),
        (al.LoopLimits(max_cost_per_session=1.0), "max_cost_per_session"),
    ],
)
async def test_session_limits_span_turns(limits: al.LoopLimits, name: str) -> None:
    script = [text("first", usage=USAGE), text("second", usage=USAGE), text("never")]
    driver, model, finished = await drive(script, limits, "one", "two", "three")
    assert [turn.result.finish_reason for turn in finished[:2]] == [al.FinishReason.COMPLETED] * 2
    limited(finished[2], name)
    assert len(model.requests) == 2
    assert driver.usage == USAGE + USAGE
    assert driver.snapshot().transcript[-1].text_content == "three"


async def test_a_limited_turn_leaves_the_driver_usable() -> None:
    def script(request: al.model.TurnRequest) -> Reply | str:
        last = request.transcript[-1]
        if last.kind is al.ItemKind.USER and last.text_content == "loop":
            return tool_calls(call("tick"))
        if last.kind is al.ItemKind.TOOL:
            return tool_calls(call("tick"))
        return "fine"

    _, _, finished = await drive(script, al.LoopLimits(max_model_calls_per_turn=3), "loop", "hi")
    limited(finished[0], "max_model_calls_per_turn")
    assert finished[1].result.finish_reason is al.FinishReason.COMPLETED
    assert finished[1].result.final_items[0].text_content == "fine"


@al.tool(destructive=True)
async def wipe(n: int) -> str:
    """A destructive tool: the policy below asks before each call."""
    counted.append(n)
    return f"wiped {n}"


async def test_an_oversized_round_asks_for_no_approval_and_runs_nothing() -> None:
    counted.clear()
    model = al.testing.ScriptedModel(
        [tool_calls(*(call("wipe", {"n": i}, id=f"call-{i}") for i in range(3)))]
    )
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(wipe))
        .permissions(al.permissions.PolicyChain(al.permissions.ToolPolicy(destructive="approve")))
        .input([user("go")])
        .build()
    )
    limits = al.LoopLimits(max_tool_calls_per_round=2)
    driver = await agent.start(al.SessionConfig("s1", limits=limits))
    with anyio.fail_after(10):
        step = await driver.next()
    assert isinstance(step, al.Finished)
    limited(step, "max_tool_calls_per_round")
    assert counted == []
    outcomes = [
        (p.call_id, p.metadata[al.tools.OUTCOME_KEY])
        for item in driver.snapshot().transcript
        for p in item.tool_results()
    ]
    assert outcomes == [(f"call-{i}", "limit_reached") for i in range(3)]
    al.transcript.validate_transcript(driver.snapshot().transcript)


# -- a final answer at the limit ----------------------------------------------------


def tick_while_tools_offered(request: al.model.TurnRequest) -> Reply | str:
    if request.available_tools:
        return tool_calls(call("tick", {"n": len(request.transcript)}))
    return "here is what I found"


async def test_final_answer_makes_one_last_call_without_tools() -> None:
    counted.clear()
    limits = al.LoopLimits(max_model_calls_per_turn=2, on_limit="final_answer")
    _, model, (finished,) = await drive(tick_while_tools_offered, limits, "go")
    assert len(model.requests) == 3  # N + 1
    assert [len(r.available_tools) for r in model.requests] == [2, 2, 0]
    assert finished.result.finish_reason is al.FinishReason.LIMIT_REACHED
    assert dict(finished.result.metadata) == {
        LIMIT_KEY: "max_model_calls_per_turn",
        "agentloop.final_answer": True,
    }
    assert finished.result.final_items[0].text_content == "here is what I found"
    assert len(counted) == 2
    assert [r.index for r in finished.result.model_calls] == [1, 2, 3]


async def test_final_answer_default_is_limit_reached() -> None:
    _, model, (finished,) = await drive(
        tick_while_tools_offered, al.LoopLimits(max_model_calls_per_turn=2), "go"
    )
    assert len(model.requests) == 2
    limited(finished, "max_model_calls_per_turn")


async def test_a_final_answer_that_still_calls_tools_is_answered_and_stops() -> None:
    counted.clear()
    limits = al.LoopLimits(max_model_calls_per_turn=1, on_limit="final_answer")
    driver, model, (finished,) = await drive(always_tick, limits, "go")
    assert len(model.requests) == 2
    assert len(counted) == 1
    limited(finished, "max_model_calls_per_turn")
    results = [p for item in driver.snapshot().transcript for p in item.tool_results()]
    assert results[-1].output == (
        "not run: the turn reached its limit of 1 model calls; tools were withheld for a "
        "final answer, so no tool runs"
    )
    assert al.tools.result_outcome(results[-1]) is al.tools.ResultOutcome.LIMIT_REACHED


def test_on_limit_refuses_unknown_actions() -> None:
    with pytest.raises(ValueError, match="on_limit") as caught:
        al.LoopLimits(on_limit="explode")
    assert str(caught.value) == (
        "LoopLimits.on_limit must be 'limit_reached' or 'final_answer', got 'explode'"
    )
    assert al.LoopLimits(on_limit="final_answer").on_limit is al.LimitAction.FINAL_ANSWER


# -- tool calls per turn and per session ----------------------------------------------


def two_ticks_then_text(request: al.model.TurnRequest) -> Reply | str:
    rounds = sum(1 for item in request.transcript if any(item.tool_calls()))
    since_user = 0
    for item in reversed(request.transcript):
        if item.kind is al.ItemKind.USER:
            break
        if any(item.tool_calls()):
            since_user += 1
    if since_user < 2:
        return tool_calls(call("tick", {"n": rounds}), call("tick", {"n": rounds}))
    return "done"


async def test_max_tool_calls_per_turn_refuses_the_round_that_would_exceed_it() -> None:
    counted.clear()
    limits = al.LoopLimits(max_tool_calls_per_turn=3)
    driver, model, (finished,) = await drive(two_ticks_then_text, limits, "go")
    limited(finished, "max_tool_calls_per_turn")
    assert counted == [0, 0]
    results = [p for item in driver.snapshot().transcript for p in item.tool_results()]
    refused = (
        "not run: 2 more tool calls would exceed the limit of 3 tool calls per turn; "
        "answer without tools"
    )
    assert [r.output for r in results] == ["tick 0", "tick 0", refused, refused]
    assert len(finished.result.tool_calls) == 4
    assert len(model.requests) == 2


async def test_max_tool_calls_per_session_spans_turns_and_checkpoints() -> None:
    counted.clear()
    limits = al.LoopLimits(max_tool_calls_per_session=3)
    model = al.testing.ScriptedModel(
        [
            tool_calls(call("tick", {"n": 1}), call("tick", {"n": 2})),
            "ok",
            tool_calls(call("tick", {"n": 3}), call("tick", {"n": 4})),
        ]
    )
    registry = al.ToolRegistry().with_tool(tick)
    agent = al.Agent.builder().model(model).add_tool_source(registry).build()
    driver = await agent.start(al.SessionConfig("s1", limits=limits))
    driver.submit_input([user("one")])
    first = await driver.run_until_blocked()
    assert isinstance(first, al.Finished)
    assert first.result.finish_reason is al.FinishReason.COMPLETED
    document = driver.checkpoint()
    assert document["session_tool_calls"] == 2
    restored = await agent.resume(document)
    restored.submit_input([user("two")])
    second = await restored.run_until_blocked()
    assert isinstance(second, al.Finished)
    limited(second, "max_tool_calls_per_session")
    assert counted == [1, 2]


# -- costs for every provider ---------------------------------------------------------


MILLION = al.Usage(input_tokens=1_000_000, output_tokens=100_000)


async def test_the_price_table_fills_the_cost_the_provider_did_not_report() -> None:
    model = al.testing.ScriptedModel(
        [tool_calls(call("tick"), usage=MILLION), text("never", usage=MILLION)],
        model_name="gpt-4o-2024-08-06",
    )
    registry = al.ToolRegistry().with_tool(tick)
    agent = al.Agent.builder().model(model).add_tool_source(registry).build()
    limits = al.LoopLimits(max_cost_per_turn=3.0)
    driver = await agent.start(al.SessionConfig("s", limits=limits))
    driver.submit_input([user("go")])
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    limited(finished, "max_cost_per_turn")
    expected = 2.50 + 0.1 * 10.00  # gpt-4o: 2.50 in, 10.00 out per million
    assert finished.result.usage == al.Usage(1_000_000, 100_000, cost=pytest.approx(expected))
    assert finished.result.model_calls[0].model == "gpt-4o-2024-08-06"
    assert len(model.requests) == 1


async def test_the_model_named_on_the_output_and_a_custom_table_win() -> None:
    output = al.Item(
        al.ItemKind.ASSISTANT, (al.TextPart("hi"),), metadata={"agentloop.model": "house-model"}
    )
    reply = Reply.raw([al.model.ModelTurnResult(al.FinishReason.COMPLETED, (output,), MILLION)])
    model = al.testing.ScriptedModel([reply, text("unpriced", usage=MILLION)], model_name="gpt-4o")
    table = al.model.PriceTable({"house-model": al.model.ModelPrice(input=1.0, output=10.0)})
    agent = al.Agent.builder().model(model).build()
    driver = await agent.start(al.SessionConfig("s", price_table=table))
    driver.submit_input([user("go")])
    first = await driver.next()
    assert isinstance(first, al.Finished)
    assert first.result.usage is not None
    assert first.result.usage.cost == pytest.approx(2.0)
    driver.submit_input([user("again")])
    second = await driver.next()
    assert isinstance(second, al.Finished)
    assert second.result.usage == MILLION  # gpt-4o is not in this table: no cost


async def test_a_reported_cost_is_kept() -> None:
    reported = al.Usage(input_tokens=1_000_000, cost=0.01)
    model = al.testing.ScriptedModel([text("hi", usage=reported)], model_name="gpt-4o")
    driver = await al.Agent.builder().model(model).input([user("go")]).build().start("s")
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.usage == reported


async def test_no_final_answer_when_a_usage_limit_is_also_reached() -> None:
    def script(request: al.model.TurnRequest) -> Reply:
        return tool_calls(call("tick"), usage=USAGE)

    limits = al.LoopLimits(
        max_model_calls_per_turn=2, on_limit="final_answer", max_total_tokens_per_turn=150
    )
    _, model, (finished,) = await drive(script, limits, "go")
    assert len(model.requests) == 2
    limited(finished, "max_model_calls_per_turn")
