"""Every ProviderError carries its kind, read from each provider's real error bodies.

Bodies are the shapes the providers document and send:
- OpenAI: https://platform.openai.com/docs/guides/error-codes
  (``{"error": {"message", "type", "param", "code"}}``; ``context_length_exceeded``,
  ``invalid_api_key``, ``rate_limit_exceeded``, ``insufficient_quota``, Azure's
  ``content_filter``)
- Anthropic: https://docs.anthropic.com/en/api/errors
  (``{"type": "error", "error": {"type", "message"}}``; ``overloaded_error`` on 529,
  "prompt is too long: N tokens > M maximum")
- Gemini: https://ai.google.dev/gemini-api/docs/troubleshooting
  (``{"error": {"code", "message", "status", "details"}}``; INVALID_ARGUMENT with the
  input token count message, RESOURCE_EXHAUSTED, UNAVAILABLE, API_KEY_INVALID)
- llama.cpp's server: ``{"error": {"code": 400, "message": "the request exceeds the
  available context size, try increasing it", "type": "exceed_context_size_error",
  "n_prompt_tokens", "n_ctx"}}``
- vLLM: ``{"object": "error", "message": "This model's maximum context length is ...",
  "type": "BadRequestError", "code": 400}``
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import ProviderError
from agentloop.providers import (
    AnthropicModel,
    GeminiModel,
    OpenAIChatModel,
    ProviderErrorKind,
    RetryPolicy,
)

from ._helpers import collect, turn, user
from ._server import ReplayServer, Reply, json_error, sse

pytestmark = pytest.mark.anyio

K = ProviderErrorKind


def openai(url: str) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=f"{url}/v1", api_key="k", retry=RetryPolicy.never())


def anthropic(url: str) -> AnthropicModel:
    return AnthropicModel("m", base_url=url, api_key="k", retry=RetryPolicy.never())


def gemini(url: str) -> GeminiModel:
    return GeminiModel("m", base_url=url, api_key="k", retry=RetryPolicy.never())


async def failure(factory: Any, reply: Reply) -> ProviderError:
    async with ReplayServer([reply]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(factory(server.url), turn([user("hi")]))
    return caught.value


def anthropic_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def gemini_body(code: int, status: str, message: str, reason: str | None = None) -> Any:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if reason:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason}]
    return {"error": error}


def openai_body(message: str, kind: str, code: str | None, param: str | None = None) -> Any:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


CASES = [
    # -- OpenAI
    (
        openai,
        400,
        openai_body(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130211 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    (
        openai,
        401,
        openai_body(
            "Incorrect API key provided: sk-abc***wxyz.", "invalid_request_error", "invalid_api_key"
        ),
        K.AUTH,
    ),
    (
        openai,
        429,
        openai_body(
            "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM).",
            "tokens",
            "rate_limit_exceeded",
        ),
        K.RETRYABLE,
    ),
    (
        openai,
        429,
        openai_body(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        K.AUTH,
    ),
    (
        openai,
        400,
        openai_body(
            "The response was filtered due to the prompt triggering Azure OpenAI's content "
            "management policy.",
            "invalid_request_error",
            "content_filter",
            "prompt",
        ),
        K.CONTENT_FILTER,
    ),
    (
        openai,
        400,
        openai_body(
            "Invalid value for 'tool_choice'.", "invalid_request_error", None, "tool_choice"
        ),
        K.INVALID_REQUEST,
    ),
    (
        openai,
        404,
        openai_body("The model `m` does not exist", "invalid_request_error", "model_not_found"),
        K.INVALID_REQUEST,
    ),
    (openai, 500, openai_body("The server had an error.", "server_error", None), K.RETRYABLE),
    # llama.cpp and vLLM through the OpenAI adapter
    (
        openai,
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 5000,
                "n_ctx": 4096,
            }
        },
        K.CONTEXT_OVERFLOW,
    ),
    (
        openai,
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        K.CONTEXT_OVERFLOW,
    ),
    (
        openai,
        400,
        {
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        K.CONTEXT_OVERFLOW,
    ),
    (openai, 503, {"error": "model is loading"}, K.RETRYABLE),  # Ollama's string error
    # -- Anthropic
    (
        anthropic,
        400,
        anthropic_body(
            "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"
        ),
        K.CONTEXT_OVERFLOW,
    ),
    (anthropic, 401, anthropic_body("authentication_error", "invalid x-api-key"), K.AUTH),
    (
        anthropic,
        403,
        anthropic_body("permission_error", "Your API key does not have permission"),
        K.AUTH,
    ),
    (anthropic, 529, anthropic_body("overloaded_error", "Overloaded"), K.RETRYABLE),
    (
        anthropic,
        429,
        anthropic_body("rate_limit_error", "Number of requests has exceeded"),
        K.RETRYABLE,
    ),
    (anthropic, 500, anthropic_body("api_error", "Internal server error"), K.RETRYABLE),
    (
        anthropic,
        413,
        anthropic_body("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        K.CONTEXT_OVERFLOW,
    ),
    (
        anthropic,
        400,
        anthropic_body("invalid_request_error", "messages: roles must alternate"),
        K.INVALID_REQUEST,
    ),
    (anthropic, 404, anthropic_body("not_found_error", "model: m"), K.INVALID_REQUEST),
    # -- Gemini
    (
        gemini,
        400,
        gemini_body(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1196265) exceeds the maximum number of tokens allowed "
            "(1048575).",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    (
        gemini,
        400,
        gemini_body(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            "API_KEY_INVALID",
        ),
        K.AUTH,
    ),
    (gemini, 403, gemini_body(403, "PERMISSION_DENIED", "Permission denied"), K.AUTH),
    (
        gemini,
        429,
        gemini_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
        K.RETRYABLE,
    ),
    (
        gemini,
        503,
        [gemini_body(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")],
        K.RETRYABLE,
    ),
    (
        gemini,
        400,
        gemini_body(400, "INVALID_ARGUMENT", "Request contains an invalid argument."),
        K.INVALID_REQUEST,
    ),
    (gemini, 500, gemini_body(500, "INTERNAL", "An internal error has occurred."), K.RETRYABLE),
    # -- a 429: the status decides, whatever auth-like type the body names ...
    (openai, 429, openai_body("Too many requests", "authentication_error", None), K.RETRYABLE),
    (anthropic, 429, anthropic_body("permission_error", "Slow down"), K.RETRYABLE),
    (
        openai,
        429,
        openai_body("Rate limited: invalid api key rotation", "invalid_api_key", "invalid_api_key"),
        K.RETRYABLE,
    ),
    (gemini, 429, gemini_body(429, "UNAUTHENTICATED", "Too many requests"), K.RETRYABLE),
    # ... but a body whose type is not a string (or no body shape at all) still retries
    (openai, 429, {"error": {"message": "slow", "type": 7, "code": ["x"]}}, K.RETRYABLE),
    (openai, 429, {"error": None}, K.RETRYABLE),
    # ... except a quota that is used up: that is not retried
    (
        gemini,
        429,
        gemini_body(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
        ),
        K.AUTH,
    ),
    (anthropic, 429, anthropic_body("billing_error", "Your credit balance is too low"), K.AUTH),
]


@pytest.mark.parametrize(("factory", "status", "body", "kind"), CASES)
async def test_error_bodies_are_classified(
    factory: Any, status: int, body: Any, kind: ProviderErrorKind
) -> None:
    error = await failure(factory, json_error(status, body))
    assert error.kind is kind
    assert error.status == status
    assert error.retryable is (kind is K.RETRYABLE)


async def test_the_message_names_status_type_and_provider_message() -> None:
    body = anthropic_body(
        "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"
    )
    error = await failure(anthropic, json_error(400, body))
    assert str(error) == (
        "Anthropic request failed with status 400 (invalid_request_error): "
        "prompt is too long: 208310 tokens > 200000 maximum"
    )
    assert error.error_type == "invalid_request_error"


async def test_a_context_overflow_is_not_retried() -> None:
    body = openai_body(
        "maximum context length is 10", "invalid_request_error", "context_length_exceeded"
    )
    async with ReplayServer([json_error(400, body)] * 3) as server:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key="k")
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("hi")]))
        assert len(server.requests) == 1
    assert caught.value.kind is K.CONTEXT_OVERFLOW


async def test_an_insufficient_quota_429_is_not_retried() -> None:
    body = openai_body(
        "You exceeded your current quota", "insufficient_quota", "insufficient_quota"
    )
    async with ReplayServer([json_error(429, body)] * 3) as server:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key="k")
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("hi")]))
        assert len(server.requests) == 1
    assert caught.value.kind is K.AUTH


MID_STREAM = [
    (
        anthropic,
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}\n\n',
        K.RETRYABLE,
        "Anthropic: stream error (overloaded_error): Overloaded",
    ),
    (
        anthropic,
        'event: error\ndata: {"type": "error", "error": {"type": "invalid_request_error", '
        '"message": "prompt is too long: 5 tokens > 4 maximum"}}\n\n',
        K.CONTEXT_OVERFLOW,
        "Anthropic: stream error (invalid_request_error): prompt is too long: 5 tokens > 4 maximum",
    ),
    (
        openai,
        'data: {"error": {"message": "the request exceeds the available context size, try '
        'increasing it", "type": "exceed_context_size_error", "code": 400}}\n\n',
        K.CONTEXT_OVERFLOW,
        "OpenAI: stream error (exceed_context_size_error): the request exceeds the available "
        "context size, try increasing it",
    ),
    (
        openai,
        'data: {"error": {"message": "upstream timed out", "type": "server_error"}}\n\n',
        K.RETRYABLE,
        "OpenAI: stream error (server_error): upstream timed out",
    ),
    (
        gemini,
        'data: {"error": {"code": 500, "message": "An internal error has occurred.", '
        '"status": "INTERNAL"}}\r\n\r\n',
        K.RETRYABLE,
        "Gemini: stream error (INTERNAL): An internal error has occurred.",
    ),
]


@pytest.mark.parametrize(("factory", "record", "kind", "message"), MID_STREAM)
async def test_mid_stream_errors_are_classified(
    factory: Any, record: str, kind: ProviderErrorKind, message: str
) -> None:
    error = await failure(factory, sse(record.encode()))
    assert (str(error), error.kind) == (message, kind)


async def test_a_cut_stream_is_retryable() -> None:
    error = await failure(openai, sse(b'data: {"choices": []}\n\n', cut=True))
    assert error.kind is K.RETRYABLE
    assert error.error_type in ("incomplete_stream", "stream_broken")


async def test_a_refused_connection_is_retryable() -> None:
    async with ReplayServer([]) as server:
        url = server.url
    with pytest.raises(ProviderError) as caught:
        await collect(openai(url), turn([user("hi")]))
    assert caught.value.kind is K.RETRYABLE
    assert caught.value.error_type == "connection"
    assert str(caught.value).startswith("OpenAI: connection failed (ConnectError: ")


async def test_a_missing_key_for_the_providers_own_host_is_an_auth_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderError) as caught:
        AnthropicModel("m")
    assert caught.value.kind is K.AUTH
    assert (
        str(caught.value) == "AnthropicModel: no API key: pass api_key=... or set ANTHROPIC_API_KEY"
    )


def test_the_kind_defaults_from_retryable() -> None:
    assert ProviderError("x").kind is K.OTHER
    assert ProviderError("x", retryable=True).kind is K.RETRYABLE
    assert ProviderError("x", kind=K.AUTH).retryable is False
    assert ProviderError("x", kind=K.RETRYABLE).retryable is True


async def test_a_header_that_cannot_be_sent_is_an_invalid_request() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", headers={"X-Note": "héllo"})
    with pytest.raises(ProviderError) as caught:
        await collect(model, turn([user("hi")]))
    assert str(caught.value) == (
        "OpenAI: cannot build the request (UnicodeEncodeError: 'ascii' codec can't encode "
        "character '\\xe9' in position 1: ordinal not in range(128)); header values must be "
        "ASCII text without line breaks"
    )
    assert caught.value.kind is K.INVALID_REQUEST


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (float("nan"), "ValueError: Out of range float values are not JSON compliant"),
        ({1, 2}, "TypeError: Object of type set is not JSON serializable"),
    ],
)
async def test_a_request_body_that_is_not_json_is_an_invalid_request(
    value: Any, detail: str
) -> None:
    from agentloop import Item, ItemKind, ToolCallPart, ToolResultPart

    transcript = [
        user("hi"),
        Item(ItemKind.ASSISTANT, (ToolCallPart("c1", "f", {"x": value}),)),
        Item(ItemKind.TOOL, (ToolResultPart("c1", "ok"),)),
    ]
    async with ReplayServer([]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(anthropic(server.url), turn(transcript))
        assert server.requests == []
    message = str(caught.value)  # Python 3.12+ adds ": nan" to the ValueError
    assert message.startswith(f"Anthropic: cannot send the request: its body is not JSON ({detail}")
    assert message.endswith(
        "); a transcript value (a tool input or result, metadata) is NaN, infinite or not "
        "JSON-serializable"
    )
    assert caught.value.kind is K.INVALID_REQUEST
