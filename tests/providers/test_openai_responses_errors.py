"""OpenAIResponsesModel's errors: HTTP failures, failed responses and error events classified.

HTTP error bodies are OpenAI's ``{"error": {"message", "type", "param", "code"}}``; a
failed response is ``response.failed`` with ``response.error`` (``ResponseError``: a
``code`` from its documented list and a ``message``); an ``error`` event carries
``code``, ``message`` and ``param`` at the top level (openai-python's
``ResponseErrorEvent``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import ProviderError, ProviderErrorKind
from agentloop.providers import OpenAIResponsesModel

from . import _responses_streams as streams
from ._helpers import SleepRecorder, collect, fast_retry, turn, user
from ._server import ReplayServer, json_error, sse
from .test_secrets import assert_no_leak, echoes, exception_texts, failing_turn, keys

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
INVALID = "invalid_request_error"
FLAGGED = "Your prompt was flagged as potentially violating our usage policy."
OVERFLOW = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


def model_for(server: ReplayServer, **options: Any) -> OpenAIResponsesModel:
    options.setdefault("retry", fast_retry())
    return OpenAIResponsesModel("gpt-5", base_url=f"{server.url}/v1", api_key=KEY, **options)


def error_body(message: str, kind: str, code: str | None, param: str | None = None) -> Any:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@pytest.mark.parametrize(
    ("status", "body", "kind", "requests"),
    [
        (
            400,
            error_body(OVERFLOW, "invalid_request_error", "context_length_exceeded", "input"),
            ProviderErrorKind.CONTEXT_OVERFLOW,
            1,
        ),
        (
            429,
            error_body("Rate limit reached for gpt-5", "requests", "rate_limit_exceeded"),
            ProviderErrorKind.RETRYABLE,
            3,
        ),
        (
            429,
            error_body(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                "insufficient_quota",
            ),
            ProviderErrorKind.AUTH,
            1,
        ),
        (
            401,
            error_body("Incorrect API key provided: sk-te****cdef.", INVALID, "invalid_api_key"),
            ProviderErrorKind.AUTH,
            1,
        ),
        (
            400,
            error_body(
                "Your request was rejected as a result of our safety system.",
                "invalid_request_error",
                "content_policy_violation",
            ),
            ProviderErrorKind.CONTENT_FILTER,
            1,
        ),
        (
            400,
            error_body("Unsupported parameter: 'temperature'.", "invalid_request_error", None),
            ProviderErrorKind.INVALID_REQUEST,
            1,
        ),
        (
            500,
            error_body("The server had an error", "server_error", None),
            ProviderErrorKind.RETRYABLE,
            3,
        ),
    ],
)
async def test_http_errors_are_classified_and_only_transient_ones_retried(
    status: int, body: Any, kind: ProviderErrorKind, requests: int
) -> None:
    recorder = SleepRecorder()
    async with ReplayServer([json_error(status, body)] * 3) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server, retry=fast_retry(recorder)), turn([user("x")]))
        assert len(server.requests) == requests
    error = body["error"]
    assert caught.value.kind is kind
    assert caught.value.status == status
    assert caught.value.error_type == error["type"]
    retried = " (gave up after 3 attempts)" if requests == 3 else ""
    assert str(caught.value) == (
        f"OpenAI request failed with status {status} ({error['type']}): {error['message']}{retried}"
    )


def failed(error: dict[str, Any] | None) -> bytes:
    stream = streams.Stream().created()
    response = stream.response("failed", error=error)
    return stream.event("response.failed", response=response).body()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": "server_error", "message": "The model crashed."}, ProviderErrorKind.RETRYABLE),
        ({"code": "rate_limit_exceeded", "message": "Slow down."}, ProviderErrorKind.RETRYABLE),
        ({"code": "vector_store_timeout", "message": "Timed out."}, ProviderErrorKind.RETRYABLE),
        (
            {"code": "invalid_prompt", "message": FLAGGED},
            ProviderErrorKind.CONTENT_FILTER,
        ),
        (
            {"code": "invalid_prompt", "message": "Invalid prompt: a tool output is missing."},
            ProviderErrorKind.INVALID_REQUEST,
        ),
        ({"code": "bio_policy", "message": "Refused."}, ProviderErrorKind.CONTENT_FILTER),
        (
            {"code": "image_content_policy_violation", "message": "Refused."},
            ProviderErrorKind.CONTENT_FILTER,
        ),
        ({"code": "invalid_image_url", "message": "Bad URL."}, ProviderErrorKind.INVALID_REQUEST),
        (
            {"code": "context_length_exceeded", "message": OVERFLOW},
            ProviderErrorKind.CONTEXT_OVERFLOW,
        ),
        ({"code": "something_new", "message": "?"}, ProviderErrorKind.OTHER),
    ],
)
async def test_a_failed_response_is_a_classified_error(
    error: dict[str, Any], kind: ProviderErrorKind
) -> None:
    async with ReplayServer([sse(failed(error))]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
        assert len(server.requests) == 1  # never retried once streaming has started
    assert caught.value.kind is kind
    assert caught.value.error_type == error["code"]
    assert str(caught.value) == f"OpenAI: stream error ({error['code']}): {error['message']}"


async def test_a_failed_response_without_an_error_object_still_fails() -> None:
    async with ReplayServer([sse(failed(None))]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
    assert caught.value.kind is ProviderErrorKind.OTHER
    assert str(caught.value) == "OpenAI: stream error: the response failed (no error object given)"


@pytest.mark.parametrize(
    ("fields", "text", "kind"),
    [
        (
            {"code": "ERR_SOMETHING", "message": "Something went wrong", "param": None},
            "OpenAI: stream error (ERR_SOMETHING): Something went wrong",
            ProviderErrorKind.OTHER,
        ),
        (
            {"code": "rate_limit_exceeded", "message": "Too many requests", "param": None},
            "OpenAI: stream error (rate_limit_exceeded): Too many requests",
            ProviderErrorKind.RETRYABLE,
        ),
        (
            {"error": {"type": INVALID, "code": "context_length_exceeded", "message": OVERFLOW}},
            f"OpenAI: stream error (invalid_request_error): {OVERFLOW}",
            ProviderErrorKind.CONTEXT_OVERFLOW,
        ),
    ],
)
async def test_an_error_event_mid_stream_is_a_classified_error(
    fields: dict[str, Any], text: str, kind: ProviderErrorKind
) -> None:
    stream = streams.Stream().created()
    added = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant"}
    stream.event("response.output_item.added", output_index=0, item={**added, "content": []})
    stream.event("error", **fields)
    async with ReplayServer([sse(stream.body())]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
    assert caught.value.kind is kind
    assert str(caught.value) == text


async def test_a_stream_that_stops_before_its_end_is_retryable() -> None:
    data = streams.text_stream()
    cut = data.index(b"event: response.completed")
    async with ReplayServer([sse(data[:cut])]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
    assert (caught.value.kind, caught.value.error_type) == (
        ProviderErrorKind.RETRYABLE,
        "incomplete_stream",
    )
    assert str(caught.value) == (
        "OpenAI: the stream ended before 'response.completed' (the connection closed "
        "mid-response); the turn is incomplete"
    )


async def test_a_connection_cut_mid_event_is_a_broken_stream() -> None:
    data = streams.text_stream()
    cut = data.index("wörld".encode()) + 2
    async with ReplayServer([sse(data[:cut], cut=True)]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("x")]))
    assert caught.value.error_type == "stream_broken"
    assert caught.value.kind is ProviderErrorKind.RETRYABLE


async def test_the_api_key_is_redacted_from_errors_and_the_repr() -> None:
    body = error_body(f"Incorrect API key provided: {KEY}", INVALID, "invalid_api_key")
    echo = json_error(401, body)
    async with ReplayServer([echo]) as server:
        model = model_for(server)
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("x")]))
    assert KEY not in repr(model)
    assert repr(model) == (
        f"OpenAIResponsesModel(model='gpt-5', base_url='{server.url}/v1', api_key=set)"
    )
    assert str(caught.value) == (
        "OpenAI request failed with status 401 (invalid_request_error): "
        "Incorrect API key provided: [REDACTED]"
    )


def responses(server: ReplayServer, key: str) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        "gpt-5", base_url=f"{server.url}/v1", api_key=key, retry=fast_retry()
    )


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(key=keys, echo=st.integers(0, 3), status=st.sampled_from([400, 401, 503]))
async def test_a_key_echoed_in_an_error_or_a_failed_response_never_leaks(
    key: str, echo: int, status: int
) -> None:
    message = echoes(key)[echo]
    body = {"error": {"message": message, "type": "invalid_request_error", "echo": key}}
    error, lines, server = await failing_turn(responses, key, [json_error(status, body)] * 3)
    assert "[REDACTED]" in str(error)
    assert_no_leak(key, exception_texts(error), *lines)
    assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    error, lines, _ = await failing_turn(
        responses, key, [sse(failed({"code": "server_error", "message": message}))]
    )
    assert "[REDACTED]" in str(error)
    assert_no_leak(key, exception_texts(error), *lines)
