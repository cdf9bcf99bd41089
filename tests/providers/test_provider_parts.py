"""The adapters' pure parts: accumulator, retry policy, keys, from_string, public surface."""

from __future__ import annotations

import email.utils
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop.providers as providers
from agentloop import (
    AppendText,
    BeginPart,
    CommitPart,
    FinishReason,
    InvalidInputError,
    PartKind,
    ProviderError,
    TextPart,
    ToolCallPart,
)
from agentloop.model import ModelTurnResult, StreamAccumulator, parse_tool_arguments
from agentloop.providers import (
    AnthropicModel,
    GeminiModel,
    OpenAIChatModel,
    RetryPolicy,
    Secret,
    from_string,
)
from agentloop.providers._config import resolve_api_key
from agentloop.providers._retry import parse_retry_after
from agentloop.tools._executor import RAW_ARGUMENTS_KEY


def test_public_surface_is_sorted_and_complete() -> None:
    assert providers.__all__ == sorted(providers.__all__, key=lambda n: (not n.isupper(), n))
    for name in providers.__all__:
        assert getattr(providers, name).__doc__, name


@given(st.lists(st.text(min_size=1), min_size=1, max_size=8))
def test_accumulated_text_is_the_concatenation_of_its_fragments(fragments: list[str]) -> None:
    accumulator = StreamAccumulator()
    events = [event for fragment in fragments for event in accumulator.text("t", fragment)]
    events += accumulator.result(FinishReason.COMPLETED)
    assert events[0] == BeginPart("part-0", PartKind.TEXT)
    appended = [event.text for event in events if isinstance(event, AppendText)]
    assert appended == fragments
    assert CommitPart("part-0", TextPart("".join(fragments))) in events
    assert isinstance(events[-1], ModelTurnResult)


@given(st.dictionaries(st.text(), st.integers() | st.text()), st.integers(1, 6))
def test_tool_arguments_split_anywhere_parse_back(
    arguments: dict[str, object], pieces: int
) -> None:
    import json

    raw = json.dumps(arguments)
    size = max(1, len(raw) // pieces)
    accumulator = StreamAccumulator(new_call_id=lambda: "c")
    accumulator.tool_call("k", name="f")
    for start in range(0, len(raw), size):
        accumulator.tool_call("k", arguments=raw[start : start + size])
    events = accumulator.commit("k")
    assert events[0] == ToolCallPart("c", "f", arguments)


def test_tool_call_without_a_name_is_a_provider_error() -> None:
    accumulator = StreamAccumulator(provider="X")
    accumulator.tool_call("k", id="c1", arguments="{}")
    with pytest.raises(ProviderError, match="X: stream sent tool call 'k' without a function name"):
        accumulator.commit("k")


def test_mixing_part_kinds_under_one_key_is_refused() -> None:
    accumulator = StreamAccumulator(provider="X")
    accumulator.text("k", "a")
    with pytest.raises(ProviderError, match="sent reasoning content for part 'k', which is a text"):
        accumulator.reasoning("k", "b")


def test_cancelled_result_drops_tool_calls() -> None:
    accumulator = StreamAccumulator()
    accumulator.text("t", "partial")
    accumulator.tool_call("c", id="c1", name="f", arguments='{"a"')
    result = accumulator.cancelled()[-1]
    assert isinstance(result, ModelTurnResult)
    assert result.finish_reason is FinishReason.CANCELLED
    assert result.output_items[0].parts == (TextPart("partial"),)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ({}, {})),
        ("  ", ({}, {})),
        ('{"a": 1}', ({"a": 1}, {})),
        ("{oops", ("{oops", {RAW_ARGUMENTS_KEY: "{oops"})),
    ],
)
def test_parse_tool_arguments(raw: str, expected: tuple[object, object]) -> None:
    assert parse_tool_arguments(raw) == expected


def test_retry_delays_grow_exponentially_with_jitter_and_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=3.0, jitter=0.5)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 3.0), (6, 3.0)]:
        delay = policy.delay(retry)
        assert ceiling * 0.5 <= delay <= ceiling


def test_retry_after_headers() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"x": "y"}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after({"Retry-After": future}) or 0) <= 31
    assert RetryPolicy(max_retry_after=5).delay(1, {"Retry-After": "100"}) == 5


def test_retryable_statuses() -> None:
    policy = RetryPolicy()
    assert [
        s for s in (400, 401, 408, 409, 429, 500, 503, 529) if policy.is_retryable_status(s)
    ] == [
        408,
        409,
        429,
        500,
        503,
        529,
    ]


def test_bad_retry_policy_is_refused() -> None:
    with pytest.raises(ValueError, match=r"RetryPolicy\.max_attempts must be >= 1, got 0"):
        RetryPolicy(max_attempts=0)


def test_secret_never_shows_itself() -> None:
    secret = Secret("sk-abc")
    assert repr(secret) == str(secret) == "Secret('[REDACTED]')"
    assert secret.reveal() == "sk-abc"


def test_api_keys_come_from_the_environment_in_order() -> None:
    env = {"GOOGLE_API_KEY": "g", "GEMINI_API_KEY": ""}
    key = resolve_api_key(
        None, ("GEMINI_API_KEY", "GOOGLE_API_KEY"), owner="X", required=True, environ=env
    )
    assert key == Secret("g")
    with pytest.raises(ProviderError, match=r"X: no API key: pass api_key=\.\.\. or set A or B"):
        resolve_api_key(None, ("A", "B"), owner="X", required=True, environ={})


def test_openai_needs_a_key_only_for_the_default_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="set OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")
    local = OpenAIChatModel("qwen", base_url="http://127.0.0.1:8080/v1")
    assert "Authorization" not in local.endpoint().headers


def test_from_string_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a")
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    openai = from_string("openai:gpt-4o-mini")
    assert isinstance(openai, OpenAIChatModel)
    assert openai.model_name == "gpt-4o-mini"
    claude = from_string("anthropic:claude-sonnet-4-5", max_tokens=2048)
    assert isinstance(claude, AnthropicModel)
    assert claude.max_tokens == 2048
    assert isinstance(from_string("gemini:gemini-2.5-flash"), GeminiModel)
    local = from_string("openai-compatible:http://127.0.0.1:8080/v1#smollm")
    assert isinstance(local, OpenAIChatModel)
    assert (local.base_url, local.model_name) == ("http://127.0.0.1:8080/v1", "smollm")
    with pytest.raises(InvalidInputError, match="unknown provider 'mistral'"):
        from_string("mistral:large")
    with pytest.raises(InvalidInputError, match="names no model"):
        from_string("openai-compatible:http://127.0.0.1:8080/v1")
