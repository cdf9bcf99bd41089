"""Responses API stream reading helpers: failures, usage, item texts (pure functions).

``stream_failure`` classifies ``response.failed`` errors and ``error`` events as HTTP
errors are classified, and by the Responses API's own ``ResponseError.code`` values
(openai-python's ``types/responses/response_error.py``).
"""

from __future__ import annotations

from typing import Any

from ..core._errors import ProviderError, ProviderErrorKind
from ..core._items import Usage
from ._classify import classify, error_object
from ._config import shorten
from ._wire import get_list, get_mapping, get_str, require_mapping, usage_cost, usage_count

__all__ = ["protocol_error", "settled_rest", "stream_failure", "summary_texts", "usage_of"]

_P = "OpenAI"
_INVALID = ProviderErrorKind.INVALID_RESPONSE
_CODE_KINDS = {
    "bio_policy": ProviderErrorKind.CONTENT_FILTER,
    "image_content_policy_violation": ProviderErrorKind.CONTENT_FILTER,
    "vector_store_timeout": ProviderErrorKind.RETRYABLE,
    **dict.fromkeys(
        (
            "data_residency_mismatch",
            "invalid_image",
            "invalid_image_format",
            "invalid_base64_image",
            "invalid_image_url",
            "image_too_large",
            "image_too_small",
            "image_parse_error",
            "invalid_image_mode",
            "image_file_too_large",
            "unsupported_image_media_type",
            "empty_image_file",
            "failed_to_download_image",
            "image_file_not_found",
        ),
        ProviderErrorKind.INVALID_REQUEST,
    ),
}


def stream_failure(error: dict[str, Any]) -> ProviderError:
    """The ``ProviderError`` for a ``response.failed`` error or an ``error`` event.

    Classified as HTTP errors are, and by the Responses API's own codes
    (``ResponseError.code``): policy codes are ``CONTENT_FILTER``, image and
    residency codes ``INVALID_REQUEST``, ``invalid_prompt`` either (a flagged
    prompt, or another invalid one).
    """
    body = error_object({"error": error})
    code = error.get("code")
    code = code.lower() if isinstance(code, str) else ""
    kind = _CODE_KINDS.get(code) or classify(body.status, body.codes, body.message)
    if code == "invalid_prompt":
        flagged = any(word in body.message.lower() for word in ("flagged", "usage polic"))
        kind = ProviderErrorKind.CONTENT_FILTER if flagged else ProviderErrorKind.INVALID_REQUEST
    kind_text = f" ({body.error_type})" if body.error_type else ""
    return ProviderError(
        f"{_P}: stream error{kind_text}: {body.message}",
        status=body.status,
        error_type=body.error_type,
        kind=kind,
    )


def protocol_error(problem: str) -> ProviderError:
    return ProviderError(
        f"{_P}: malformed response: {problem}", error_type="malformed_stream", kind=_INVALID
    )


def settled_rest(streamed: str, final: str, what: str) -> str:
    """What ``final`` adds to ``streamed``; a ``final`` that contradicts it is malformed."""
    if final.startswith(streamed):
        return final[len(streamed) :]
    raise protocol_error(
        f"{what} is {shorten(final, 80)!r} at its end, but its deltas made "
        f"{shorten(streamed, 80)!r}"
    )


def summary_texts(item: dict[str, Any], field: str, kind: str, where: str) -> list[str]:
    texts: list[str] = []
    for position, entry in enumerate(get_list(item, field, where, _P)):
        entry_where = f"{where}.{field}[{position}]"
        entry = require_mapping(entry, entry_where, _P)
        if get_str(entry, "type", entry_where, _P) in (kind, None):
            texts.append(get_str(entry, "text", entry_where, _P) or "")
    return texts


def usage_of(usage: dict[str, Any], where: str) -> Usage:
    inputs = get_mapping(usage, "input_tokens_details", where, _P)
    outputs = get_mapping(usage, "output_tokens_details", where, _P)
    return Usage(
        input_tokens=usage_count(usage, "input_tokens", _P),
        output_tokens=usage_count(usage, "output_tokens", _P),
        reasoning_tokens=usage_count(outputs, "reasoning_tokens", _P),
        cache_read_tokens=usage_count(inputs, "cached_tokens", _P),
        cache_write_tokens=usage_count(inputs, "cache_write_tokens", _P),
        cost=usage_cost(usage.get("cost"), _P),
    )
