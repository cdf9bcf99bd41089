"""A child agent's interrupts, carried up through its parent's running call.

A call that runs a child agent (``Agent.as_tool``) asks its driver's host
with ``ToolContext.ask`` whenever the child's driver returns an approval or a
question: :func:`child_question` wraps the child's step in a :class:`Question`
of kind :data:`CHILD_APPROVAL` or :data:`CHILD_QUESTION` (the step as JSON in
``data``, so a checkpoint can hold it). Where that question surfaces,
:func:`host_step` gives the host the child's own step instead, with the
calling call prepended to its ``path``: a :class:`ChildApprovalRequest`
(answered like any approval; the answer travels back as the question's
answer, :func:`decision_of`) or a :class:`CallQuestion` whose ``id`` is the
parent's question (so ``answer()`` answers it here). Grandchildren nest the
same way, one level per call.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..core._errors import InvalidInputError
from ..tools._questions import Question, QuestionAnswer
from ._converter import structure, unstructure
from ._core import LoopCore
from ._rounds import shown_question
from ._state import DriverState
from ._steps import (
    AnswerKind,
    ApprovalAnswer,
    ApprovalRequest,
    CallQuestion,
    ChildApprovalRequest,
    Resolver,
    Step,
)

__all__ = [
    "CHILD_APPROVAL",
    "CHILD_QUESTION",
    "DECISION_SCHEMA",
    "child_question",
    "decision_of",
    "host_step",
    "path_entry",
    "pending_child_approval",
]

CHILD_APPROVAL = "agent.approval"
"""``Question.kind`` of a child agent's approval carried up by the call running it."""
CHILD_QUESTION = "agent.question"
"""``Question.kind`` of a child agent's call's question carried up by the call running it."""

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"enum": [kind.value for kind in AnswerKind]},
        "input": {},
        "reason": {"type": ["string", "null"]},
    },
    "required": ["kind"],
    "additionalProperties": False,
}
"""What the answer to a :data:`CHILD_APPROVAL` question holds: an ``ApprovalAnswer``."""


def path_entry(tool_name: str, call_id: str) -> str:
    """One entry of a step's ``path``: the call ``call_id`` of tool ``tool_name``."""
    return f"{tool_name}:{call_id}"


def child_question(step: ApprovalRequest | CallQuestion, resume: Any = None) -> Question:
    """The question a call running a child agent asks its host for the child's ``step``
    (``resume``: the child's checkpoint, so a restored parent can resume the child)."""
    data = {"step": unstructure(step)}
    if isinstance(step, ApprovalRequest):
        message = f"{step.tool_name}: {step.summary}" if step.summary else step.tool_name
        return Question(CHILD_APPROVAL, message, DECISION_SCHEMA, data, resume)
    inner = step.question
    return Question(CHILD_QUESTION, inner.message, inner.schema, data, resume)


def decision_of(answer: QuestionAnswer) -> ApprovalAnswer:
    """The approval answer a :data:`CHILD_APPROVAL` question's ``answer`` carries (a
    declined or cancelled question denies the call)."""
    if not answer.accepted:
        return ApprovalAnswer.deny(f"the host {answer.action.value}d the approval question")
    content = answer.content
    if not isinstance(content, dict) or "kind" not in content:
        raise InvalidInputError(
            f"a child agent's approval answer must be {{'kind': ..., 'input': ..., "
            f"'reason': ...}}, got {content!r}"
        )
    return ApprovalAnswer(AnswerKind(content["kind"]), content.get("input"), content.get("reason"))


def host_step(question: CallQuestion, resolver: Resolver) -> CallQuestion | ChildApprovalRequest:
    """What the host is shown for ``question``: itself, or the child's step it carries
    (``path`` prepended with the asking call; answered through ``question``)."""
    kind = question.question.kind
    if kind != CHILD_APPROVAL and kind != CHILD_QUESTION:
        return question
    data = question.question.data
    inner: Step | None = structure(data["step"], Step) if isinstance(data, dict) else None
    path = (path_entry(question.tool_name, question.call_id), *getattr(inner, "path", ()))
    if kind == CHILD_APPROVAL and isinstance(inner, ApprovalRequest):
        fields = {
            field.name: getattr(inner, field.name)
            for field in attrs.fields(ApprovalRequest)
            if field.init and field.name not in ("_driver", "path")
        }
        return ChildApprovalRequest(**fields, path=path, question_id=question.id, driver=resolver)
    if kind == CHILD_QUESTION and isinstance(inner, CallQuestion):
        return CallQuestion(
            question.id,
            inner.call_id,
            inner.tool_name,
            inner.turn_id,
            inner.question,
            path,
            driver=resolver,
        )
    return question


def pending_child_approval(
    core: LoopCore, call_id: str, resolver: Resolver
) -> ChildApprovalRequest | None:
    """The child approval for ``call_id`` the driver waits on (``AWAITING_ANSWER``), if any."""
    if core.state is not DriverState.AWAITING_ANSWER or core.turn is None:
        return None
    tool_round = core.turn.round
    question = shown_question(tool_round) if tool_round is not None else None
    if question is None:
        return None
    step = host_step(question, resolver)
    if isinstance(step, ChildApprovalRequest) and step.call_id == call_id:
        return step
    return None
