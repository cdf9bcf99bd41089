"""What an A2A client's message on a waiting task answers, and what the task shows.

A task waits in ``input-required`` either for approvals (see
``_executor``) or for the answer to a running call's question. A question is
shown as a data part ``{"questions": [{questionId, callId, toolName, kind,
message, schema, data, resumable}]}``; the client answers on the same task
with a data part per question, ``{questionId?, action, content?}``:
``action`` is ``"accept"`` (``content`` must match the question's
``schema``; none when the schema is ``null``), ``"decline"`` or ``"cancel"``;
``questionId`` may be left out when one question waits. A text ``decline``
or ``cancel`` answers every waiting question so. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..core._errors import InvalidInputError
from ..loop._stored_answers import PendingQuestion
from ..tools._questions import Question, QuestionAnswer, check_answer
from ..ui._problems import RunRefused
from ..ui._questions import QuestionReply

__all__ = [
    "EVERY_CALL",
    "Reply",
    "approval_answers",
    "question_answers",
    "question_entry",
]

EVERY_CALL = "*"
"""The call id of an answer that applies to every waiting call (``approve`` / ``deny``)."""

_APPROVE = ("approve", "approved", "yes")
_DENY = ("deny", "denied", "no")
_ACTIONS = ("accept", "decline", "cancel")


@attrs.frozen(kw_only=True)
class Reply:
    """A client's message on a waiting task: its data parts and its text."""

    data: tuple[Any, ...] = ()
    text: str = ""


def question_entry(pending: PendingQuestion) -> dict[str, Any]:
    """A waiting question as the status message's ``questions`` list shows it."""
    return {
        "questionId": pending.question_id,
        "callId": pending.call_id,
        "toolName": pending.tool_name,
        "kind": pending.kind,
        "message": pending.message,
        "schema": dict(pending.schema) if pending.schema is not None else None,
        "data": pending.data,
        "resumable": pending.resumable,
    }


def approval_answers(reply: Reply) -> list[tuple[str | None, Any]]:
    """The approval answers a message carries: data parts, or an approve / deny text."""
    found: list[tuple[str | None, Any]] = []
    for data in reply.data:
        if isinstance(data, dict) and isinstance(data.get("callId"), str):
            payload = {k: v for k, v in data.items() if k != "callId"}
            found.append((data["callId"], payload))
        else:
            found.append((None, data))
    if found:
        return found
    word, _, reason = reply.text.strip().partition(":")
    if word.strip().lower() in _APPROVE:
        return [(EVERY_CALL, {"approved": True})]
    if word.strip().lower() in _DENY:
        denial: dict[str, Any] = {"approved": False}
        if reason.strip():
            denial["reason"] = reason.strip()
        return [(EVERY_CALL, denial)]
    raise RunRefused(
        "the task waits for approvals: answer with a data part {callId?, approved, "
        "editedArgs?, reason?} per call, or the text 'approve' or 'deny: REASON'. "
        "Nothing was recorded",
        code="bad_answer",
    )


def question_answers(reply: Reply, questions: Sequence[PendingQuestion]) -> list[QuestionReply]:
    """The checked answers ``reply`` gives the waiting ``questions``; ``RunRefused``
    names the first bad one (nothing is recorded then)."""
    word = reply.text.strip().lower()
    if not reply.data and word in ("decline", "cancel"):
        action = QuestionAnswer(word)
        return [QuestionReply(question_id=q.question_id, answer=action) for q in questions]
    if not reply.data:
        raise _refused(
            "the task waits for the answer to a question: send a data part {questionId?, "
            "action: accept|decline|cancel, content?} per question, or the text 'decline' "
            "or 'cancel'"
        )
    by_id = {pending.question_id: pending for pending in questions}
    replies: list[QuestionReply] = []
    for position, data in enumerate(reply.data):
        where = f"answers[{position}]"
        pending = _named(where, data, questions, by_id)
        if any(r.question_id == pending.question_id for r in replies):
            raise _refused(f"{where} answers question {pending.question_id!r} a second time")
        answer = _answer(where, data, pending)
        replies.append(QuestionReply(question_id=pending.question_id, answer=answer))
    return replies


def _named(
    where: str,
    data: Any,
    questions: Sequence[PendingQuestion],
    by_id: dict[str, PendingQuestion],
) -> PendingQuestion:
    listed = ", ".join(q.question_id for q in questions) or "none"
    if not isinstance(data, dict):
        raise _refused(f"{where} must be an object {{questionId?, action, content?}}, got {data!r}")
    question_id = data.get("questionId")
    if question_id is None:
        if len(questions) != 1:
            raise _refused(
                f"{where} names no questionId, but {len(questions)} questions wait "
                f"({listed}); name the question with questionId"
            )
        return questions[0]
    pending = by_id.get(question_id) if isinstance(question_id, str) else None
    if pending is None:
        raise _refused(
            f"{where}: question {question_id!r} does not wait on this task (waiting: {listed})"
        )
    return pending


def _answer(where: str, data: dict[str, Any], pending: PendingQuestion) -> QuestionAnswer:
    unknown = sorted(set(data) - {"questionId", "action", "content"})
    if unknown:
        raise _refused(
            f"{where} has unknown fields {unknown} (expected questionId, action, content)"
        )
    action = data.get("action")
    if action not in _ACTIONS:
        raise _refused(f"{where}.action must be one of accept, decline, cancel; got {action!r}")
    answer = QuestionAnswer(action, data.get("content"))
    if answer.accepted and not pending.resumable:
        raise _refused(
            f"{where}: call {pending.call_id} ({pending.tool_name}) cannot go on from an "
            "answer sent now (its question has no resume data); decline or cancel it "
            "(the call is then answered as in doubt)"
        )
    schema = dict(pending.schema) if pending.schema is not None else None
    try:
        check_answer(Question(pending.kind, pending.message, schema), answer, "content")
    except InvalidInputError as error:
        raise _refused(f"{where}: question {pending.question_id!r}: {error}") from None
    return answer


def _refused(problem: str) -> RunRefused:
    return RunRefused(f"{problem}. Nothing was recorded", code="bad_answer")
