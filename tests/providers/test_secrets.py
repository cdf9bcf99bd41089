"""API keys: validated when given, never leaked in any form, anywhere.

A leaked key is a failing test: each case captures every log record (stdlib
logging at DEBUG, httpx's and httpcore's own loggers included, and structlog)
and every exception text of the chain, and looks for the key in each form it
can take (raw, JSON-escaped, URL-encoded, repr-escaped).
"""

from __future__ import annotations

import json
import logging
import pathlib
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentloop
from agentloop import InvalidInputError, ProviderError
from agentloop.providers import AnthropicModel, GeminiModel, OpenAIChatModel, Secret
from agentloop.providers._config import CUT_MARKER, redact
from agentloop.providers._scrub import RedactedException, scrub_chain

from . import _openai_streams as openai_streams
from ._helpers import collect, fast_retry, turn, user
from ._server import ReplayServer, Reply, json_error, sse

pytestmark = pytest.mark.anyio

ERROR_BODY_LIMIT = 64 * 1024

# The text a failure can show without any key in it: the package's and the tests'
# own source (tracebacks quote it; messages and names come from it).
PROGRAM_TEXT = "\n".join(
    path.read_text(encoding="utf-8")
    for root in (pathlib.Path(agentloop.__file__).parent, pathlib.Path(__file__).parent)
    for path in sorted(root.rglob("*.py"))
)


def _could_be_the_programs_own_text(key: str) -> bool:
    return any(form in PROGRAM_TEXT for form in forms(key))


# Hypothesis also draws strings from the code under test (``InvalidInput``, say): a
# "key" the program itself spells out cannot be told from a leak, so none is drawn.
keys = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=12, max_size=48
).filter(lambda key: not _could_be_the_programs_own_text(key))


def forms(key: str) -> set[str]:
    """Every spelling of ``key`` a leak could take."""
    escaped = json.dumps(key)[1:-1]
    return {
        key,
        escaped,
        escaped.replace("/", "\\/"),
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote(key),
        urllib.parse.quote_plus(key),
        repr(key)[1:-1],
        json.dumps(escaped)[1:-1],
    }


class Capture(logging.Handler):
    """Every stdlib record's formatted message."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def all_logs() -> Iterator[list[str]]:
    """Every log line (stdlib at DEBUG, structlog) written inside the block."""
    handler = Capture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    lines: list[str] = []
    try:
        with structlog.testing.capture_logs() as captured:
            yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
    lines += handler.messages
    lines += [repr(entry) for entry in captured]


def exception_texts(error: BaseException) -> str:
    """The whole printed chain plus each exception's str and repr."""
    texts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        texts += [str(current), repr(current)]
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return "\n".join(texts)


def assert_no_leak(key: str, *texts: str) -> None:
    for text in texts:
        for form in forms(key):
            assert form not in text


def openai(server: ReplayServer, key: str) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key=key, retry=fast_retry())


def anthropic(server: ReplayServer, key: str) -> AnthropicModel:
    return AnthropicModel("m", base_url=server.url, api_key=key, retry=fast_retry())


def gemini(server: ReplayServer, key: str) -> GeminiModel:
    return GeminiModel("m", base_url=server.url, api_key=key, retry=fast_retry())


ADAPTERS = [openai, anthropic, gemini]


async def failing_turn(
    factory: Callable[[ReplayServer, str], Any], key: str, replies: list[Reply]
) -> tuple[ProviderError, list[str], ReplayServer]:
    with all_logs() as lines:
        async with ReplayServer(replies) as server:
            with pytest.raises(ProviderError) as caught:
                await collect(factory(server, key), turn([user("hi")]))
    return caught.value, lines, server


def echoes(key: str) -> list[str]:
    """Error texts a server could echo the key in."""
    return [
        f"Incorrect API key provided: {key}",
        f"key={urllib.parse.quote(key, safe='')}&x=1",
        json.dumps({"key": key}),
        f"repr {key!r}",
    ]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=keys,
    which=st.sampled_from(ADAPTERS),
    echo=st.integers(0, 3),
    status=st.sampled_from([400, 401, 503]),
)
async def test_a_key_echoed_in_an_error_body_never_leaks(
    key: str, which: Callable[[ReplayServer, str], Any], echo: int, status: int
) -> None:
    message = echoes(key)[echo]
    body = {"error": {"message": message, "type": "invalid_request_error", "echo": key}}
    replies = [json_error(status, body, ("X-Echo-Key", key))] * 3
    error, lines, server = await failing_turn(which, key, replies)
    assert "[REDACTED]" in str(error)
    assert_no_leak(key, exception_texts(error), *lines)
    assert any(line.startswith("HTTP Request: POST") for line in lines)  # httpx logged
    assert any("receive_response_headers" in line for line in lines)  # httpcore logged
    sent = server.requests[0].headers
    auth = (sent.get("authorization"), sent.get("x-api-key"), sent.get("x-goog-api-key"))
    assert f"Bearer {key}" in auth or key in auth
    assert all(form not in server.requests[0].path for form in forms(key))


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(key=keys, which=st.sampled_from(ADAPTERS))
async def test_a_key_in_a_mid_stream_error_or_malformed_chunk_never_leaks(
    key: str, which: Callable[[ReplayServer, str], Any]
) -> None:
    quoted = json.dumps(key)
    records = (
        f'event: error\ndata: {{"type": "error", "error": {{"type": "api_error", '
        f'"message": {quoted}}}}}\n\n'
    )
    error, lines, _ = await failing_turn(which, key, [sse(records.encode())])
    assert_no_leak(key, exception_texts(error), *lines)
    broken = f'data: {{"choices": {quoted}, "x": {quoted}\n\n'.encode()
    error, lines, _ = await failing_turn(which, key, [sse(broken)])
    assert "malformed JSON" in str(error)
    assert_no_leak(key, exception_texts(error), *lines)


@pytest.mark.parametrize("offset", [1, 4, 9, 20])
async def test_a_key_cut_by_the_error_body_limit_is_redacted(offset: int) -> None:
    key = "sk-proj-cutcutcutcutcut-0123456789"
    start = ERROR_BODY_LIMIT - offset
    body = ("x" * start + key + "y" * 100).encode()
    reply = Reply(status=400, chunks=(body,), headers=(("Content-Type", "text/plain"),))
    error, lines, _ = await failing_turn(openai, key, [reply])
    texts = exception_texts(error)
    assert key[: max(offset, 4)] not in texts.replace("x" * 10, "")
    assert_no_leak(key, texts, *lines)


async def test_a_key_cut_by_the_message_limit_is_redacted() -> None:
    key = "sk-ant-api03-messagecut-ABCDEFGHIJ"
    message = "a" * 490 + key
    error, lines, _ = await failing_turn(
        anthropic, key, [json_error(400, {"error": {"message": message}})]
    )
    assert str(error) == f"Anthropic request failed with status 400: {'a' * 490}[REDACTED]"
    assert_no_leak(key, exception_texts(error), *lines)


async def test_a_key_in_a_quoted_chunk_cut_at_200_characters_is_redacted() -> None:
    key = "AIzaSyQuotedChunkCut-0123456789abcdef"
    data = "{" + "z" * 190 + key
    error, _, _ = await failing_turn(gemini, key, [sse(f"data: {data}\r\n\r\n".encode())])
    assert key[:10] not in str(error)
    assert f"[REDACTED]{CUT_MARKER}" in str(error)


async def test_a_retried_error_logs_no_key() -> None:
    key = "sk-retry-log-0123456789"
    body = {"error": {"message": f"overloaded for {key}", "type": "overloaded_error"}}
    error, lines, _ = await failing_turn(anthropic, key, [json_error(529, body)] * 3)
    reason = (
        "Anthropic request failed with status 529 (overloaded_error): overloaded for [REDACTED]"
    )
    retries = [line for line in lines if "'provider.retry'" in line]
    assert len(retries) == 2
    assert all(f"'reason': '{reason}'" in line for line in retries)
    assert str(error) == f"{reason} (gave up after 3 attempts)"
    assert_no_leak(key, exception_texts(error), *lines)


def test_chained_exceptions_that_show_a_key_are_replaced_by_redacted_stand_ins() -> None:
    key = "sk-chain-0123456789abcdef"
    secret = Secret(key)
    try:
        try:
            try:
                raise OSError(f"connect to https://x/{urllib.parse.quote(key)} failed")
            except OSError as inner:
                raise RuntimeError("clean middle") from inner
        except RuntimeError:
            raise ProviderError(f"outer {json.dumps(key)}")  # noqa: B904 (__context__ on purpose)
    except ProviderError as caught:
        error = caught
    scrub_chain(error, [secret])
    assert str(error) == 'outer "[REDACTED]"'
    middle = error.__context__
    assert isinstance(middle, RuntimeError)
    assert str(middle) == "clean middle"
    assert isinstance(middle.__cause__, RedactedException)
    assert str(middle.__cause__) == "OSError: connect to https://x/[REDACTED] failed"
    assert_no_leak(key, exception_texts(error))


@given(key=keys, cut=st.integers(4, 60))
@example(key="\"0000000001'", cut=5)  # a start of the key inside a start of its escaped form
def test_redact_finds_every_form_and_every_cut(key: str, cut: int) -> None:
    secret = Secret(key)
    for form in forms(key):
        assert redact(f"a {form} b", [secret]) == "a [REDACTED] b"
        prefix = form[: min(cut, len(form) - 1)]
        if len(prefix) >= 4:
            tail = redact(f"tail {prefix}", [secret])
            assert tail.startswith("tail [REDACTED]")
            rest = tail.rsplit("[REDACTED]", 1)[1]
            assert len(rest) < 4 or not any(f.startswith(rest) for f in forms(key))
            cut_text = redact(f"tail {prefix}{CUT_MARKER} more", [secret])
            assert cut_text.startswith("tail [REDACTED]")
            assert cut_text.endswith("[truncated] more")
            assert prefix not in cut_text


# -- validation ---------------------------------------------------------------------------------


@given(
    key=keys,
    before=st.sampled_from(["", " ", "\n", "\t ", "\r\n"]),
    after=st.sampled_from([" ", "\n", "  \r\n"]),
)
def test_surrounding_whitespace_is_stripped_with_a_warning_that_hides_the_key(
    key: str, before: str, after: str
) -> None:
    with structlog.testing.capture_logs() as logs:
        secret = Secret(before + key + after)
    assert secret.reveal() == key
    assert logs == [
        {
            "event": "provider.api_key_stripped",
            "log_level": "warning",
            "leading": len(before),
            "trailing": len(after),
            "hint": (
                "the API key had surrounding whitespace (often a copied newline); it was removed"
            ),
        }
    ]
    assert_no_leak(key, repr(logs), repr(secret), str(secret))


@given(
    key=keys,
    position=st.integers(1, 11),
    bad=st.characters(max_codepoint=0x1F) | st.just("\x7f"),
)
def test_control_characters_inside_a_key_are_refused(key: str, position: int, bad: str) -> None:
    value = key[:position] + bad + key[position:]
    with pytest.raises(InvalidInputError) as caught:
        Secret(value)
    assert str(caught.value) == (
        f"API key: contains a control character (U+{ord(bad):04X}) at position {position}; "
        "API keys are printable ASCII: check how the key was copied"
    )
    assert_no_leak(key, exception_texts(caught.value))


@given(key=keys, position=st.integers(1, 11), bad=st.characters(min_codepoint=0x80))
def test_non_ascii_inside_a_key_is_refused(key: str, position: int, bad: str) -> None:
    value = key[:position] + bad + key[position:]
    with pytest.raises(InvalidInputError) as caught:
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key=value)
    assert str(caught.value) == (
        f"API key: contains a non-ASCII character (U+{ord(bad):04X}) at position {position}; "
        "API keys are printable ASCII: check how the key was copied"
    )


@pytest.mark.parametrize("value", ["", "   ", "\n"])
def test_an_empty_key_is_refused(value: str) -> None:
    with pytest.raises(
        InvalidInputError, match=r"^API key: the value is empty \(or only whitespace\)$"
    ):
        Secret(value)


def test_a_bad_key_from_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant\x1brest")
    with pytest.raises(InvalidInputError) as caught:
        AnthropicModel("m")
    assert str(caught.value) == (
        "AnthropicModel: $ANTHROPIC_API_KEY: API key: contains a control character (U+001B) "
        "at position 6; API keys are printable ASCII: check how the key was copied"
    )


async def test_the_gemini_key_goes_in_a_header_never_in_the_url() -> None:
    key = "AIzaSyHeaderOnly-0123456789"
    with all_logs() as lines:
        async with ReplayServer([sse(openai_streams.text_stream())]) as server:
            model = gemini(server, key)
            with pytest.raises(ProviderError):
                await collect(model, turn([user("hi")]))
    recorded = server.requests[0]
    assert recorded.headers["x-goog-api-key"] == key
    assert recorded.path == "/v1beta/models/m:streamGenerateContent?alt=sse"
    assert_no_leak(key, *lines)


def test_keys_shorter_than_four_characters_are_not_scrubbed_from_text() -> None:
    assert redact("the kind of token", [Secret("k")]) == "the kind of token"
    assert redact("a key abcd here", [Secret("abcd")]) == "a key [REDACTED] here"


@pytest.mark.parametrize(
    ("header", "value", "secret"),
    [
        ("Authorization", "Bearer sk-or-v1-headerkey-0123", "sk-or-v1-headerkey-0123"),
        ("x-api-key", "sk-ant-header-0123456789", "sk-ant-header-0123456789"),
        ("api-key", "azure-header-key-0123", "azure-header-key-0123"),
    ],
)
async def test_credentials_in_user_headers_are_redacted_like_the_key(
    header: str, value: str, secret: str
) -> None:
    body = {"error": {"message": f"bad credential {secret} (sent as {value})"}}
    with all_logs() as lines:
        async with ReplayServer([json_error(401, body, ("X-Echo", value))]) as server:
            model = OpenAIChatModel(
                "m", base_url=f"{server.url}/v1", headers={header: value}, retry=fast_retry()
            )
            with pytest.raises(ProviderError) as caught:
                await collect(model, turn([user("hi")]))
    assert server.requests[0].headers[header.lower()] == value
    shown = value.replace(secret, "[REDACTED]")
    assert str(caught.value) == (
        f"OpenAI request failed with status 401: bad credential [REDACTED] (sent as {shown})"
    )
    assert_no_leak(secret, exception_texts(caught.value), *lines)


@pytest.mark.parametrize("name", ["gemini?key=x", "a/b", "g#1", "g 1", "g\n", "g%2F"])
def test_a_gemini_model_name_cannot_change_the_url(name: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        GeminiModel(name, api_key="key-0123")
    assert str(caught.value) == (
        f"GeminiModel: model {name!r} cannot go in the request URL: it must not contain '/', "
        "'?', '#', '%', spaces or control characters"
    )
