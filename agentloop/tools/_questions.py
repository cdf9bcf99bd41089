"""A running tool call's question to the host, and the host's answer: plain data.

A tool asks with ``await ctx.ask(Question(...))``; the driver returns the
question from ``next()`` as a ``CallQuestion`` step; the host answers it with
``step.answer(content)``, ``step.decline()`` or ``step.cancel()``, and the
tool's ``ask`` returns that :class:`QuestionAnswer`. MCP elicitation and
sampling requests reach the host this way.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

import attrs
import jsonschema

from ..core._errors import InvalidInputError
from ..core._items import Item

__all__ = [
    "Question",
    "QuestionAction",
    "QuestionAnswer",
    "QuestionHost",
    "Resumed",
    "check_answer",
]


def _text(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"Question.{attribute.name} must be a non-empty str, got {value!r}")


def _schema(_instance: Any, _attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise InvalidInputError(f"Question.schema must be a JSON Schema object, got {value!r}")
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.exceptions.SchemaError as problem:
        raise InvalidInputError(
            f"Question.schema is not a valid JSON Schema: {problem.message}"
        ) from None


def _items(value: Any) -> tuple[Item, ...] | None:
    if value is None:
        return None
    items = tuple(value)
    for item in items:
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"Question.model_prompt must hold Items, got {type(item).__name__}"
            )
    return items


@attrs.frozen
class Question:
    """What a running call asks the host.

    ``kind`` says what sort of question it is (``"elicitation"``,
    ``"elicitation_url"``, ``"sampling"``, or a tool's own word), ``message``
    is the text to show, ``schema`` the JSON Schema an accepted answer's
    content must match (``None``: an accept carries no content), ``data`` the
    whole request as JSON (an MCP request's parameters, say) for hosts that
    render more than the message. ``resume`` is JSON the tool can go on from
    with the answer alone, after a restart (``None``: it cannot; a restore
    answers the call in doubt): a restored driver asks the question again and
    runs the call once more with ``ctx.resumed`` set. ``model_prompt`` (items)
    asks the agent's own model instead of the host: the driver makes one model
    call with them and no tools, within the turn's limits (its usage counts
    against them), and answers ``accept({"text": ..., "model": ...})``, or
    ``decline()`` when a limit is reached or the call fails.
    """

    kind: str = attrs.field(validator=_text)
    message: str = attrs.field(validator=attrs.validators.instance_of(str))
    schema: dict[str, Any] | None = attrs.field(default=None, validator=_schema)
    data: Any = None
    resume: Any = None
    model_prompt: tuple[Item, ...] | None = attrs.field(default=None, converter=_items)


class QuestionAction(StrEnum):
    """How the host answered: accepted (with content), declined, or cancelled."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


def _action(value: Any) -> QuestionAction:
    try:
        return QuestionAction(value)
    except ValueError:
        raise InvalidInputError(
            f"QuestionAnswer.action must be one of accept, decline, cancel; got {value!r}"
        ) from None


@attrs.frozen
class QuestionAnswer:
    """The host's answer to a :class:`Question` (``content`` only with ``ACCEPT``)."""

    action: QuestionAction = attrs.field(converter=_action)
    content: Any = None

    @classmethod
    def accept(cls, content: Any = None) -> QuestionAnswer:
        """Accept, with ``content`` (checked against the question's schema)."""
        return cls(QuestionAction.ACCEPT, content)

    @classmethod
    def decline(cls) -> QuestionAnswer:
        """Refuse to answer."""
        return cls(QuestionAction.DECLINE)

    @classmethod
    def cancel(cls) -> QuestionAnswer:
        """Dismiss the question without a choice."""
        return cls(QuestionAction.CANCEL)

    @property
    def accepted(self) -> bool:
        """Whether the host accepted."""
        return self.action is QuestionAction.ACCEPT


@attrs.frozen
class Resumed:
    """What a call restarted from a question receives (``ToolContext.resumed``): the
    question it asked before the restart (with its ``resume`` data) and the answer."""

    question: Question
    answer: QuestionAnswer


class QuestionHost(Protocol):
    """Where ``ToolContext.ask`` sends a question: the driver running the call."""

    async def ask(self, call_id: str, question: Question) -> QuestionAnswer:
        """Ask the host ``question`` for ``call_id`` and wait for the answer."""
        ...


def check_answer(question: Question, answer: QuestionAnswer, where: str) -> None:
    """Raise ``InvalidInputError`` (naming ``where``) unless ``answer`` fits ``question``."""
    if not isinstance(answer, QuestionAnswer):
        raise InvalidInputError(
            f"{where} expects a QuestionAnswer, got {type(answer).__name__}; use "
            "QuestionAnswer.accept(content), .decline() or .cancel()"
        )
    if not answer.accepted:
        if answer.content is not None:
            raise InvalidInputError(
                f"{where}: a {answer.action.value} answer carries no content, got "
                f"{answer.content!r}"
            )
        return
    schema = question.schema
    if schema is None:
        if answer.content is not None:
            raise InvalidInputError(
                f"{where}: the question has no schema, so an accept carries no content; "
                f"got {answer.content!r}"
            )
        return
    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = sorted(validator.iter_errors(answer.content), key=lambda error: list(error.path))
    if problems:
        found = "; ".join(
            f"{'/'.join(map(str, problem.path)) or '(content)'}: {problem.message}"
            for problem in problems[:5]
        )
        raise InvalidInputError(
            f"{where}: the content does not match the question's schema ({found}); "
            "answer with content that matches question.schema, or decline()"
        )
