"""Reading a streamed HTTP response as server-sent events.

Framing is done by the maintained ``httpx-sse`` package: it decodes the body
with an incremental UTF-8 decoder (so a character split across network
chunks is fine), splits lines on ``\\r\\n``, ``\\r`` or ``\\n`` across chunk
boundaries, skips ``:`` comments and joins multi-line ``data:`` fields. This
module only translates its errors (and httpx's) into :class:`ProviderError`,
once, at the seam. A non-streamed JSON response is read with
:func:`iter_whole_body`, which hands the body to the same translators as one
event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError

from ..core._errors import ProviderError, ProviderErrorKind
from ._config import shorten

__all__ = ["WHOLE_BODY_EVENT", "ServerSentEvent", "iter_sse", "iter_whole_body", "parse_json_data"]

WHOLE_BODY_EVENT = "agentloop.whole_body"
"""The event name :func:`iter_whole_body` gives the one event it makes of a body."""


async def iter_sse(
    response: httpx.Response, provider: str
) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of ``response``; transport and framing failures become ``ProviderError``.

    An incomplete final event (no blank line after it) is dropped, as the SSE
    specification asks; adapters notice the missing terminator.
    """
    events = EventSource(response).aiter_sse()
    try:
        while True:
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                return
            except SSEError as error:
                raise ProviderError(
                    f"{provider}: expected a text/event-stream response, got {error}",
                    status=response.status_code,
                    error_type="malformed_stream",
                    kind=ProviderErrorKind.INVALID_RESPONSE,
                ) from error
            except (httpx.TransportError, httpx.DecodingError, httpx.StreamError) as error:
                raise _read_failure(provider, response, error) from error
            yield event
    finally:
        await events.aclose()


async def iter_whole_body(
    response: httpx.Response, provider: str
) -> AsyncGenerator[ServerSentEvent, None]:
    """A non-streamed response as one event whose ``data`` is the whole body."""
    try:
        raw = await response.aread()
    except (httpx.TransportError, httpx.DecodingError, httpx.StreamError) as error:
        raise _read_failure(provider, response, error) from error
    yield ServerSentEvent(event=WHOLE_BODY_EVENT, data=raw.decode("utf-8", errors="replace"))


def _read_failure(
    provider: str, response: httpx.Response, error: httpx.HTTPError | httpx.StreamError
) -> ProviderError:
    if isinstance(error, httpx.DecodingError):
        encoding = response.headers.get("content-encoding", "identity")
        return ProviderError(
            f"{provider}: cannot decode the response body: it is marked Content-Encoding: "
            f"{shorten(encoding, 40)!r} but does not decode ({shorten(str(error), 200)})",
            error_type="malformed_stream",
            kind=ProviderErrorKind.INVALID_RESPONSE,
        )
    if isinstance(error, httpx.TimeoutException):
        return ProviderError(
            f"{provider}: the response stream stalled (read timeout) after it started; "
            "raise the adapter's timeout if the model thinks for long",
            error_type="timeout",
            kind=ProviderErrorKind.RETRYABLE,
        )
    return ProviderError(
        f"{provider}: the response stream broke after it started "
        f"({type(error).__name__}: {error}); it is not retried because part of the "
        "answer was already streamed",
        error_type="stream_broken",
        kind=ProviderErrorKind.RETRYABLE,
    )


def parse_json_data(event: ServerSentEvent, provider: str) -> Any:
    """The event's ``data`` as JSON; malformed JSON is a ``ProviderError`` quoting it."""
    try:
        return json.loads(event.data)
    except (json.JSONDecodeError, RecursionError) as error:
        shown = shorten(event.data, 200)
        if event.event == WHOLE_BODY_EVENT:
            where = "the response body"
        else:
            where = f"a stream event{f' {event.event!r}' if event.event else ''}"
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deeply"
        raise ProviderError(
            f"{provider}: malformed JSON in {where}: {reason} in {shown!r}",
            error_type="malformed_stream",
            kind=ProviderErrorKind.INVALID_RESPONSE,
        ) from error
