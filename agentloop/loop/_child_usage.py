"""A child agent's usage on the result of the call that ran it (``Agent.as_tool``).

The call's result carries the child's usage as plain JSON under
:data:`CHILD_USAGE_KEY`; the parent's core adds it to its turn's and session's
usage (``RoundRules.finalize``), so the parent's limits count it.
"""

from __future__ import annotations

from typing import Any

from ..core._items import Usage

__all__ = ["CHILD_USAGE_KEY", "usage_fields", "usage_of"]

CHILD_USAGE_KEY = "agent.usage"
"""Tool result metadata: the usage of the child agent the call ran (``Agent.as_tool``), as
``Usage`` fields; the parent counts it in its turn's and session's usage and limits."""

_USAGE_COUNTS = ("input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens",
                 "cache_write_tokens")  # fmt: skip


def usage_fields(usage: Usage) -> dict[str, Any]:
    """``usage`` as the JSON a result's ``CHILD_USAGE_KEY`` holds."""
    fields: dict[str, Any] = {name: getattr(usage, name) for name in _USAGE_COUNTS}
    fields["cost"] = usage.cost
    return fields


def usage_of(fields: Any) -> Usage | None:
    """The ``Usage`` a result's ``CHILD_USAGE_KEY`` holds (``None``: not usage fields)."""
    if not isinstance(fields, dict):
        return None
    counts = [fields.get(name, 0) for name in _USAGE_COUNTS]
    cost = fields.get("cost")
    if not all(type(count) is int and count >= 0 for count in counts) or not (
        cost is None or (isinstance(cost, int | float) and not isinstance(cost, bool))
    ):
        return None
    return Usage(
        counts[0], counts[1], counts[2], counts[3], counts[4], None if cost is None else float(cost)
    )
