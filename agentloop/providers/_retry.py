"""Retrying the opening of a streamed request: backoff, jitter and ``Retry-After``.

Only the *opening* of a request is retried: a connection error, a timeout
before the response headers, or a retryable status (408, 409, 429, 5xx).
Once a 2xx response has started streaming, nothing is retried: the caller
already saw part of the answer.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping

import anyio
import attrs

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "parse_retry_after"]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Statuses worth another try besides every 5xx."""


def _positive(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"RetryPolicy.{attribute.name} must be >= 0, got {value!r}")


def _at_least_one(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"RetryPolicy.{attribute.name} must be >= 1, got {value!r}")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How often and how patiently to retry opening a request.

    ``max_attempts`` counts the first try (3 means up to two retries). The
    delay before retry ``n`` (1-based) is ``base_delay * 2 ** (n - 1)``, capped
    at ``max_delay``, with up to ``jitter`` of it (a fraction) taken off at
    random. A ``Retry-After`` (or ``retry-after-ms``) header replaces the
    computed delay, capped at ``max_retry_after``. ``sleep`` is the function
    that waits (swap it in tests to record delays instead of sleeping).
    """

    max_attempts: int = attrs.field(default=3, validator=_at_least_one)
    base_delay: float = attrs.field(default=0.5, validator=_positive)
    max_delay: float = attrs.field(default=8.0, validator=_positive)
    jitter: float = attrs.field(default=0.25, validator=_positive)
    max_retry_after: float = attrs.field(default=60.0, validator=_positive)
    sleep: Callable[[float], Awaitable[None]] = attrs.field(default=anyio.sleep, repr=False)

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that tries once."""
        return cls(max_attempts=1)

    def is_retryable_status(self, status: int) -> bool:
        """Whether a response with ``status`` is worth another try."""
        return status in RETRYABLE_STATUSES or 500 <= status <= 599

    def delay(self, retry: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if headers is not None:
            hinted = parse_retry_after(headers)
            if hinted is not None:
                return min(hinted, self.max_retry_after)
        computed: float = min(self.base_delay * (2.0 ** (retry - 1)), self.max_delay)
        return computed * (1.0 - self.jitter * random.random())


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
