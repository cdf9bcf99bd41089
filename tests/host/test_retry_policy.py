"""run()/stream()/continue_from() with a TurnRetryPolicy: bounded turn-level retries."""

from __future__ import annotations

from typing import Any

import pytest
from host_support import make_agent

import agentloop as al
import agentloop.testing
from agentloop.host import RunStopReason, TurnRetryPolicy, continue_from, run, stream
from agentloop.testing import fail

pytestmark = pytest.mark.anyio

NO_WAIT = TurnRetryPolicy(max_retries=2, initial_delay=0.0)


def flaky(failures: int, kind: al.ProviderErrorKind = al.ProviderErrorKind.RETRYABLE) -> Any:
    return [fail(al.ProviderError(f"failure {n}", kind=kind)) for n in range(failures)] + ["ok"]


def request_transcripts(model: al.testing.ScriptedModel) -> list[list[al.Item]]:
    return [list(request.transcript) for request in model.requests]


async def test_a_retryable_failure_is_retried_with_the_same_request() -> None:
    model = al.testing.ScriptedModel(flaky(2))
    result = await run(make_agent(model), "q", retry=NO_WAIT)
    assert result.stop_reason is RunStopReason.FINISHED
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert result.final_text == "ok"
    assert [turn.finish_reason for turn in result.turns] == [
        al.FinishReason.ERROR,
        al.FinishReason.ERROR,
        al.FinishReason.COMPLETED,
    ]
    transcripts = request_transcripts(model)
    assert len(transcripts) == 3
    assert transcripts[0] == transcripts[1] == transcripts[2]
    assert result.steps == 3
    model.assert_complete()


async def test_retries_are_bounded() -> None:
    model = al.testing.ScriptedModel(flaky(3))
    result = await run(make_agent(model), "q", retry=NO_WAIT)
    assert result.finish_reason is al.FinishReason.ERROR
    assert result.error is not None
    assert str(result.error) == "failure 2"
    assert len(model.requests) == 3
    assert model.remaining == 1


@pytest.mark.parametrize(
    "kind",
    [
        al.ProviderErrorKind.AUTH,
        al.ProviderErrorKind.CONTEXT_OVERFLOW,
        al.ProviderErrorKind.INVALID_REQUEST,
        al.ProviderErrorKind.CONTENT_FILTER,
    ],
)
async def test_other_kinds_are_not_retried_by_default(kind: al.ProviderErrorKind) -> None:
    model = al.testing.ScriptedModel(flaky(1, kind))
    result = await run(make_agent(model), "q", retry=NO_WAIT)
    assert result.finish_reason is al.FinishReason.ERROR
    assert result.error is not None
    assert result.error.kind is kind
    assert len(model.requests) == 1


async def test_retry_on_chooses_the_kinds() -> None:
    model = al.testing.ScriptedModel(flaky(1, al.ProviderErrorKind.INVALID_RESPONSE))
    policy = TurnRetryPolicy(
        max_retries=1, initial_delay=0.0, retry_on={al.ProviderErrorKind.INVALID_RESPONSE}
    )
    result = await run(make_agent(model), "q", retry=policy)
    assert result.finish_reason is al.FinishReason.COMPLETED


async def test_without_a_policy_a_failed_turn_is_returned() -> None:
    model = al.testing.ScriptedModel(flaky(1))
    result = await run(make_agent(model), "q")
    assert result.finish_reason is al.FinishReason.ERROR
    assert len(model.requests) == 1


async def test_continue_from_a_failed_run_retries_the_same_driver() -> None:
    model = al.testing.ScriptedModel(flaky(1))
    failed = await run(make_agent(model), "q")
    assert failed.error is not None
    done = await continue_from(failed)
    assert done.driver is failed.driver
    assert done.finish_reason is al.FinishReason.COMPLETED
    assert done.final_text == "ok"
    transcripts = request_transcripts(model)
    assert transcripts[0] == transcripts[1]


async def test_stream_retries_and_shows_the_failed_turn() -> None:
    model = al.testing.ScriptedModel(flaky(1))
    seen: list[str] = []
    async with stream(make_agent(model), "q", retry=NO_WAIT) as events:
        async for item in events:
            seen.append(type(item).__name__)
        result = await events.result()
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert seen.count("TurnStarted") == 2
    assert seen.count("ModelCallFailed") == 1
    assert seen.count("Finished") == 2


def test_the_delay_grows_and_is_capped() -> None:
    policy = TurnRetryPolicy(max_retries=5, initial_delay=0.5, multiplier=3.0, max_delay=4.0)
    assert [policy.delay(n) for n in range(4)] == [0.5, 1.5, 4.0, 4.0]
    assert TurnRetryPolicy().delay(0) == 1.0
    assert TurnRetryPolicy().max_retries == 2
    assert TurnRetryPolicy().retry_on == frozenset({al.ProviderErrorKind.RETRYABLE})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_retries": -1}, "TurnRetryPolicy.max_retries must be an int >= 0, got -1"),
        ({"max_retries": 1.5}, "TurnRetryPolicy.max_retries must be an int >= 0, got 1.5"),
        ({"initial_delay": -1}, "TurnRetryPolicy.initial_delay must be >= 0, got -1"),
        ({"max_delay": float("nan")}, "TurnRetryPolicy.max_delay must be a number, got nan"),
        ({"multiplier": "2"}, "TurnRetryPolicy.multiplier must be a number, got '2'"),
        (
            {"retry_on": {"retryable"}},
            "TurnRetryPolicy.retry_on expects ProviderErrorKind values, got 'retryable'",
        ),
    ],
)
def test_bad_policies_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(al.InvalidInputError) as raised:
        TurnRetryPolicy(**options)
    assert str(raised.value) == message


async def test_run_refuses_a_retry_that_is_not_a_policy() -> None:
    with pytest.raises(al.InvalidInputError) as raised:
        await run(make_agent(al.testing.ScriptedModel([])), "q", retry=3)  # type: ignore[arg-type]
    assert str(raised.value) == "run: retry must be a TurnRetryPolicy or None, got int"
