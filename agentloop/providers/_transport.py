"""The HTTP seam shared by every adapter: open with retries, stream, always close.

Layers, each named for its concern (as in httpx):
``stream_turn`` (cancellation and the translator) ->
``_open_handling_retries`` (backoff, ``Retry-After``) ->
``_open_once`` (one request; foreign errors translated once, here).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

import anyio
import attrs
import httpx
import structlog

from ..core._cancellation import TurnCancellation
from ..core._errors import ProviderError
from ..model._protocol import ModelEvent
from ._config import Secret, redact
from ._retry import RetryPolicy
from ._sse import ServerSentEvent, iter_sse, iter_whole_body

__all__ = [
    "PROVIDER_FINISH_KEY",
    "Connection",
    "Endpoint",
    "StreamTranslator",
    "compact_json",
    "error_details",
    "require_mapping",
    "stream_error",
    "stream_turn",
    "texts",
]

log = structlog.get_logger("agentloop")

PROVIDER_FINISH_KEY = "agentloop.provider_finish_reason"
"""Result metadata: the finish reason exactly as the provider sent it."""

_CLEANUP_SECONDS = 5.0
_ERROR_BODY_LIMIT = 64 * 1024


class StreamTranslator(Protocol):
    """Turns one provider's events into model events (pure, no I/O)."""

    @property
    def done(self) -> bool:
        """Whether the provider's terminal event was seen; reading stops there."""
        ...

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The model events for one server-sent event; a protocol error raises."""
        ...

    def finish(self) -> list[ModelEvent]:
        """The closing events once the body ended; ends with a ``ModelTurnResult``.

        Raises ``ProviderError`` when the stream ended before its terminator.
        """
        ...

    def cancel(self) -> list[ModelEvent]:
        """The closing events of a cancelled turn (a ``CANCELLED`` result)."""
        ...


@attrs.frozen
class Endpoint:
    """Where and how one adapter sends a request (everything but the body).

    ``streaming=False`` reads the response as one JSON document, handed to the
    translator as a single event.
    """

    provider: str
    url: str
    headers: dict[str, str] = attrs.field(repr=False)
    timeout: httpx.Timeout
    retry: RetryPolicy
    client: httpx.AsyncClient | None = attrs.field(default=None, repr=False)
    secrets: tuple[Secret | None, ...] = attrs.field(default=(), repr=False)
    streaming: bool = True


@attrs.frozen
class Connection:
    """How an adapter reaches its provider: the user's extra headers, timeout, retries,
    client and API key (the constructor arguments every adapter shares)."""

    headers: dict[str, str] = attrs.field(repr=False)
    timeout: httpx.Timeout
    retry: RetryPolicy
    client: httpx.AsyncClient | None = attrs.field(repr=False)
    api_key: Secret | None = attrs.field(repr=False)

    @classmethod
    def of(
        cls,
        *,
        headers: Mapping[str, str] | None,
        timeout: httpx.Timeout | float,
        retry: RetryPolicy | None,
        http_client: httpx.AsyncClient | None,
        api_key: Secret | None,
    ) -> Connection:
        """Normalised settings: seconds become an ``httpx.Timeout``, no policy the default."""
        return cls(
            headers=dict(headers or {}),
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            retry=retry or RetryPolicy(),
            client=http_client,
            api_key=api_key,
        )

    def endpoint(
        self,
        provider: str,
        url: str,
        *,
        headers: Mapping[str, str],
        auth_headers: Mapping[str, str],
        streaming: bool = True,
    ) -> Endpoint:
        """The ``Endpoint``: ``headers``, then the user's, then ``auth_headers`` (which win)."""
        return Endpoint(
            provider=provider,
            url=url,
            headers={**headers, **self.headers, **auth_headers},
            timeout=self.timeout,
            retry=self.retry,
            client=self.client,
            secrets=(self.api_key,),
            streaming=streaming,
        )


async def stream_turn(
    endpoint: Endpoint,
    body: Any,
    translator: StreamTranslator,
    cancellation: TurnCancellation | None,
) -> AsyncIterator[ModelEvent]:
    """Send ``body`` and stream the translated events; the response is always closed.

    The request is opened lazily, on the first ``__anext__``. Cancelling the
    consuming task (or an interrupt of ``cancellation``, checked between
    events) closes the HTTP stream.
    """
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    owned = endpoint.client is None
    client = endpoint.client or httpx.AsyncClient(timeout=endpoint.timeout)
    try:
        if cancellation is not None and cancellation.is_cancelled:
            for event in translator.cancel():
                yield event
            return
        response = await _open_handling_retries(client, endpoint, content)
        try:
            read = iter_sse if endpoint.streaming else iter_whole_body
            async for sse in read(response, endpoint.provider):
                if cancellation is not None and cancellation.is_cancelled:
                    closing = translator.cancel()
                    await _close_quietly(response)
                    for event in closing:
                        yield event
                    return
                for event in _redacted(translator.feed, sse, endpoint):
                    yield event
                if translator.done:
                    break
            closing = _redacted(lambda _: translator.finish(), None, endpoint)
            await _close_quietly(response)
            for event in closing:
                yield event
        finally:
            await _close_quietly(response)
    finally:
        if owned:
            await _close_quietly(client)


def _redacted(function: Any, argument: Any, endpoint: Endpoint) -> list[ModelEvent]:
    try:
        events: list[ModelEvent] = function(argument)
    except ProviderError as error:
        raise _scrubbed(error, endpoint) from error.__cause__
    return events


def _scrubbed(error: ProviderError, endpoint: Endpoint) -> ProviderError:
    message = redact(str(error), endpoint.secrets)
    if message == str(error):
        return error
    return ProviderError(
        message, status=error.status, error_type=error.error_type, retryable=error.retryable
    )


async def _close_quietly(resource: httpx.Response | httpx.AsyncClient) -> None:
    with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
        await resource.aclose()


async def _open_handling_retries(
    client: httpx.AsyncClient, endpoint: Endpoint, content: bytes
) -> httpx.Response:
    policy = endpoint.retry
    attempt = 1
    while True:
        try:
            return await _open_once(client, endpoint, content)
        except _Retryable as failure:
            if attempt >= policy.max_attempts:
                raise _scrubbed(failure.final(attempt), endpoint) from failure.cause
            delay = policy.delay(attempt, failure.headers)
            log.warning(
                "provider.retry",
                provider=endpoint.provider,
                attempt=attempt,
                status=failure.status,
                reason=redact(failure.reason, endpoint.secrets),
                delay=round(delay, 3),
            )
            await policy.sleep(delay)
            attempt += 1


class _Retryable(Exception):
    """One failed attempt that may be tried again."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None,
        error_type: str | None,
        headers: dict[str, str] | None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.error_type = error_type
        self.headers = headers
        self.cause = cause

    def final(self, attempts: int) -> ProviderError:
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        return ProviderError(
            f"{self.reason} (gave up after {tries})",
            status=self.status,
            error_type=self.error_type,
            retryable=True,
        )


async def _open_once(
    client: httpx.AsyncClient, endpoint: Endpoint, content: bytes
) -> httpx.Response:
    request = client.build_request(
        "POST", endpoint.url, headers=endpoint.headers, content=content, timeout=endpoint.timeout
    )
    try:
        response = await client.send(request, stream=True)
    except httpx.TimeoutException as error:
        raise _Retryable(
            f"{endpoint.provider}: request timed out before a response ({type(error).__name__})",
            status=None,
            error_type="timeout",
            headers=None,
            cause=error,
        ) from error
    except httpx.TransportError as error:
        raise _Retryable(
            f"{endpoint.provider}: connection failed ({type(error).__name__}: {error})",
            status=None,
            error_type="connection",
            headers=None,
            cause=error,
        ) from error
    if response.is_success:
        return response
    try:
        raw = await _read_limited(response)
    except httpx.TransportError:
        raw = b""
    finally:
        await _close_quietly(response)
    message, error_type = error_details(raw)
    reason = (
        f"{endpoint.provider} request failed with status {response.status_code}"
        f"{f' ({error_type})' if error_type else ''}: {message}"
    )
    if endpoint.retry.is_retryable_status(response.status_code):
        raise _Retryable(
            reason,
            status=response.status_code,
            error_type=error_type,
            headers=dict(response.headers),
        )
    raise _scrubbed(
        ProviderError(reason, status=response.status_code, error_type=error_type), endpoint
    )


async def _read_limited(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= _ERROR_BODY_LIMIT:
            break
    return b"".join(chunks)


def error_details(raw: bytes) -> tuple[str, str | None]:
    """``(message, error_type)`` from a provider's error body (OpenAI, Anthropic, Gemini shapes)."""
    text = raw.decode("utf-8", errors="replace").strip()
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return (text[:500] or "(empty body)"), None
    if isinstance(document, list) and document:
        document = document[0]
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        kind = _error_kind(error)
        return (
            str(message) if message else json.dumps(error)[:500],
            str(kind) if kind is not None else None,
        )
    if isinstance(error, str):
        return error, None
    return text[:500], None


def _error_kind(error: dict[str, Any]) -> str | None:
    for field in ("type", "status", "code"):
        value = error.get(field)
        if isinstance(value, str) and value:
            return value
    return None


def stream_error(
    provider: str, payload: Any, *, status: int | None = None, fallback_type: str | None = None
) -> ProviderError:
    """The ``ProviderError`` for an ``error`` object a provider sent mid-stream."""
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    message: str
    kind: str | None = fallback_type
    if isinstance(error, dict):
        message = str(error.get("message") or json.dumps(error))
        kind = _error_kind(error) or fallback_type
        code = error.get("code")
        if status is None and isinstance(code, int):
            status = code
    else:
        message = str(error)
    return ProviderError(
        f"{provider}: stream error{f' ({kind})' if kind else ''}: {message}",
        status=status,
        error_type=kind,
        retryable=kind in {"overloaded_error", "rate_limit_error", "api_error"},
    )


def require_mapping(value: Any, what: str, provider: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else a ``ProviderError`` naming ``what``."""
    if not isinstance(value, dict):
        raise ProviderError(
            f"{provider}: expected {what} to be a JSON object, got {type(value).__name__}",
            error_type="malformed_stream",
        )
    return value


def compact_json(value: Any) -> str:
    """``value`` as compact JSON (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def texts(values: Sequence[str]) -> str:
    """Non-empty strings joined by newlines."""
    return "\n".join(value for value in values if value)
