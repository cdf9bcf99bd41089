"""The AG-UI ``Interrupt`` a run ends with for a running call's question and for a child
agent's approval. Kept apart from ``_questions`` and ``_child``, which the A2A server
shares: only this module needs the ``ag_ui`` package (the ``agui`` extra)."""

from __future__ import annotations

from ag_ui.core import Interrupt

from ..loop._stored_answers import PendingQuestion
from ..serve._child import ChildApproval
from ._answers import response_schema
from ._questions import NO_CONTENT_SCHEMA, QUESTION_REASON

__all__ = ["child_interrupt", "question_interrupt"]


def question_interrupt(pending: PendingQuestion) -> Interrupt:
    """The interrupt a run ends with while ``pending`` waits for its answer."""
    schema = dict(pending.schema) if pending.schema is not None else NO_CONTENT_SCHEMA
    return Interrupt(
        id=pending.question_id,
        reason=QUESTION_REASON,
        message=pending.message,
        tool_call_id=pending.call_id,
        response_schema=schema,
        metadata={
            "agentloop": {
                "toolName": pending.tool_name,
                "kind": pending.kind,
                "data": pending.data,
                "resumable": pending.resumable,
            }
        },
    )


def child_interrupt(child: ChildApproval) -> Interrupt:
    """The interrupt a run ends with while ``child`` waits for its approval."""
    return Interrupt(
        id=child.question_id,
        reason="tool_call",
        message=child.reason or child.summary or child.tool_name,
        tool_call_id=child.call_id,
        response_schema=response_schema(child.schema),
        metadata={
            "agentloop": {
                "child": True,
                "toolName": child.tool_name,
                "input": child.input,
                "path": list(child.path),
            }
        },
    )
