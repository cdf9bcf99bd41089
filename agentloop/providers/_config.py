"""Provider configuration helpers: API keys from the environment, redaction, timeouts.

This is the one module of the library (with ``cli/``) that reads environment
variables. An API key lives in a :class:`Secret`, whose ``repr`` and ``str``
never show it; :func:`redact` scrubs it from any text that leaves an adapter
(error messages, log fields).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import httpx

from ..core._errors import ProviderError

__all__ = [
    "DEFAULT_TIMEOUT",
    "Secret",
    "redact",
    "resolve_api_key",
]

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0)
"""Default request timeout: 10 s to connect, 300 s of silence between streamed bytes."""

_REDACTED = "[REDACTED]"


class Secret:
    """A secret string (an API key) that never shows itself in a ``repr`` or ``str``.

    Read the value with :meth:`reveal`, only where it goes into a request header.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("Secret: the value must be a non-empty string")
        self._value = value

    def reveal(self) -> str:
        """The secret itself; put it in a header, never in a message or a log."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({_REDACTED!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


def resolve_api_key(
    given: str | Secret | None,
    env_names: Iterable[str],
    *,
    owner: str,
    required: bool,
    environ: Mapping[str, str] | None = None,
) -> Secret | None:
    """The API key: ``given`` if set, else the first non-empty environment variable.

    Raises :class:`ProviderError` when ``required`` and no key is found; the
    message names the variables to set (never a value).
    """
    if isinstance(given, Secret):
        return given
    if given:
        return Secret(given)
    env = os.environ if environ is None else environ
    names = tuple(env_names)
    for name in names:
        value = env.get(name)
        if value:
            return Secret(value)
    if required:
        shown = " or ".join(names)
        raise ProviderError(f"{owner}: no API key: pass api_key=... or set {shown}")
    return None


def redact(text: str, secrets: Iterable[Secret | None]) -> str:
    """``text`` with every occurrence of each secret replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret is not None:
            text = text.replace(secret.reveal(), _REDACTED)
    return text
