"""A child agent's approval on an A2A task: listed and answered like a top-level approval.

A task whose session rests on a child agent's approval (``Agent.as_tool``)
waits in ``input-required`` with the approval in the status message's
``approvals`` list (``callId`` the child's call, ``toolName``, ``input``,
``reason``, ``responseSchema``, and ``path``: the calls running the child).
The client answers it as any approval: a data part ``{callId?, approved,
editedArgs?, reason?}`` or the text ``approve`` / ``deny: REASON``; the
answer is checked (edited arguments against the child's tool's schema) and
recorded on the parent's question with the store's ``record_answer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..serve._child import ChildApproval
from ..ui._answers import response_schema
from ..ui._child import checked_answer
from ..ui._problems import RunRefused
from ..ui._questions import QuestionReply
from ._replies import EVERY_CALL, Reply, approval_answers

__all__ = ["child_entry", "child_replies"]


@attrs.frozen(kw_only=True)
class _Entry:
    interrupt_id: str
    status: str
    payload: Any


def child_entry(child: ChildApproval) -> dict[str, Any]:
    """``child`` as the status message's ``approvals`` list shows it."""
    return {
        "callId": child.call_id,
        "toolName": child.tool_name,
        "input": child.input,
        "reason": child.reason or child.summary,
        "path": list(child.path),
        "responseSchema": response_schema(child.schema),
    }


def child_replies(reply: Reply, children: Sequence[ChildApproval]) -> list[QuestionReply]:
    """The checked answers ``reply`` gives the waiting child approvals; ``RunRefused``
    says what is wrong (nothing recorded)."""
    by_call = {child.call_id: child for child in children}
    listed = ", ".join(by_call) or "none"
    replies: list[QuestionReply] = []
    for position, (call_id, payload) in enumerate(approval_answers(reply)):
        where = f"answers[{position}]"
        if call_id is None and len(children) != 1:
            raise RunRefused(
                f"an answer without a callId is ambiguous: {len(children)} calls wait "
                f"({listed}); name the call with callId. Nothing was recorded",
                code="bad_answer",
            )
        named = children if call_id == EVERY_CALL else [by_call.get(call_id or children[0].call_id)]
        for child in named:
            if child is None:
                raise RunRefused(
                    f"{where} answers call {call_id!r}, which does not wait on this task "
                    f"(waiting: {listed}); nothing was recorded",
                    code="unknown_interrupt",
                )
            if any(r.question_id == child.question_id for r in replies):
                raise RunRefused(
                    f"{where} answers call {child.call_id!r} a second time; nothing was recorded",
                    code="duplicate_interrupt",
                )
            entry = _Entry(interrupt_id=child.question_id, status="resolved", payload=payload)
            answer = checked_answer(where, entry, child)
            replies.append(QuestionReply(question_id=child.question_id, answer=answer))
    return replies
