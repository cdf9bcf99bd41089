"""Scrubbing API keys from an exception and everything chained to it."""

from __future__ import annotations

from collections.abc import Sequence

from ._config import Secret, redact

__all__ = ["RedactedException", "scrub_chain"]


class RedactedException(Exception):
    """Stands in a chained exception whose text held an API key (the text is redacted)."""


def scrub_chain(error: BaseException, secrets: Sequence[Secret | None]) -> None:
    """Redact ``secrets`` from ``error``'s message and from every exception chained to it.

    ``error`` itself is edited in place; a chained exception whose text shows
    a secret is replaced in the chain by a :class:`RedactedException` carrying
    its redacted text (and its own chain, scrubbed the same way).
    """
    if not any(secret is not None for secret in secrets):
        return
    error.args = tuple(
        redact(argument, secrets) if isinstance(argument, str) else argument
        for argument in error.args
    )
    _scrub_notes(error, secrets)
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for attribute in ("__cause__", "__context__"):
            linked: BaseException | None = getattr(current, attribute)
            if linked is None:
                continue
            if _shows_secret(linked, secrets):
                substitute = RedactedException(
                    f"{type(linked).__name__}: {redact(_text_of(linked), secrets)}"
                )
                substitute.__cause__ = linked.__cause__
                substitute.__context__ = linked.__context__
                substitute.__suppress_context__ = linked.__suppress_context__
                setattr(current, attribute, substitute)
                linked = substitute
            pending.append(linked)


def _text_of(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return "(unprintable)"


def _shows_secret(error: BaseException, secrets: Sequence[Secret | None]) -> bool:
    try:
        texts_shown = [str(error), repr(error), *map(str, getattr(error, "__notes__", ()))]
    except Exception:
        return True
    return any(redact(text, secrets) != text for text in texts_shown)


def _scrub_notes(error: BaseException, secrets: Sequence[Secret | None]) -> None:
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        error.__notes__ = [redact(str(note), secrets) for note in notes]
