"""A running call's question as an AG-UI interrupt, and its answer from ``resume``.

A run resting on a ``CallQuestion`` ends in ``RUN_FINISHED`` with an
interrupt outcome: one interrupt, id the question's id
(``question:CALL_ID:N``), reason ``input_required``, the question's message,
the asking call's id and, as ``responseSchema``, the question's schema (an
accept's content; ``{"type": "null"}`` when it takes none). ``metadata.agentloop``
says the question's kind, the request data and whether the call can go on
from an answer. A resume entry answers it: ``status: "resolved"`` with the
content as ``payload`` (accept), or ``status: "cancelled"`` (cancel; a
``metadata`` of ``{"action": "decline"}`` declines instead). Every entry is
checked (schema included) before the store records the answer; the run
resumes the session and the question, asked again, is answered from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from .._log import get_logger
from ..core._errors import InvalidInputError
from ..loop._session_store import (
    AnswerStore,
    ClaimError,
    SessionStatus,
    SessionStore,
    StoredSession,
)
from ..loop._steps import CallQuestion
from ..loop._stored_answers import PendingQuestion, pending_questions, question_ids
from ..tools._questions import Question, QuestionAnswer, check_answer
from ._problems import RunRefused

_Asked = TypeVar("_Asked")

__all__ = [
    "QUESTION_REASON",
    "QuestionReply",
    "open_questions",
    "pending_of",
    "read_question_answers",
    "record_replies",
    "stored_answer",
]

log = get_logger()

QUESTION_REASON = "input_required"
"""The ``reason`` of a question's interrupt."""

NO_CONTENT_SCHEMA = {"type": "null"}


def open_questions(stored: StoredSession | None) -> tuple[PendingQuestion, ...]:
    """The questions a stored session waits on with no answer recorded (none unless it
    awaits an answer)."""
    if stored is None or stored.status is not SessionStatus.AWAITING_ANSWER:
        return ()
    ids = tuple(q for q in question_ids(stored.checkpoint) if q not in stored.answers)
    return pending_questions(stored.checkpoint, ids)


def pending_of(step: CallQuestion) -> PendingQuestion:
    """``step``'s question as a :class:`PendingQuestion`."""
    question = step.question
    return PendingQuestion(
        question_id=step.id,
        call_id=step.call_id,
        tool_name=step.tool_name,
        kind=question.kind,
        message=question.message,
        schema=question.schema,
        data=question.data,
        resumable=question.resume is not None,
    )


@attrs.frozen(kw_only=True)
class QuestionReply:
    """One checked answer to an open question: what the store records."""

    question_id: str
    answer: QuestionAnswer


def read_question_answers(
    entries: Sequence[Any], questions: Sequence[PendingQuestion]
) -> list[QuestionReply]:
    """The ``resume`` entries that answer ``questions``, each checked; ``RunRefused`` names
    the first bad one (nothing recorded)."""
    return read_replies(entries, {pending.question_id: pending for pending in questions}, _answer)


def read_replies(
    entries: Sequence[Any],
    asked: Mapping[str, _Asked],
    check: Callable[[str, Any, _Asked], QuestionAnswer],
) -> list[QuestionReply]:
    """The ``resume`` entries whose interrupt id is a key of ``asked``, each checked by
    ``check(where, entry, asked[id])``; ``RunRefused`` names the first bad one or an
    interrupt answered twice (nothing recorded)."""
    replies: list[QuestionReply] = []
    for position, entry in enumerate(entries):
        if entry.interrupt_id not in asked:
            continue
        where = f"resume[{position}]"
        if any(reply.question_id == entry.interrupt_id for reply in replies):
            raise RunRefused(
                f"{where} answers interrupt {entry.interrupt_id!r} a second time; send one "
                "entry per interrupt. Nothing was recorded",
                code="duplicate_interrupt",
            )
        answer = check(where, entry, asked[entry.interrupt_id])
        replies.append(QuestionReply(question_id=entry.interrupt_id, answer=answer))
    return replies


def _answer(where: str, entry: Any, pending: PendingQuestion) -> QuestionAnswer:
    if entry.status == "cancelled":
        if entry.payload is not None:
            raise _bad(where, pending, "a cancelled entry carries no payload")
        metadata = entry.metadata if isinstance(entry.metadata, dict) else {}
        declined = metadata.get("action") == "decline"
        return QuestionAnswer.decline() if declined else QuestionAnswer.cancel()
    if not pending.resumable:
        raise _bad(
            where,
            pending,
            f"call {pending.call_id} ({pending.tool_name}) cannot go on from an answer sent "
            "now (its question has no resume data: the run that asked it is over); cancel "
            "the interrupt instead (the call is then answered as in doubt)",
        )
    schema = dict(pending.schema) if pending.schema is not None else None
    answer = QuestionAnswer.accept(entry.payload)
    try:
        check_answer(Question(pending.kind, pending.message, schema), answer, "payload")
    except InvalidInputError as error:
        raise _bad(where, pending, str(error).removeprefix("payload: ")) from None
    return answer


def _bad(where: str, pending: PendingQuestion, problem: str) -> RunRefused:
    return RunRefused(
        f"{where}: interrupt {pending.question_id!r}: {problem}; nothing was recorded",
        code="bad_resume",
    )


async def record_replies(
    store: SessionStore, session_id: str, replies: Sequence[QuestionReply], *, label: str
) -> None:
    """Record each checked answer with the store's ``record_answer`` (which checks it
    once more); ``RunRefused`` names the refused one as ``label`` (``interrupt``...)."""
    if replies and not isinstance(store, AnswerStore):
        raise RunRefused(
            "this store keeps no answers to questions; nothing was recorded",
            code="question_unsupported",
        )
    for reply in replies:
        answer = reply.answer
        try:
            await store.record_answer(  # type: ignore[attr-defined]
                session_id, reply.question_id, action=answer.action.value, content=answer.content
            )
        except (ClaimError, InvalidInputError) as refused:
            raise RunRefused(
                f"{label} {reply.question_id!r}: {refused}", code="decision_refused"
            ) from None
        log.info("question answered", session_id=session_id, question_id=reply.question_id,
                 action=answer.action.value)  # fmt: skip


async def stored_answer(
    store: SessionStore, session_id: str, question_id: str
) -> QuestionAnswer | None:
    """The answer the store holds for ``question_id`` (recorded before the session was
    resumed), or ``None``."""
    stored = await store.load(session_id)
    recorded = stored.answers.get(question_id) if stored is not None else None
    if recorded is None:
        return None
    return QuestionAnswer(recorded.action, recorded.content)
