"""Answers to stored sessions' questions: the row a store keeps and the rules for one.

``BackendSessionStore.record_answer`` reads the session's head, asks
:func:`check_new_answer` whether the answer may be written (the session
waits on that question, none was recorded, the answer fits the question's
schema; a question whose call cannot resume takes only a decline or
cancel), and commits an :class:`AnswerRow` in the ``answers`` table, keyed
by question id, on the revision it read: of two answers racing, one commit
applies and the other, reading again, finds the question answered.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from ..core._errors import InvalidInputError
from ..loop._session_store import ClaimError, SessionStatus, SessionSummary
from ..loop._stored_answers import (
    ANSWER_ACTIONS,
    PendingQuestion,
    RecordedAnswer,
    pending_questions,
)
from ..tools._questions import Question, QuestionAnswer, check_answer
from ._rules import timestamp

__all__ = ["ANSWERS", "AnswerRow", "check_new_answer", "with_unanswered_questions"]

ANSWERS = "answers"
"""The table of recorded answers, keyed by question id."""


@attrs.frozen(kw_only=True)
class AnswerRow:
    """A recorded answer: its action, its content (JSON) and when it was recorded."""

    action: str
    content: Any = None
    answered_at: float

    def answer(
        self, session_id: str, question_id: str, *, newly_recorded: bool = False
    ) -> RecordedAnswer:
        """The public :class:`RecordedAnswer`."""
        return RecordedAnswer(
            session_id=session_id,
            question_id=question_id,
            action=self.action,
            content=self.content,
            answered_at=timestamp(self.answered_at),
            newly_recorded=newly_recorded,
        )


def _document(head: object) -> dict[str, Any] | None:
    try:
        document = json.loads(head) if isinstance(head, str) else None
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def check_new_answer(
    session_id: str,
    question_id: str,
    status: SessionStatus,
    pending: tuple[str, ...],
    head: object,
    existing: RecordedAnswer | None,
    action: object,
    content: object,
) -> None:
    """Raise unless the answer may be recorded: ``ClaimError`` when the session does not
    wait on the question (``"not_pending"``) or it was answered (``"answered"``),
    ``InvalidInputError`` when the answer does not fit."""
    where = f"record an answer to question {question_id!r} of session {session_id!r}"
    if action not in ANSWER_ACTIONS:
        raise InvalidInputError(
            f"cannot {where}: action must be one of accept, decline, cancel; got {action!r}"
        )
    if existing is not None:
        raise ClaimError(
            f"cannot {where}: it was already answered ({existing.action}, at "
            f"{existing.answered_at.isoformat()}); an answer is final",
            session_id=session_id,
            call_id=question_id,
            reason="answered",
        )
    document = _document(head)
    found = () if document is None else pending_questions(document, (question_id,))
    waiting = list(pending) if status is SessionStatus.AWAITING_ANSWER else []
    if question_id not in waiting or not found:
        raise ClaimError(
            f"cannot {where}: the session does not wait on that question (its status is "
            f"{status.value}, waiting on {waiting}); answer a question listed by "
            "sessions_awaiting_answer()",
            session_id=session_id,
            call_id=question_id,
            reason="not_pending",
        )
    _check_fits(found[0], str(action), content, where)


def _check_fits(pending: PendingQuestion, action: str, content: object, where: str) -> None:
    if action == "accept" and not pending.resumable:
        raise InvalidInputError(
            f"cannot {where}: call {pending.call_id} ({pending.tool_name}) cannot go on from "
            "an answer recorded now (its question has no resume data: the process that asked "
            "it is gone, so resuming the session answers the call in doubt); decline or "
            "cancel it instead"
        )
    try:
        # Encoded too: a lone surrogate (a JSON escape can carry one) is not text to store.
        json.dumps(content, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"cannot {where}: the content is not JSON ({error})") from None
    question = Question(
        pending.kind, pending.message, None if pending.schema is None else dict(pending.schema)
    )
    check_answer(question, QuestionAnswer(action, content), f"cannot {where}")


def with_unanswered_questions(summary: SessionSummary, head: object) -> SessionSummary:
    """``summary`` with its unanswered questions, read from its stored head (JSON text)."""
    document = _document(head)
    if document is None:
        return summary
    return attrs.evolve(
        summary, unanswered_questions=pending_questions(document, summary.unanswered)
    )
