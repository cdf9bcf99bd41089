"""A stored session's questions and the answers recorded for them: plain values.

A session resting on a running call's question (``CallQuestion``) is saved
with status ``awaiting_answer``; its document names the question (kind,
message, schema, request data, whether the call can resume from an answer).
An inbox shows it as a :class:`PendingQuestion` and records the human's
answer with ``SessionStore.record_answer`` (a :class:`RecordedAnswer`, final:
a second answer to the question is refused); a worker resuming the session
hands the recorded answer to the question asked again. Like
``_session_store``, this module imports nothing outside ``core``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

__all__ = [
    "ANSWER_ACTIONS",
    "PendingQuestion",
    "RecordedAnswer",
    "pending_questions",
    "question_ids",
]

ANSWER_ACTIONS = ("accept", "decline", "cancel")
"""The actions an answer records (``agentloop.tools.QuestionAction``'s values)."""


@attrs.frozen(kw_only=True)
class RecordedAnswer:
    """The answer recorded for a stored session's question (``record_answer``).

    ``action`` is ``"accept"`` (with ``content``, checked against the
    question's schema when recorded), ``"decline"`` or ``"cancel"``.
    ``newly_recorded`` is ``True`` on the value ``record_answer`` returns; it
    takes no part in equality.
    """

    session_id: str
    question_id: str
    action: str
    content: Any = None
    answered_at: datetime
    newly_recorded: bool = attrs.field(default=False, eq=False)


@attrs.frozen(kw_only=True)
class PendingQuestion:
    """A question a stored session waits on: what an inbox shows.

    ``kind``, ``message``, ``schema`` (the JSON Schema an accepted answer's
    content must match; ``None``: an accept carries no content) and ``data``
    (the request as JSON, an MCP request's parameters say) are the
    ``agentloop.tools.Question``'s. ``resumable`` says whether the call can go
    on from an answer recorded now (the question has ``resume`` data); when
    it cannot, resuming the session answers the call in doubt whatever the
    answer, so only a decline or cancel is recorded for it.
    """

    question_id: str
    call_id: str
    tool_name: str
    kind: str
    message: str
    schema: Mapping[str, Any] | None = None
    data: Any = None
    resumable: bool = False


def _round_calls(document: Mapping[str, Any]) -> list[Any]:
    turn = document.get("turn")
    tool_round = turn.get("round") if isinstance(turn, Mapping) else None
    calls = tool_round.get("calls") if isinstance(tool_round, Mapping) else None
    return calls if isinstance(calls, list) else []


def _asked(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """Each (question id, question step, question) the round's calls wait on."""
    found = []
    for call in _round_calls(document):
        step = call.get("question") if isinstance(call, Mapping) else None
        if not isinstance(step, Mapping):
            continue
        question_id, question = step.get("id"), step.get("question")
        if isinstance(question_id, str) and isinstance(question, Mapping):
            found.append((question_id, step, question))
    return found


def question_ids(document: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids of the questions a document's round waits on. Never raises on odd documents."""
    return tuple(question_id for question_id, _step, _question in _asked(document))


def pending_questions(
    document: Mapping[str, Any], ids: tuple[str, ...]
) -> tuple[PendingQuestion, ...]:
    """The questions ``ids`` of the document's round, in the order of ``ids``; one the
    round does not hold, or that is malformed, is left out. Never raises."""
    found: dict[str, PendingQuestion] = {}
    for question_id, step, question in _asked(document):
        texts = [step.get("call_id"), step.get("tool_name")]
        texts += [question.get("kind"), question.get("message")]
        schema = question.get("schema")
        strings = [value for value in texts if isinstance(value, str)]
        if len(strings) != len(texts) or not (schema is None or isinstance(schema, Mapping)):
            continue
        call_id, tool_name, kind, message = strings
        found[question_id] = PendingQuestion(
            question_id=question_id,
            call_id=call_id,
            tool_name=tool_name,
            kind=kind,
            message=message,
            schema=schema,
            data=question.get("data"),
            resumable=question.get("resume") is not None,
        )
    return tuple(found[question_id] for question_id in ids if question_id in found)
