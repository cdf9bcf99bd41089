"""Provider configuration helpers: API keys, redaction, URLs, timeouts and deadlines.

This is the one module of the library (with ``cli/``) that reads environment
variables. An API key lives in a :class:`Secret`, validated when it is made
and never shown by its ``repr`` or ``str``; :func:`redact` scrubs it, in every
form it can take in text, from whatever leaves an adapter (error messages,
chained exceptions, log fields, and the records of httpx's and httpcore's own
loggers).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import urllib.parse
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import httpx

from .._log import get_logger
from ..core._errors import InvalidInputError, ProviderError, ProviderErrorKind

__all__ = [
    "CUT_MARKER",
    "DEFAULT_DEADLINE",
    "DEFAULT_TIMEOUT",
    "CallDeadline",
    "Secret",
    "check_base_url",
    "is_own_host",
    "redact",
    "resolve_api_key",
    "shorten",
]

log = get_logger()

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0)
"""Default request timeout: 10 s to connect, 300 s of silence between streamed bytes."""

REDACTED = "[REDACTED]"
CUT_MARKER = "...[truncated]"
"""What every text the adapters shorten ends with (so a key cut in half is still found)."""

_MIN_CUT_PREFIX = 4
MIN_REDACTED_LENGTH = 4
"""Keys shorter than this (``"x"``, ``"k"``: placeholders for local servers) are not scrubbed
from text: they protect nothing, and scrubbing one letter everywhere would garble messages."""
_HTTP_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "hpack.hpack",  # HTTP/2 (a user's http2=True client) logs encoded headers at DEBUG
    "hpack.table",
)
_CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}
)


def _check_seconds(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidInputError(
            f"CallDeadline.{attribute.name} must be a positive number of seconds or None "
            f"(no limit), got {value!r}"
        )


@attrs.frozen(kw_only=True)
class CallDeadline:
    """The overall time limits of one model call, on top of the HTTP timeout.

    ``first_event``: seconds from sending the request (retries included) to the
    first server-sent event. Keep-alive comments (``: ping``) do not count, so
    a server that trickles them cannot hold a turn. ``total``: seconds from
    sending the request to the end of the response. ``None`` turns a limit off.
    A call past either limit ends with a ``ProviderError`` of kind
    ``RETRYABLE`` and ``error_type="deadline"``.
    """

    first_event: float | None = attrs.field(default=600.0, validator=_check_seconds)
    total: float | None = attrs.field(default=1800.0, validator=_check_seconds)


DEFAULT_DEADLINE = CallDeadline()
"""Default deadline: 600 s to the first event, 1800 s for the whole call."""

# keyed by id: a WeakSet would hold only one of several equal secrets, and lose it with that one
_live_secrets: weakref.WeakValueDictionary[int, Secret] = weakref.WeakValueDictionary()


class Secret:
    """A secret string (an API key) that never shows itself in a ``repr`` or ``str``.

    The value is checked when the secret is made: surrounding whitespace is
    stripped (with a logged warning that does not show the key); an empty
    value, or one with control characters or non-ASCII characters, is refused
    with :class:`~agentloop.InvalidInputError`. Read the value with
    :meth:`reveal`, only where it goes into a request header.
    """

    __slots__ = ("__weakref__", "_forms", "_value")

    def __init__(self, value: str) -> None:
        self._value = _checked_key(value)
        self._forms = _forms(self._value)
        _live_secrets[id(self)] = self
        _install_log_filter()

    def reveal(self) -> str:
        """The secret itself; put it in a header, never in a message or a log."""
        return self._value

    def forms(self) -> tuple[str, ...]:
        """Every spelling of the secret that text may hold (raw, escaped, URL-encoded)."""
        return self._forms

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


def _checked_key(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"API key: expected a string, got {type(value).__name__}")
    stripped = value.strip()
    if not stripped:
        raise InvalidInputError("API key: the value is empty (or only whitespace)")
    if stripped != value:
        log.warning(
            "provider.api_key_stripped",
            leading=len(value) - len(value.lstrip()),
            trailing=len(value) - len(value.rstrip()),
            hint="the API key had surrounding whitespace (often a copied newline); it was removed",
        )
    for position, character in enumerate(stripped):
        code = ord(character)
        if code < 0x20 or code == 0x7F:
            raise InvalidInputError(
                f"API key: contains a control character (U+{code:04X}) at position {position}; "
                "API keys are printable ASCII: check how the key was copied"
            )
        if code > 0x7E:
            raise InvalidInputError(
                f"API key: contains a non-ASCII character (U+{code:04X}) at position {position}; "
                "API keys are printable ASCII: check how the key was copied"
            )
    return stripped


def _escapes(text: str) -> set[str]:
    json_escaped = json.dumps(text)[1:-1]
    percent = urllib.parse.quote(text, safe="")
    return {
        text,
        json_escaped,
        json_escaped.replace("/", "\\/"),
        urllib.parse.quote(text),
        percent,
        re.sub(r"%[0-9A-F]{2}", lambda match: match.group(0).lower(), percent),
        urllib.parse.quote_plus(text),
        repr(text)[1:-1],
        text.replace("\\", "\\\\").replace("'", "\\'"),
        text.replace("\\", "\\\\").replace('"', '\\"'),
    }


def _forms(value: str) -> tuple[str, ...]:
    forms: set[str] = set()
    for first in _escapes(value):
        forms |= _escapes(first)
    return tuple(sorted(forms, key=len, reverse=True))


def redact(text: str, secrets: Iterable[Secret | None]) -> str:
    """``text`` with every form of each secret replaced by ``[REDACTED]``.

    Forms are the raw key, JSON- and repr-escaped, URL-encoded, and those
    escaped once more. A key cut in half by a truncation (the start of a
    form, 4 characters or more, at the end of ``text`` or just before
    :data:`CUT_MARKER`) is redacted too. Keys shorter than
    :data:`MIN_REDACTED_LENGTH` are left alone.
    """
    chosen = [
        secret
        for secret in secrets
        if secret is not None and len(secret.reveal()) >= MIN_REDACTED_LENGTH
    ]
    for secret in chosen:
        for form in secret.forms():
            if form in text:
                text = text.replace(form, REDACTED)
    return _redact_cuts(text, [form for secret in chosen for form in secret.forms()])


def _redact_cuts(text: str, forms: list[str]) -> str:
    """Redact the starts of ``forms`` cut off at the end of ``text`` or before a
    :data:`CUT_MARKER`, longest first across every form (a shorter start of one
    form can sit inside a longer start of another, e.g. a key inside its escaped form)."""
    has_marker = CUT_MARKER in text
    prefixes = sorted(
        {form[:length] for form in forms for length in range(_MIN_CUT_PREFIX, len(form))},
        key=len,
        reverse=True,
    )
    for prefix in prefixes:
        if has_marker and prefix + CUT_MARKER in text:
            text = text.replace(prefix + CUT_MARKER, REDACTED + CUT_MARKER)
        if text.endswith(prefix):
            text = text[: len(text) - len(prefix)] + REDACTED
    return text


def redact_live(text: str) -> str:
    """``text`` redacted of every secret currently alive in the process."""
    return redact(text, {secret.reveal(): secret for secret in _live_secrets.values()}.values())


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with :data:`CUT_MARKER` if it was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + CUT_MARKER


class _RedactingFilter(logging.Filter):
    """Scrubs live secrets from the records of httpx's and httpcore's loggers."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _live_secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging system's problem, not ours
            return True
        cleaned = redact_live(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


_FILTER = _RedactingFilter("agentloop.redaction")


def _install_log_filter() -> None:
    for name in _HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def header_secrets(headers: Mapping[str, str]) -> tuple[Secret, ...]:
    """Secrets for the credentials in user-given ``headers`` (``Authorization`` and the like).

    The token after an auth scheme (``Bearer sk-...``) is the secret; values
    that could not be sent anyway (non-ASCII) are skipped.
    """
    found: list[Secret] = []
    for name, value in headers.items():
        if name.lower() not in _CREDENTIAL_HEADERS or not isinstance(value, str):
            continue
        scheme, _, token = value.strip().partition(" ")
        bare = (token or scheme).strip()
        for candidate in dict.fromkeys((bare, value.strip())):  # the bare token first
            if len(candidate) < MIN_REDACTED_LENGTH:
                continue
            try:
                found.append(Secret(candidate))
            except InvalidInputError:
                continue
    return tuple(found)


def resolve_api_key(
    given: str | Secret | None,
    env_names: Iterable[str],
    *,
    owner: str,
    required: bool,
    use_env: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Secret | None:
    """The API key: ``given`` if set, else (when ``use_env``) the first non-empty variable.

    Raises :class:`ProviderError` (kind ``AUTH``) when ``required`` and no key
    is found; the message names the variables to set (never a value). A key
    that fails :class:`Secret`'s checks raises ``InvalidInputError`` naming
    where it came from.
    """
    if isinstance(given, Secret):
        return given
    if given is not None:
        return Secret(given)
    names = tuple(env_names)
    if use_env:
        env = os.environ if environ is None else environ
        for name in names:
            value = env.get(name)
            if value:
                try:
                    return Secret(value)
                except InvalidInputError as error:
                    raise InvalidInputError(f"{owner}: ${name}: {error}") from None
    if required:
        shown = " or ".join(names)
        raise ProviderError(
            f"{owner}: no API key: pass api_key=... or set {shown}", kind=ProviderErrorKind.AUTH
        )
    return None


def check_base_url(url: object, owner: str) -> str:
    """``url`` without trailing slashes, if it is an absolute http(s) URL with a host.

    Anything else (no scheme, another scheme, a query or fragment, spaces) is an
    ``InvalidInputError`` saying what to write instead.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError(f"{owner}: base_url must be a non-empty string, got {url!r}")
    hint = "write it as 'http://HOST:PORT/PATH' or 'https://HOST/PATH'"
    if url != url.strip() or any(character.isspace() for character in url):
        raise InvalidInputError(f"{owner}: base_url {url!r} contains whitespace; {hint}")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as error:
        raise InvalidInputError(
            f"{owner}: base_url {url!r} is not a URL ({error}); {hint}"
        ) from None
    if parsed.scheme not in ("http", "https"):
        suggestion = f" (did you mean 'http://{url}'?)" if "://" not in url else ""
        raise InvalidInputError(
            f"{owner}: base_url {url!r} must start with http:// or https://{suggestion}; {hint}"
        )
    if not parsed.host:
        raise InvalidInputError(f"{owner}: base_url {url!r} names no host; {hint}")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise InvalidInputError(
            f"{owner}: base_url {url!r} has port {parsed.port}, outside 1-65535; {hint}"
        )
    if parsed.query or parsed.fragment or "?" in url or "#" in url:
        raise InvalidInputError(
            f"{owner}: base_url {url!r} must not have a query or fragment; put options in "
            "headers= or extra_body="
        )
    return url.rstrip("/")


def is_own_host(url: str, default_url: str) -> bool:
    """Whether ``url`` is on the provider's own host (same scheme and host as ``default_url``)."""
    parsed, own = httpx.URL(url), httpx.URL(default_url)
    return parsed.scheme == own.scheme and parsed.host == own.host and parsed.port == own.port
