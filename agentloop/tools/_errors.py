"""Results agentloop writes itself, and describing an exception without trusting it."""

from __future__ import annotations

from ..core._items import OUTCOME_KEY, ResultOutcome, ToolResultPart

__all__ = ["describe_error", "synthesized_result"]

_MAX_ERROR_CHARS = 2_000


def synthesized_result(
    call_id: str, text: str, outcome: ResultOutcome, *, is_error: bool = True
) -> ToolResultPart:
    """A result written by agentloop itself, marked with its typed ``outcome``."""
    return ToolResultPart(call_id, text, is_error, metadata={OUTCOME_KEY: outcome.value})


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
