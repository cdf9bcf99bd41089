"""A remote task's ``input-required`` as questions to our host, and the answers as parts.

Pure functions, no I/O. A status message whose data part holds
``{"approvals": [{callId, toolName, input, reason, ...}]}`` (what an agentloop
A2A server sends when its session parks on approvals) is asked as one
approval question per call (:data:`APPROVAL_KIND`); one whose data part
holds ``{"questions": [{questionId, kind, message, schema, data, ...}]}``
(a running call of that server asked its host) is asked as the same question,
its kind and schema kept; any other status message is asked as one free-form
question (:data:`INPUT_KIND`). An answer becomes the parts of the message
that continues the task: a data part ``{callId, approved, editedArgs?,
reason?}`` per approval, ``{questionId, action, content?}`` per question
(a decline or cancel included), or the answer's text (and data).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import jsonschema

from ..tools._questions import Question, QuestionAnswer

__all__ = [
    "APPROVAL_ANSWER_SCHEMA",
    "APPROVAL_KIND",
    "INPUT_ANSWER_SCHEMA",
    "INPUT_KIND",
    "MAX_APPROVALS",
    "MAX_DATA",
    "MAX_TEXT",
    "Asked",
    "answer_parts",
    "asked_of",
    "bounded",
    "bounded_json",
    "question_for",
]

APPROVAL_KIND = "a2a.approval"
"""``Question.kind`` of a remote call waiting for approval: accept with
``{"approved": bool, "editedArgs"?: object, "reason"?: str}``."""
INPUT_KIND = "a2a.input"
"""``Question.kind`` of a remote task asking for input: accept with
``{"text": str, "data"?: object}``."""

APPROVAL_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object"},
        "reason": {"type": "string"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""What an accepted approval answer's content must be (the AG-UI interrupt payload)."""

INPUT_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}, "data": {"type": "object"}},
    "required": ["text"],
    "additionalProperties": False,
}
"""What an accepted input answer's content must be: the reply's text (and data)."""

MAX_TEXT = 4_000
"""The most characters of a remote text shown in a question or an error."""
MAX_APPROVALS = 50
"""The most approvals one input-required status may list."""


MAX_DATA = 64_000
"""The most characters of JSON a question's data keeps of the remote's data."""


def bounded_json(value: Any, limit: int = MAX_DATA) -> Any:
    """``value``, or a note saying how large it was when its JSON passes ``limit``."""
    size = len(json.dumps(value, default=repr))
    if size <= limit:
        return value
    return {"omitted": f"{size} characters of JSON (more than {limit} are not kept)"}


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters (saying how much was cut)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


@attrs.frozen
class Asked:
    """One thing an input-required status asks: an approval of a remote call
    (``approval`` set), a remote call's question (``question`` set) or free-form
    input."""

    approval: dict[str, Any] | None = None
    question: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """As kept in a question's resume data."""
        return {"approval": self.approval, "question": self.question}

    @classmethod
    def from_json(cls, data: Any) -> Asked:
        """From :meth:`to_json` (``ValueError`` for anything else)."""
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("approval"), dict | None)
            or not isinstance(data.get("question"), dict | None)
        ):
            raise ValueError(f"not a saved A2A question: {data!r}")
        return cls(data["approval"], data.get("question"))


def asked_of(text: str, data_parts: Sequence[Any]) -> list[Asked]:
    """What an input-required status message asks (its text and its data parts);
    raises ``ValueError`` when it lists more than :data:`MAX_APPROVALS` approvals
    or questions."""
    approvals: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for data in data_parts:
        listed = data.get("approvals") if isinstance(data, dict) else None
        if isinstance(listed, list):
            approvals.extend(a for a in listed if _is_approval(a))
        listed = data.get("questions") if isinstance(data, dict) else None
        if isinstance(listed, list):
            questions.extend(q for q in map(_question, listed) if q is not None)
    for what, found in (("approvals", approvals), ("questions", questions)):
        if len(found) > MAX_APPROVALS:
            raise ValueError(
                f"the remote task asks for {len(found)} {what} at once (at most "
                f"{MAX_APPROVALS} are asked)"
            )
    if approvals:
        return [Asked(_approval(a)) for a in approvals]
    if questions:
        return [Asked(question=q) for q in questions]
    return [Asked()]


def _question(value: Any) -> dict[str, Any] | None:
    """The fields of a remote question entry that are asked and sent back, or ``None``
    when it is not one (no id, kind or message, a schema that is not a JSON Schema or
    whose JSON passes :data:`MAX_DATA`)."""
    if not isinstance(value, dict):
        return None
    question_id, kind, message = value.get("questionId"), value.get("kind"), value.get("message")
    if not (isinstance(question_id, str) and question_id and len(question_id) <= 200):
        return None
    if not (isinstance(kind, str) and kind and isinstance(message, str)):
        return None
    schema = value.get("schema")
    if schema is not None:
        if not isinstance(schema, dict) or bounded_json(schema) is not schema:
            return None
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.exceptions.SchemaError:
            return None
    tool = value.get("toolName")
    return {
        "questionId": question_id,  # exact: the answer names the question with it
        "kind": bounded(kind, 200),
        "message": bounded(message),
        "schema": schema,
        "data": bounded_json(value.get("data")),
        "toolName": bounded(tool, 200) if isinstance(tool, str) else "",
    }


def _is_approval(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("callId"), str) and value["callId"]


def _approval(value: dict[str, Any]) -> dict[str, Any]:
    """The fields of an approval entry that are shown and sent back (texts bounded)."""
    tool = value.get("toolName")
    reason = value.get("reason")
    return {
        "callId": value["callId"],  # exact: the answer names the call with it
        "toolName": bounded(tool, 200) if isinstance(tool, str) else "",
        "input": bounded_json(value.get("input")),
        "reason": bounded(reason) if isinstance(reason, str) else "",
    }


def question_for(
    asked: Asked, *, agent: str, text: str, data_parts: Sequence[Any], where: dict[str, Any]
) -> Question:
    """The question to ask our host for ``asked``; ``where`` (the agent's URL, the task
    and context ids) goes into its data."""
    shown = bounded(text)
    approval = asked.approval
    if approval is not None:
        tool = approval["toolName"] or "a tool"
        why = f": {approval['reason']}" if approval["reason"] else ""
        call_id = bounded(approval["callId"], 200)
        message = f"remote agent {agent!r} asks for approval of {tool} ({call_id}){why}"
        data = {**where, "approval": approval, "text": shown}
        return Question(APPROVAL_KIND, message, APPROVAL_ANSWER_SCHEMA, data)
    remote = asked.question
    if remote is not None:
        tool = f" ({remote['toolName']})" if remote["toolName"] else ""
        message = f"remote agent {agent!r}{tool} asks: {remote['message'] or '(no text)'}"
        data = {**where, "question": remote, "text": shown}
        return Question(remote["kind"], message, remote["schema"], data)
    message = f"remote agent {agent!r} asks: {shown or '(no text)'}"
    data = {**where, "text": shown, "data": bounded_json(list(data_parts))}
    return Question(INPUT_KIND, message, INPUT_ANSWER_SCHEMA, data)


def answer_parts(asked: Asked, answer: QuestionAnswer) -> list[dict[str, Any]]:
    """The parts (``{"text": ...}`` / ``{"data": ...}``) ``answer`` sends: any answer
    to a remote question, an accepted one to anything else."""
    content = answer.content
    if asked.question is not None:
        reply: dict[str, Any] = {
            "questionId": asked.question["questionId"],
            "action": answer.action.value,
        }
        if answer.accepted and content is not None:
            reply["content"] = content
        return [{"data": reply}]
    assert answer.accepted
    assert isinstance(content, dict)
    if asked.approval is not None:
        return [{"data": {"callId": asked.approval["callId"], **content}}]
    parts: list[dict[str, Any]] = [{"text": content["text"]}]
    if "data" in content:
        parts.append({"data": content["data"]})
    return parts
