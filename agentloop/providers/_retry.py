"""Retrying the opening of a streamed request: backoff, jitter and ``Retry-After``.

Only the *opening* of a request is retried: a connection error, a timeout
before the response headers, or a retryable status (408, 409, 429, 5xx).
Once a 2xx response has started streaming, nothing is retried: the caller
already saw part of the answer.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping

import anyio
import attrs

__all__ = ["MAX_RETRY_HINT", "RETRYABLE_STATUSES", "RetryPolicy", "parse_retry_after"]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Statuses worth another try besides every 5xx."""


def _positive(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(
            f"RetryPolicy.{attribute.name} must be a finite number >= 0, got {value!r}"
        )


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
    computed delay, capped at ``max_retry_after``; a hint that is garbage,
    NaN, infinite, negative or absurd (over a day) is ignored and the
    computed delay used. ``sleep`` is the function
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
        exponent = min(max(retry - 1, 0), 64)
        computed: float = min(self.base_delay * (2.0**exponent), self.max_delay)
        return max(computed * (1.0 - min(self.jitter, 1.0) * random.random()), 0.0)


MAX_RETRY_HINT = 86_400.0
"""Retry hints over a day are treated as garbage (the policy's own delay is used)."""


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date).

    ``None`` when neither header holds a usable value: garbage, NaN,
    infinities, negative numbers and hints over :data:`MAX_RETRY_HINT` are
    ignored. A date in the past means "now" (0).
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = _seconds(lowered.get("retry-after-ms"), scale=1000.0)
    if millis is not None:
        return millis
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value, scale=1.0)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
        remaining = when.timestamp() - time.time()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if not math.isfinite(remaining) or remaining > MAX_RETRY_HINT:
        return None
    return max(remaining, 0.0)


def _seconds(value: str | None, *, scale: float) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip()) / scale
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(number) or number < 0 or number > MAX_RETRY_HINT:
        return None
    return number
