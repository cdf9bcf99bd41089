"""Provider error bodies and their classification (pure functions, no I/O).

Reads the error shapes of OpenAI (``{"error": {"message", "type", "code"}}``),
Anthropic (``{"type": "error", "error": {"type", "message"}}``), Gemini
(``{"error": {"code", "message", "status", "details"}}``, sometimes in a list),
llama.cpp (``{"error": {"code", "message", "type": "exceed_context_size_error"}}``),
vLLM (``{"object": "error", "message", "type", "code"}``) and Ollama
(``{"error": "text"}``), and decides each error's :class:`ProviderErrorKind`
from its status, codes and message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from ..core._errors import ProviderError, ProviderErrorKind
from ._config import shorten

__all__ = ["ErrorBody", "classify", "parse_error_body", "stream_error"]

_MESSAGE_LIMIT = 500

_AUTH_CODES = frozenset(
    {
        "authentication_error",
        "permission_error",
        "invalid_api_key",
        "invalid_authentication",
        "unauthenticated",
        "permission_denied",
        "api_key_invalid",
        "insufficient_quota",
        "billing_error",
    }
)
_AUTH_PHRASES = ("api key not valid", "incorrect api key", "invalid x-api-key", "invalid api key")
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_error"})
_QUOTA_PHRASES = (
    "exceeded your current quota",
    "check your plan and billing",
)
_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "request_too_large"}
)
_OVERFLOW_PHRASES = (
    "prompt is too long",
    "maximum context length",
    "context length",
    "context window",
    "context size",
    "exceeds the maximum number of tokens",
    "input token count",
    "too many tokens",
    "reduce the length of the messages",
    "input is too long",
    "exceeds token limit",
)
_FILTER_CODES = frozenset(
    {"content_filter", "content_policy_violation", "safety", "prohibited_content", "blocklist"}
)
_FILTER_PHRASES = ("content management policy", "content filter", "content policy")
_RETRYABLE_CODES = frozenset(
    {
        "overloaded_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "api_error",
        "server_error",
        "resource_exhausted",
        "unavailable",
        "internal",
        "deadline_exceeded",
        "service_unavailable",
        "too_many_requests",
        "timeout",
        "connection",
        "stream_broken",
        "incomplete_stream",
        "deadline",
    }
)
_INVALID_CODES = frozenset(
    {
        "invalid_request_error",
        "invalid_argument",
        "not_found_error",
        "not_found",
        "failed_precondition",
        "bad_request",
        "badrequesterror",
        "unsupported_value",
    }
)
_RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
_INVALID_STATUSES = frozenset({400, 404, 405, 406, 413, 415, 422})


@attrs.frozen
class ErrorBody:
    """What a provider's error body says: a message, its error type and every code in it.

    ``codes`` holds each ``type``/``status``/``code`` string and each
    ``details[].reason`` found, lower-cased, for :func:`classify`.
    """

    message: str
    error_type: str | None = None
    codes: tuple[str, ...] = ()
    status: int | None = None


def parse_error_body(text: str) -> ErrorBody:
    """The :class:`ErrorBody` of an error response's text (any JSON shape, or plain text)."""
    text = text.strip()
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return ErrorBody(shorten(text, _MESSAGE_LIMIT) or "(empty body)")
    return error_object(document, fallback_text=text)


def error_object(document: Any, *, fallback_text: str | None = None) -> ErrorBody:
    """The :class:`ErrorBody` of a parsed error document (a body or a stream event)."""
    if isinstance(document, list) and document:
        document = document[0]
    error = document.get("error", document) if isinstance(document, dict) else document
    if isinstance(error, str):
        return ErrorBody(shorten(error, _MESSAGE_LIMIT) or "(empty error)")
    if not isinstance(error, dict):
        shown = fallback_text if fallback_text is not None else _dumps(document)
        return ErrorBody(shorten(shown, _MESSAGE_LIMIT) or "(empty body)")
    codes = list(_codes(error))
    if isinstance(document, dict) and document is not error:
        codes += [code for code in _codes(document) if code != "error"]
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = _dumps(error)
    status_code = error.get("code")
    status = (
        status_code
        if isinstance(status_code, int)
        and not isinstance(status_code, bool)
        and 100 <= status_code <= 599
        else None
    )
    error_type = next(
        (
            value
            for field in ("type", "status", "code")
            if isinstance(value := error.get(field), str) and value
        ),
        None,
    )
    return ErrorBody(shorten(message, _MESSAGE_LIMIT), error_type, tuple(codes), status)


def _codes(error: dict[str, Any]) -> Iterable[str]:
    for field in ("type", "status", "code"):
        value = error.get(field)
        if isinstance(value, str) and value:
            yield value.lower()
    details = error.get("details")
    if isinstance(details, list):
        for detail in details:
            if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
                yield detail["reason"].lower()


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def classify(status: int | None, codes: Iterable[str], message: str) -> ProviderErrorKind:
    """The kind of an error from its HTTP status, its codes and its message.

    In order: a 429 is ``AUTH`` when its body says the quota is exhausted
    (``insufficient_quota``, ``billing_error``, "exceeded your current quota")
    and ``RETRYABLE`` whatever else it says (the status decides); 401/403 or an
    auth code -> ``AUTH``; a context-length code or message (not on 429/5xx) ->
    ``CONTEXT_OVERFLOW``; a content-filter code -> ``CONTENT_FILTER``;
    408/409/425/5xx or a rate-limit/overload/network code -> ``RETRYABLE``;
    another 4xx or an invalid-request code -> ``INVALID_REQUEST``; else ``OTHER``.
    """
    found = {code.lower() for code in codes}
    text = message.lower()
    if status == 429:
        if found & _QUOTA_CODES or any(phrase in text for phrase in _QUOTA_PHRASES):
            return ProviderErrorKind.AUTH
        return ProviderErrorKind.RETRYABLE
    if status in (401, 403) or found & _AUTH_CODES or any(p in text for p in _AUTH_PHRASES):
        return ProviderErrorKind.AUTH
    transient_status = status is not None and (status in _RETRYABLE_STATUSES or status >= 500)
    if not transient_status and (
        found & _OVERFLOW_CODES or any(phrase in text for phrase in _OVERFLOW_PHRASES)
    ):
        return ProviderErrorKind.CONTEXT_OVERFLOW
    if found & _FILTER_CODES or any(phrase in text for phrase in _FILTER_PHRASES):
        return ProviderErrorKind.CONTENT_FILTER
    if transient_status or found & _RETRYABLE_CODES:
        return ProviderErrorKind.RETRYABLE
    if (status is not None and (status in _INVALID_STATUSES or 400 <= status < 500)) or (
        found & _INVALID_CODES
    ):
        return ProviderErrorKind.INVALID_REQUEST
    return ProviderErrorKind.OTHER


def stream_error(provider: str, payload: Any, *, status: int | None = None) -> ProviderError:
    """The ``ProviderError`` for an ``error`` object a provider sent mid-stream."""
    body = error_object(payload)
    status = status if status is not None else body.status
    kind_text = f" ({body.error_type})" if body.error_type else ""
    return ProviderError(
        f"{provider}: stream error{kind_text}: {body.message}",
        status=status,
        error_type=body.error_type,
        kind=classify(status, body.codes, body.message),
    )
