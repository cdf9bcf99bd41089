"""A child agent's approval as an AG-UI interrupt, answered like a top-level approval.

A run resting on a child agent's approval (``Agent.as_tool``) ends with a
``tool_call`` interrupt, as a top-level approval does: id the parent's
question id (``question:CALL_ID:N``), the child's call id as ``toolCallId``,
the child's tool's schema in ``responseSchema.editedArgs``, and under
``metadata.agentloop`` the tool name, its input, the ``path`` of calls
running the child and ``child: true``. A resume entry answers it exactly as
a top-level approval: ``{approved, editedArgs?, reason?}`` or
``status: "cancelled"`` (a denial); it is checked, then recorded with the
store's ``record_answer`` (single use; a restart resumes the child with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..serve._child import ChildApproval, child_answer
from ..tools._questions import QuestionAnswer
from ._answers import ResumeAnswer, read_payload
from ._problems import RunRefused
from ._questions import QuestionReply, read_replies

__all__ = ["checked_answer", "read_child_answers"]


def read_child_answers(
    entries: Sequence[Any], children: Sequence[ChildApproval]
) -> list[QuestionReply]:
    """The ``resume`` entries that answer ``children``, each checked; ``RunRefused``
    names the first bad one (nothing recorded)."""
    return read_replies(entries, {child.question_id: child for child in children}, checked_answer)


def checked_answer(where: str, entry: ResumeAnswer, child: ChildApproval) -> QuestionAnswer:
    """``entry``'s approval payload checked as a top-level approval's, as the answer to
    ``child``'s question; ``RunRefused`` says what is wrong, as ``where``."""
    checked = read_payload(where, entry, child.schema)
    edit = {"edited": checked.edited} if checked.action == "approve_with" else {}
    try:
        return child_answer(child, approved=checked.action != "deny", reason=checked.reason, **edit)
    except ValueError as error:
        raise RunRefused(
            f"{where}: interrupt {child.question_id!r}: {error}; nothing was recorded",
            code="bad_resume",
        ) from None
