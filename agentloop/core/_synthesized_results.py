"""Results agentloop writes itself: the one function that makes them.

Every tool call gets exactly one result. When no tool produced it (unknown
tool, invalid input, denied, skipped, cancelled, timed out, in doubt, a
background placeholder, ...), :func:`synthesized_result` writes it, marked
with a typed :class:`~agentloop.core._items.ResultOutcome` under
:data:`~agentloop.core._items.OUTCOME_KEY`. The executor (``tools/``), the task
managers (``tasks/``) and the driver (``loop/``) all call it.
"""

from __future__ import annotations

from ._items import OUTCOME_KEY, ResultOutcome, ToolResultPart

__all__ = ["RAW_ARGUMENTS_KEY", "synthesized_result"]

RAW_ARGUMENTS_KEY = "agentloop.raw_arguments"
"""ToolCallPart metadata key: the raw argument text of a call whose JSON did not parse."""


def synthesized_result(
    call_id: str, text: str, outcome: ResultOutcome, *, is_error: bool = True
) -> ToolResultPart:
    """A result written by agentloop itself, marked with its typed ``outcome``."""
    return ToolResultPart(call_id, text, is_error, metadata={OUTCOME_KEY: outcome.value})
