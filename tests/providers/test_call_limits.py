"""Call deadlines, usage sanitizing and Retry-After hints, against the loopback server."""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from agentloop import InvalidInputError, ProviderError, Usage
from agentloop.model import ModelTurnResult
from agentloop.providers import (
    DEFAULT_DEADLINE,
    AnthropicModel,
    CallDeadline,
    GeminiModel,
    OpenAIChatModel,
    ProviderErrorKind,
    RetryPolicy,
)
from agentloop.providers._retry import parse_retry_after

from . import _anthropic_streams as anthropic_streams
from . import _gemini_streams as gemini_streams
from . import _openai_streams as openai_streams
from ._helpers import SleepRecorder, collect, fast_retry, result_of, turn, user
from ._server import ReplayServer, events, json_error, sse

pytestmark = pytest.mark.anyio

PING = b": keep-alive\n\n"


def openai(url: str, **options: Any) -> OpenAIChatModel:
    options.setdefault("retry", fast_retry())
    return OpenAIChatModel("m", base_url=f"{url}/v1", api_key="key-0123", **options)


# -- deadlines ----------------------------------------------------------------------------------


async def test_a_server_trickling_keep_alive_comments_hits_the_first_event_deadline() -> None:
    deadline = CallDeadline(first_event=0.3, total=None)
    async with ReplayServer([sse(PING, trickle=PING)]) as server:
        with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
            await collect(openai(server.url, deadline=deadline), turn([user("hi")]))
        with anyio.fail_after(10):
            await server.disconnected.wait()
    error = caught.value
    assert str(error) == (
        "OpenAI: no response event within 0.3 s of sending the request (the server sent "
        "nothing, or only keep-alive comments); raise CallDeadline(first_event=...) if the "
        "model needs longer to start"
    )
    assert (error.kind, error.error_type) == (ProviderErrorKind.RETRYABLE, "deadline")


async def test_a_stream_that_started_and_then_only_trickles_hits_the_total_deadline() -> None:
    first = (openai_streams.chunk({"content": "Hel"}) + "\n\n").encode()
    deadline = CallDeadline(first_event=None, total=0.5)
    async with ReplayServer([sse(first, trickle=PING)]) as server:
        with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
            await collect(openai(server.url, deadline=deadline), turn([user("hi")]))
    assert str(caught.value) == (
        "OpenAI: the model call ran past its total deadline of 0.5 s; raise "
        "CallDeadline(total=...) if answers this long are expected"
    )
    assert caught.value.kind is ProviderErrorKind.RETRYABLE


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (
            lambda url, d: AnthropicModel("m", base_url=url, api_key="key-0123", deadline=d),
            "Anthropic",
        ),
        (lambda url, d: GeminiModel("m", base_url=url, api_key="key-0123", deadline=d), "Gemini"),
    ],
)
async def test_every_adapter_has_the_deadline(factory: Any, name: str) -> None:
    deadline = CallDeadline(first_event=0.3)
    async with ReplayServer([sse(PING, trickle=PING)]) as server:
        with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
            await collect(factory(server.url, deadline), turn([user("hi")]))
    assert str(caught.value).startswith(f"{name}: no response event within 0.3 s")


async def test_the_first_event_deadline_covers_retries_and_their_waits() -> None:
    async def slow_sleep(seconds: float) -> None:
        await anyio.sleep(10)

    retry = RetryPolicy(max_attempts=5, sleep=slow_sleep)
    async with ReplayServer([json_error(503, {"error": "busy"})] * 5) as server:
        model = openai(server.url, retry=retry, deadline=CallDeadline(first_event=0.3))
        with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("hi")]))
    assert caught.value.error_type == "deadline"
    assert len(server.requests) == 1


async def test_a_stream_inside_its_deadlines_is_untouched() -> None:
    stream = openai_streams.text_stream()
    async with ReplayServer([sse(PING, PING, stream)]) as server:
        model = openai(server.url, deadline=CallDeadline(first_event=30, total=60))
        events_ = await collect(model, turn([user("hi")]))
    assert result_of(events_).output_items[0].text_content == "Hello wörld 🌍"


def test_the_default_deadline_and_its_validation() -> None:
    assert (DEFAULT_DEADLINE.first_event, DEFAULT_DEADLINE.total) == (600.0, 1800.0)
    assert CallDeadline(first_event=None, total=None).total is None
    for bad in (0, -1, math.nan, math.inf, "5", True):
        with pytest.raises(InvalidInputError) as caught:
            CallDeadline(total=bad)  # type: ignore[arg-type]
        assert str(caught.value) == (
            f"CallDeadline.total must be a positive number of seconds or None (no limit), "
            f"got {bad!r}"
        )


# -- usage --------------------------------------------------------------------------------------

BAD_COUNTS: list[Any] = [-1, -(10**6), 10**12, True, False, "12", [3], {"n": 1}]
BAD_JSON_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400"]


def openai_usage_stream(value_json: str) -> bytes:
    usage = (
        f'data: {{"choices": [], "usage": {{"prompt_tokens": {value_json}, '
        f'"completion_tokens": 7, "cost": {value_json}}}}}'
    )
    return events(
        openai_streams.chunk({"content": "hi"}),
        openai_streams.chunk({}, "stop"),
        usage,
        "data: [DONE]",
    )


@pytest.mark.parametrize("value", [json.dumps(v) for v in BAD_COUNTS] + BAD_JSON_NUMBERS)
async def test_openai_garbage_usage_is_ignored_with_a_warning(value: str) -> None:
    with structlog.testing.capture_logs() as logs:
        async with ReplayServer([sse(openai_usage_stream(value))]) as server:
            result = result_of(await collect(openai(server.url), turn([user("hi")])))
    assert result.usage == Usage(input_tokens=0, output_tokens=7, cost=None)
    warnings = [entry for entry in logs if entry["event"] == "provider.usage_invalid"]
    assert [entry["field"] for entry in warnings] == ["prompt_tokens", "cost"]
    assert all(entry["action"] == "ignored" and entry["provider"] == "OpenAI" for entry in warnings)


async def test_openai_integral_floats_and_good_costs_are_kept() -> None:
    async with ReplayServer([sse(openai_usage_stream("12.0"))]) as server:
        result = result_of(await collect(openai(server.url), turn([user("hi")])))
    assert result.usage == Usage(input_tokens=12, output_tokens=7, cost=12.0)


async def test_openai_a_fractional_count_is_ignored_and_a_fractional_cost_kept() -> None:
    async with ReplayServer([sse(openai_usage_stream("1.5"))]) as server:
        result = result_of(await collect(openai(server.url), turn([user("hi")])))
    assert result.usage == Usage(input_tokens=0, output_tokens=7, cost=1.5)


@pytest.mark.parametrize("value", [json.dumps(v) for v in BAD_COUNTS] + BAD_JSON_NUMBERS + ["1.5"])
async def test_anthropic_garbage_usage_is_ignored(value: str) -> None:
    stream = anthropic_streams.text_stream().replace(
        b'"output_tokens": 15', b'"output_tokens": ' + value.encode()
    )
    assert stream != anthropic_streams.text_stream()
    async with ReplayServer([sse(stream)]) as server:
        model = AnthropicModel("m", base_url=server.url, api_key="key-0123")
        result = result_of(await collect(model, turn([user("hi")])))
    assert result.usage is not None
    assert result.usage.output_tokens == 0
    assert result.usage.input_tokens == 25


@pytest.mark.parametrize("value", [json.dumps(v) for v in BAD_COUNTS] + BAD_JSON_NUMBERS + ["1.5"])
async def test_gemini_garbage_usage_is_ignored(value: str) -> None:
    record = gemini_streams.chunk([{"text": "hi"}], "STOP").replace(
        '"promptTokenCount": 9', f'"promptTokenCount": {value}'
    )
    async with ReplayServer([sse(gemini_streams.gemini_events(record))]) as server:
        model = GeminiModel("m", base_url=server.url, api_key="key-0123")
        result = result_of(await collect(model, turn([user("hi")])))
    assert result.usage == Usage()


# -- Retry-After --------------------------------------------------------------------------------

GARBAGE_HINTS = [
    "NaN",
    "nan",
    "inf",
    "-inf",
    "-5",
    "1e400",
    "1e9",
    "soon",
    "",
    "  ",
    "0x10",
    "Wed, 99 Foo",
]


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", GARBAGE_HINTS)
async def test_garbage_retry_hints_fall_back_to_the_policys_own_capped_delay(
    header: str, value: str
) -> None:
    recorder = SleepRecorder()
    policy = RetryPolicy(max_attempts=2, base_delay=0.25, max_delay=0.5, jitter=0.0, sleep=recorder)
    busy = json_error(429, {"error": {"message": "slow down"}}, (header, value))
    async with ReplayServer([busy, sse(openai_streams.text_stream())]) as server:
        result = result_of(await collect(openai(server.url, retry=policy), turn([user("hi")])))
    assert isinstance(result, ModelTurnResult)
    assert recorder.delays == [0.25]


async def test_a_sane_retry_after_is_honoured_and_capped() -> None:
    recorder = SleepRecorder()
    policy = RetryPolicy(max_attempts=3, max_retry_after=5.0, sleep=recorder)
    replies = [
        json_error(429, {"error": "x"}, ("retry-after", "2")),
        json_error(429, {"error": "x"}, ("retry-after-ms", "120000")),
        sse(openai_streams.text_stream()),
    ]
    async with ReplayServer(replies) as server:
        await collect(openai(server.url, retry=policy), turn([user("hi")]))
    assert recorder.delays == [2.0, 5.0]


@given(st.text(max_size=30) | st.floats().map(str) | st.integers().map(str))
def test_parse_retry_after_is_finite_and_bounded_for_any_text(value: str) -> None:
    for header in ("retry-after", "retry-after-ms"):
        try:
            hint = parse_retry_after({header: value})
        except Exception as error:  # pragma: no cover - the assertion below reports it
            raise AssertionError(f"parse_retry_after raised {error!r} for {value!r}") from error
        assert hint is None or (math.isfinite(hint) and 0 <= hint <= 86_400)


@given(st.integers(1, 10_000), st.text(max_size=12))
def test_policy_delays_are_finite_non_negative_and_capped(retry: int, hint: str) -> None:
    policy = RetryPolicy(max_delay=8.0, max_retry_after=60.0)
    delay = policy.delay(retry, {"retry-after": hint})
    assert math.isfinite(delay)
    assert 0 <= delay <= 60.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, True])
def test_retry_policy_refuses_non_finite_settings(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^RetryPolicy.base_delay must be a finite number >= 0"):
        RetryPolicy(base_delay=bad)
