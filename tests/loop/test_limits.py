"""LoopLimits guards: each ends the turn with its stated reason and a valid transcript."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import agentloop as al
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
) -> tuple[al.LoopDriver, al.ScriptedModel, list[al.Finished]]:
    """Run one turn per input; return every turn's ``Finished`` (never hangs)."""
    model = al.ScriptedModel(script)
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
    al.validate_transcript(driver.snapshot().transcript)
    return driver, model, finished


def limited(finished: al.Finished, name: str) -> None:
    assert finished.result.finish_reason is al.FinishReason.LIMIT_REACHED
    assert dict(finished.result.metadata) == {LIMIT_KEY: name}


def always_tick(request: al.TurnRequest) -> Reply:
    return tool_calls(call("tick", {"n": len(request.transcript)}))


def test_default_limits() -> None:
    assert al.LoopLimits() == al.LoopLimits(
        max_model_calls_per_turn=25,
        max_tool_calls_per_round=None,
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
        al.ToolResultPart(f"call-{i}", message, True, metadata={al.OUTCOME_KEY: "limit_reached"})
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
            metadata={al.OUTCOME_KEY: "timed_out"},
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
    def script(request: al.TurnRequest) -> Reply:
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
    def script(request: al.TurnRequest) -> Reply | str:
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
    model = al.ScriptedModel(
        [tool_calls(*(call("wipe", {"n": i}, id=f"call-{i}") for i in range(3)))]
    )
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(wipe))
        .permissions(al.PolicyChain(al.ToolPolicy(destructive="approve")))
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
        (p.call_id, p.metadata[al.OUTCOME_KEY])
        for item in driver.snapshot().transcript
        for p in item.tool_results()
    ]
    assert outcomes == [(f"call-{i}", "limit_reached") for i in range(3)]
    al.validate_transcript(driver.snapshot().transcript)
