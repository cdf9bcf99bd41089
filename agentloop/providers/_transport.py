"""The HTTP seam shared by every adapter: open with retries, stream, always close.

Layers, each named for its concern (as in httpx):
``stream_turn`` (cancellation and the translator) ->
``_open_handling_retries`` (backoff, ``Retry-After``) ->
``_open_once`` (one request; foreign errors translated once, here).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

import anyio
import attrs
import httpx

from .._log import get_logger
from ..core._cancellation import TurnCancellation
from ..core._errors import ProviderError, ProviderErrorKind
from ..core._items import Item
from ..model._protocol import ModelEvent, ModelTurnResult
from ._classify import classify, parse_error_body, stream_error
from ._config import (
    CUT_MARKER,
    DEFAULT_DEADLINE,
    CallDeadline,
    Secret,
    header_secrets,
    redact,
    shorten,
)
from ._retry import RetryPolicy
from ._scrub import scrub_chain
from ._sse import ServerSentEvent, iter_sse, iter_whole_body
from ._wire import require_mapping

__all__ = [
    "MODEL_KEY",
    "PROVIDER_FINISH_KEY",
    "PROVIDER_KEY",
    "RESPONSE_ID_KEY",
    "RESPONSE_MODEL_KEY",
    "Connection",
    "Endpoint",
    "StreamTranslator",
    "compact_json",
    "require_mapping",
    "stream_error",
    "stream_turn",
    "texts",
]

log = get_logger()

PROVIDER_FINISH_KEY = "agentloop.provider_finish_reason"
"""Result metadata: the finish reason exactly as the provider sent it."""
PROVIDER_KEY = "agentloop.provider"
"""Assistant item metadata: the adapter's ``provider_name`` (``"openai"``, ``"anthropic"``...)."""
MODEL_KEY = "agentloop.model"
"""Assistant item metadata: the model name the request asked for."""
RESPONSE_MODEL_KEY = "agentloop.response_model"
"""Assistant item metadata: the model name the response reported (when it did)."""
RESPONSE_ID_KEY = "agentloop.response_id"
"""Assistant item metadata: the provider's id of the response (when it gave one)."""

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
    deadline: CallDeadline = DEFAULT_DEADLINE
    provider_name: str = ""
    model: str = ""


@attrs.frozen
class Connection:
    """How an adapter reaches its provider: the user's extra headers, timeout, retries,
    client and API key (the constructor arguments every adapter shares).

    Credentials in the user's ``headers`` (``Authorization``, ``x-api-key``...) are
    redacted like the API key."""

    headers: dict[str, str] = attrs.field(repr=False)
    timeout: httpx.Timeout
    retry: RetryPolicy
    client: httpx.AsyncClient | None = attrs.field(repr=False)
    api_key: Secret | None = attrs.field(repr=False)
    deadline: CallDeadline = DEFAULT_DEADLINE
    header_secrets: tuple[Secret, ...] = attrs.field(default=(), repr=False)

    @classmethod
    def of(
        cls,
        *,
        headers: Mapping[str, str] | None,
        timeout: httpx.Timeout | float,
        retry: RetryPolicy | None,
        http_client: httpx.AsyncClient | None,
        api_key: Secret | None,
        deadline: CallDeadline | None = None,
    ) -> Connection:
        """Normalised settings: seconds become an ``httpx.Timeout``, no policy the default."""
        return cls(
            headers=dict(headers or {}),
            header_secrets=header_secrets(headers or {}),
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            retry=retry or RetryPolicy(),
            client=http_client,
            api_key=api_key,
            deadline=deadline or DEFAULT_DEADLINE,
        )

    def endpoint(
        self,
        provider: str,
        url: str,
        *,
        headers: Mapping[str, str],
        auth_headers: Mapping[str, str],
        streaming: bool = True,
        provider_name: str = "",
        model: str = "",
    ) -> Endpoint:
        """The ``Endpoint``: ``headers``, then the user's, then ``auth_headers`` (which win)."""
        return Endpoint(
            provider=provider,
            url=url,
            headers={**headers, **self.headers, **auth_headers},
            timeout=self.timeout,
            retry=self.retry,
            client=self.client,
            secrets=(self.api_key, *self.header_secrets),
            streaming=streaming,
            deadline=self.deadline,
            provider_name=provider_name,
            model=model,
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
    events) closes the HTTP stream. The call is bounded by
    ``endpoint.deadline``. Every ``ProviderError`` that leaves is scrubbed of
    the API key, chained exceptions included; the closing result's assistant
    items are stamped with the provider, the request and response models and
    the response id.
    """
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise ProviderError(
            f"{endpoint.provider}: cannot send the request: its body is not JSON "
            f"({type(error).__name__}: {shorten(str(error), 200)}); a transcript value (a tool "
            "input or result, metadata) is NaN, infinite or not JSON-serializable",
            error_type="invalid_request",
            kind=ProviderErrorKind.INVALID_REQUEST,
        ) from error
    content = text.encode("utf-8")
    owned = endpoint.client is None
    client = endpoint.client or httpx.AsyncClient(timeout=endpoint.timeout)
    try:
        events = _stream(client, endpoint, content, translator, cancellation)
        async with aclosing(events):
            try:
                async for event in events:
                    yield _stamped(event, endpoint)
            except ProviderError as error:
                scrub_chain(error, endpoint.secrets)
                raise
    finally:
        if owned:
            await _close_quietly(client)


async def _stream(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    content: bytes,
    translator: StreamTranslator,
    cancellation: TurnCancellation | None,
) -> AsyncGenerator[ModelEvent, None]:
    if cancellation is not None and cancellation.is_cancelled:
        for event in translator.cancel():
            yield event
        return
    clock = _Clock(endpoint)
    with anyio.move_on_after(clock.remaining(first=True)) as scope:
        response = await _open_handling_retries(client, endpoint, content)
    if scope.cancelled_caught:
        raise clock.expired(first=True)
    try:
        read = iter_sse if endpoint.streaming else iter_whole_body
        reader = read(response, endpoint.provider)
        async with aclosing(reader):
            first = True
            while True:
                with anyio.move_on_after(clock.remaining(first=first)) as scope:
                    sse = await anext(reader, None)
                if scope.cancelled_caught:
                    raise clock.expired(first=first)
                if sse is None:
                    break
                first = False
                if cancellation is not None and cancellation.is_cancelled:
                    closing = translator.cancel()
                    await _close_quietly(response)
                    for event in closing:
                        yield event
                    return
                for event in _translated(translator.feed, sse, endpoint):
                    yield event
                if translator.done:
                    break
        closing = _translated(lambda _: translator.finish(), None, endpoint)
        await _close_quietly(response)
        for event in closing:
            yield event
    finally:
        await _close_quietly(response)


class _Clock:
    """The deadlines of one call, measured from when it started."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.provider = endpoint.provider
        self.deadline = endpoint.deadline
        self.start = anyio.current_time()

    def remaining(self, *, first: bool) -> float | None:
        limits = [self.deadline.total]
        if first:
            limits.append(self.deadline.first_event)
        chosen = [limit for limit in limits if limit is not None]
        if not chosen:
            return None
        return max(min(chosen) - (anyio.current_time() - self.start), 0.0)

    def expired(self, *, first: bool) -> ProviderError:
        first_limit, total = self.deadline.first_event, self.deadline.total
        if first and first_limit is not None and (total is None or first_limit <= total):
            message = (
                f"{self.provider}: no response event within {first_limit:g} s of sending the "
                "request (the server sent nothing, or only keep-alive comments); raise "
                "CallDeadline(first_event=...) if the model needs longer to start"
            )
        else:
            message = (
                f"{self.provider}: the model call ran past its total deadline of {total:g} s; "
                "raise CallDeadline(total=...) if answers this long are expected"
            )
        return ProviderError(message, error_type="deadline", kind=ProviderErrorKind.RETRYABLE)


_FOREIGN_DECODE_ERRORS = (
    TypeError,
    AttributeError,
    ValueError,
    KeyError,
    IndexError,
    RecursionError,
    UnicodeError,
)


def _translated(
    function: Callable[[Any], list[ModelEvent]], sse: ServerSentEvent | None, endpoint: Endpoint
) -> list[ModelEvent]:
    try:
        return function(sse)
    except ProviderError:
        raise
    except _FOREIGN_DECODE_ERRORS as error:
        where = "the end of the response" if sse is None else _describe(sse)
        raise ProviderError(
            f"{endpoint.provider}: malformed response: cannot read {where} "
            f"({type(error).__name__}: {shorten(str(error), 200)})",
            error_type="malformed_stream",
            kind=ProviderErrorKind.INVALID_RESPONSE,
        ) from error


def _describe(sse: ServerSentEvent) -> str:
    name = f" {sse.event!r}" if sse.event and sse.event != "message" else ""
    return f"stream event{name} {shorten(sse.data, 200)!r}"


def _stamped(event: ModelEvent, endpoint: Endpoint) -> ModelEvent:
    if not isinstance(event, ModelTurnResult) or not endpoint.provider_name:
        return event
    stamp: dict[str, str] = {PROVIDER_KEY: endpoint.provider_name}
    if endpoint.model:
        stamp[MODEL_KEY] = endpoint.model
    if isinstance(event.model, str) and event.model:
        stamp[RESPONSE_MODEL_KEY] = event.model
    if isinstance(event.response_id, str) and event.response_id:
        stamp[RESPONSE_ID_KEY] = event.response_id
    items = tuple(_stamp_item(item, stamp) for item in event.output_items)
    return attrs.evolve(event, output_items=items)


def _stamp_item(item: Item, stamp: Mapping[str, str]) -> Item:
    return attrs.evolve(item, metadata={**item.metadata, **stamp})


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
                raise failure.final(attempt) from failure.cause
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
            kind=ProviderErrorKind.RETRYABLE,
        )


async def _open_once(
    client: httpx.AsyncClient, endpoint: Endpoint, content: bytes
) -> httpx.Response:
    try:
        request = client.build_request(
            "POST",
            endpoint.url,
            headers=endpoint.headers,
            content=content,
            timeout=endpoint.timeout,
        )
    except (UnicodeEncodeError, ValueError, TypeError) as error:
        raise ProviderError(
            f"{endpoint.provider}: cannot build the request ({type(error).__name__}: {error}); "
            "header values must be ASCII text without line breaks",
            error_type="invalid_request",
            kind=ProviderErrorKind.INVALID_REQUEST,
        ) from error
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
        text = await _read_error_body(response)
    finally:
        await _close_quietly(response)
    unredacted = parse_error_body(text)  # classified as sent; only the redacted text leaves
    body = parse_error_body(redact(text, endpoint.secrets))
    status = response.status_code
    kind = classify(status, unredacted.codes, unredacted.message)
    reason = (
        f"{endpoint.provider} request failed with status {status}"
        f"{f' ({body.error_type})' if body.error_type else ''}: {body.message}"
    )
    if kind is ProviderErrorKind.RETRYABLE and endpoint.retry.is_retryable_status(status):
        raise _Retryable(
            reason, status=status, error_type=body.error_type, headers=dict(response.headers)
        )
    raise ProviderError(reason, status=status, error_type=body.error_type, kind=kind)


async def _read_error_body(response: httpx.Response) -> str:
    """Up to 64 KiB of an error body as text; a cut ends with ``CUT_MARKER``."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= _ERROR_BODY_LIMIT:
                break
    except httpx.DecodingError:
        return "(the error body could not be decoded: corrupt Content-Encoding)"
    except httpx.TransportError:
        pass
    raw = b"".join(chunks)
    text = raw[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
    return text + CUT_MARKER if size >= _ERROR_BODY_LIMIT else text


def compact_json(value: Any) -> str:
    """``value`` as compact JSON (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def texts(values: Sequence[str]) -> str:
    """Non-empty strings joined by newlines."""
    return "\n".join(value for value in values if value)
