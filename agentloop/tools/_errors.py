"""Describing an exception without trusting it (``synthesized_result`` lives in core)."""

from __future__ import annotations

from ..core._synthesized_results import synthesized_result

__all__ = ["ToolInDoubtError", "describe_error", "synthesized_result"]


class ToolInDoubtError(Exception):
    """Raised by a tool (or a wrapper such as a durable-execution step) that cannot
    tell whether its side effect happened: the call is answered ``in_doubt`` with
    this message instead of ``failed``, and the model decides what to do."""


_MAX_ERROR_CHARS = 2_000


def describe_error(error: BaseException) -> str:
    """``"TypeName: message"`` for an exception, even one whose ``__str__`` and
    ``__repr__`` raise or return no string; long messages are cut."""
    name = _type_name(error)
    for render in (str, repr):
        try:
            text = render(error)
        except Exception:  # a broken __str__ must not escape
            continue
        if isinstance(text, str):
            if len(text) > _MAX_ERROR_CHARS:
                text = text[:_MAX_ERROR_CHARS] + f"... [{len(text) - _MAX_ERROR_CHARS} more]"
            return f"{name}: {text}" if text else name
    return f"{name} (its message cannot be shown: str() and repr() fail)"


def _type_name(error: BaseException) -> str:
    try:
        name = type(error).__name__
    except Exception:
        return "exception"
    return name if isinstance(name, str) else "exception"
