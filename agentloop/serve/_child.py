"""A child agent's approval waiting in a stored session, shown and answered like an approval.

A call that runs a child agent (``Agent.as_tool``) carries the child's
approval up as its own question (kind ``agent.approval``); the parent's
session rests ``awaiting_answer`` on it. The inbox, AG-UI and the A2A server
show it as an approval (:class:`ChildApproval`: the child's tool, input and
``path``) and answer it approve, approve with edited arguments (checked
against the child's tool's input schema, as a top-level edit is) or deny
(:func:`child_answer`); the answer is recorded with the store's
``record_answer`` on the parent's question, so it is single use and a
restart resumes the child with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from ..loop._converter import structure
from ..loop._nested import CHILD_APPROVAL, path_entry
from ..loop._steps import ApprovalAnswer, ApprovalRequest, ChildApprovalRequest, Step
from ..loop._stored_answers import PendingQuestion
from ..tools._questions import QuestionAnswer
from ._decide import MAX_REASON, validate_input

__all__ = [
    "CHILD_ACTIONS",
    "ChildApproval",
    "child_answer",
    "child_approval",
    "child_tool_schema",
    "inbox_answer",
    "shown_child",
    "split_questions",
]


@attrs.frozen(kw_only=True)
class ChildApproval:
    """A child agent's call waiting for approval, carried by the parent's question
    ``question_id``. ``path`` names the calls running the child, from the top
    (``"<tool name>:<call id>"`` each); ``schema`` is the child's tool's input
    schema (``None`` when the agent tree does not name it)."""

    question_id: str
    call_id: str
    tool_name: str
    input: Any
    reason: str
    summary: str
    path: tuple[str, ...]
    resumable: bool
    schema: Any = None


def child_tool_schema(agent: Any, path: Sequence[str], tool_name: str) -> Any:
    """The input schema of ``tool_name`` of the agent ``path`` leads to from ``agent``
    (through each call's ``Agent.as_tool`` tool); ``None`` when it leads nowhere."""
    for entry in path:
        name = entry.partition(":")[0]
        tool = _tool(agent, name)
        agent = getattr(tool, "agent", None)
        if agent is None:
            return None
    tool = _tool(agent, tool_name)
    spec = getattr(tool, "spec", None)
    return getattr(spec, "input_schema", None)


def _tool(agent: Any, name: str) -> Any:
    for source in getattr(agent, "tool_sources", ()):
        found = source.get(name)
        if found is not None:
            return found
    return None


def child_approval(pending: PendingQuestion, agent: Any = None) -> ChildApproval | None:
    """``pending`` as a child's approval (``None``: it is another kind of question, or its
    data is not a child's approval); ``agent`` (the top-level one) gives the schema."""
    data = pending.data
    if pending.kind != CHILD_APPROVAL or not isinstance(data, dict):
        return None
    try:
        inner: Step = structure(data.get("step"), Step)
    except Exception:
        return None
    if not isinstance(inner, ApprovalRequest):
        return None
    path = (path_entry(pending.tool_name, pending.call_id), *inner.path)
    return ChildApproval(
        question_id=pending.question_id,
        call_id=inner.call_id,
        tool_name=inner.tool_name,
        input=inner.input,
        reason=inner.reason,
        summary=inner.summary,
        path=path,
        resumable=pending.resumable,
        schema=child_tool_schema(agent, path, inner.tool_name),
    )


def shown_child(step: ChildApprovalRequest, agent: Any = None) -> ChildApproval:
    """The driver's ``step`` as a :class:`ChildApproval` (when the store lists none)."""
    return ChildApproval(
        question_id=step.question_id,
        call_id=step.call_id,
        tool_name=step.tool_name,
        input=step.input,
        reason=step.reason,
        summary=step.summary,
        path=step.path,
        resumable=True,
        schema=child_tool_schema(agent, step.path, step.tool_name),
    )


def split_questions(
    questions: Sequence[PendingQuestion], agent: Any = None
) -> tuple[tuple[ChildApproval, ...], tuple[PendingQuestion, ...]]:
    """``questions`` as (the child approvals among them, the other questions)."""
    children: list[ChildApproval] = []
    others: list[PendingQuestion] = []
    for pending in questions:
        child = child_approval(pending, agent)
        if child is None:
            others.append(pending)
        else:
            children.append(child)
    return tuple(children), tuple(others)


_MISSING: Any = object()


def child_answer(
    child: ChildApproval, *, approved: bool, reason: str | None = None, edited: Any = _MISSING
) -> QuestionAnswer:
    """The answer recorded on ``child``'s question: approve, approve with ``edited``
    arguments, or deny with ``reason``. ``ValueError`` says why an edit is refused, or
    an approval of a child that cannot go on from an answer now (no resume data)."""
    if approved and not child.resumable:
        raise ValueError(
            f"call {child.call_id} ({child.tool_name}) of the child agent cannot go on from "
            "an answer sent now (its approval was asked without the child's checkpoint: "
            "the run that asked it is over); deny it instead (the parent's call is then "
            "answered as in doubt)"
        )
    if edited is not _MISSING:
        if not approved:
            raise ValueError("edited arguments go with an approval only")
        if edited is None:
            raise ValueError("the edited arguments are null; send the tool's arguments")
        problem = validate_input(child.schema, edited)
        if problem is not None:
            raise ValueError(f"the edited arguments do not match the tool's schema: {problem}")
        decision = ApprovalAnswer.approve_with(edited)
    else:
        decision = ApprovalAnswer.approve() if approved else ApprovalAnswer.deny(reason)
    content = {"kind": decision.kind.value, "input": decision.input, "reason": decision.reason}
    return QuestionAnswer.accept(content)


CHILD_ACTIONS = ("approve", "approve_with", "deny")
"""The actions ``POST /api/answer`` takes for a child's approval (``/api/decide``'s)."""


def inbox_answer(child: ChildApproval, body: dict[str, Any]) -> QuestionAnswer:
    """The answer an inbox request ``{action, reason?, input?}`` gives ``child`` (``input``:
    the edited arguments as JSON text, as ``/api/decide`` takes them); ``ValueError`` says
    what is wrong."""
    action, reason, text = body.get("action"), body.get("reason"), body.get("input")
    if action not in CHILD_ACTIONS:
        raise ValueError(
            f"a child agent's approval is answered with action approve, approve_with or "
            f"deny; got {action!r}"
        )
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
        raise ValueError(f"reason must be a string of at most {MAX_REASON} characters")
    if action != "approve_with":
        if text is not None:
            raise ValueError(f"input goes with action approve_with only, not {action}")
        return child_answer(child, approved=action == "approve", reason=reason or None)
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the edited arguments are empty; send input as JSON text")
    try:
        edited = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"the edited arguments are not JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}"
        ) from None
    return child_answer(child, approved=True, edited=edited)
