"""The interrupts of a run's open approvals, as AG-UI ``Interrupt``s.

Their answers are checked by ``_answers.read_resume``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ag_ui.core import Interrupt

from ..serve._inbox import InboxRow
from ._answers import interrupt_id, response_schema

__all__ = ["interrupts"]


def interrupts(rows: Sequence[InboxRow]) -> list[Interrupt]:
    """One ``tool_call`` interrupt per call waiting for approval, in the round's order."""
    found = []
    for row in rows:
        reasons = [r.reason or r.summary for r in row.requests]
        found.append(
            Interrupt(
                id=interrupt_id(row.call_id),
                reason="tool_call",
                message="; ".join(dict.fromkeys(reasons)) or f"approve the call of {row.tool_name}",
                tool_call_id=row.call_id,
                response_schema=response_schema(row.schema),
                expires_at=row.deadline.isoformat() if row.deadline is not None else None,
                metadata={
                    "agentloop": {
                        "toolName": row.tool_name,
                        "inputDigest": row.digest,
                        "permissions": [
                            {"kind": r.kind, "summary": r.summary, "reason": r.reason}
                            for r in row.requests
                        ],
                    }
                },
            )
        )
    return found
