"""Judging a model response against an output spec (pure functions, no I/O).

The loop calls :func:`judge` where a response would end the turn or start a tool
round; it answers what to do: accept the typed value, send the problems back to the
model and ask again, or end the turn with :class:`OutputValidationError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..core._items import Item, ItemKind, TextPart, ToolCallPart, ToolResultPart
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ._errors import OutputValidationError
from ._spec import OutputMode, OutputProblems, OutputSpec

__all__ = [
    "OUTPUT_REJECTED_KEY",
    "Accepted",
    "Exhausted",
    "Rejected",
    "AnswerCheck",
    "answer_tool",
    "judge",
    "offered_tools",
    "premature_answer",
]

OUTPUT_REJECTED_KEY = "agentloop.output_rejected"
"""Metadata on the item (a user message, or the final-answer tool's result) that sent an
answer's problems back to the model; the loop counts them against ``max_retries``."""


@attrs.frozen
class Accepted:
    """The answer is valid: ``value`` is the typed output; append ``items`` (the
    final-answer call's result) and end the turn."""

    value: Any
    items: tuple[Item, ...] = ()


@attrs.frozen
class Rejected:
    """The answer is not valid and a retry is left: append ``items`` (the problems, for
    the model to read) and call the model again."""

    items: tuple[Item, ...]


@attrs.frozen
class Exhausted:
    """The answer is not valid and no retry is left: end the turn with ``error``."""

    error: OutputValidationError


AnswerCheck = Accepted | Rejected | Exhausted


def answer_tool(spec: OutputSpec[Any]) -> ToolSpec:
    """The final-answer tool of ``spec`` (``TOOL`` mode): its input is the answer."""
    about = f" ({spec.description})" if spec.description else ""
    return ToolSpec(
        spec.tool_name,
        f"Give your final answer{about}. Call it once, after any other tool you need, "
        "with the answer as its input; it ends your turn.",
        dict(spec.schema),
        annotations=ToolAnnotations(read_only=True, idempotent=True),
    )


def offered_tools(
    spec: OutputSpec[Any] | None, tools: tuple[ToolSpec, ...]
) -> tuple[ToolSpec, ...]:
    """``tools`` with the final-answer tool added in ``TOOL`` mode (sorted by name)."""
    if spec is None or spec.mode is not OutputMode.TOOL:
        return tools
    answer = answer_tool(spec)
    return tuple(sorted((*(t for t in tools if t.name != answer.name), answer), key=_name))


def _name(spec: ToolSpec) -> str:
    return spec.name


def premature_answer(spec: OutputSpec[Any], call: ToolCallPart) -> ToolResultPart | None:
    """The result of a final-answer call made beside other tool calls: not taken (the
    answer must come alone, once the other results are known). ``None`` for other calls."""
    if spec.mode is not OutputMode.TOOL or call.name != spec.tool_name:
        return None
    return ToolResultPart(
        call.id,
        f"not accepted: {spec.tool_name} was called together with other tools; call "
        f"{spec.tool_name} alone, after you have read their results",
        True,
        metadata={OUTPUT_REJECTED_KEY: True},
    )


def judge(
    spec: OutputSpec[Any],
    output: Sequence[Item],
    calls: Sequence[ToolCallPart],
    turn_items: Sequence[Item],
) -> AnswerCheck | None:
    """What the response ``output`` (with its tool ``calls``) means for the output of the
    turn whose items so far are ``turn_items``; ``None``: run the tool round as usual."""
    answers = [call for call in calls if call.name == spec.tool_name]
    if spec.mode is OutputMode.TOOL and answers and len(answers) == len(calls):
        return _judge_call(spec, answers, turn_items)
    if calls:
        return None
    text = "\n".join(item.text_content for item in output if item.kind is ItemKind.ASSISTANT)
    try:
        return Accepted(spec.parse(text))
    except OutputProblems as error:
        problems = list(error.problems)
    failures = _failures(turn_items)
    if failures >= spec.max_retries:
        return Exhausted(OutputValidationError(spec.name, problems, text, failures + 1))
    if spec.mode is OutputMode.TOOL:
        ask = f"Give your final answer by calling the {spec.tool_name} tool; your reply"
        again = ""
    else:
        ask = "Your answer"
        again = " Answer again with only a JSON value that matches the schema."
    message = f"{ask} did not match the output schema {spec.name!r}: {'; '.join(problems)}.{again}"
    feedback = Item(ItemKind.USER, (TextPart(message),), metadata={OUTPUT_REJECTED_KEY: True})
    return Rejected((feedback,))


def _judge_call(
    spec: OutputSpec[Any], answers: list[ToolCallPart], turn_items: Sequence[Item]
) -> AnswerCheck:
    first, *others = answers
    extra = [
        ToolResultPart(call.id, f"ignored: {spec.tool_name} was called more than once", True)
        for call in others
    ]
    try:
        value = spec.check(first.input)
    except OutputProblems as error:
        problems = list(error.problems)
    else:
        accepted = ToolResultPart(first.id, "accepted")
        return Accepted(value, (Item(ItemKind.TOOL, (accepted, *extra)),))
    failures = _failures(turn_items)
    if failures >= spec.max_retries:
        return Exhausted(OutputValidationError(spec.name, problems, first.input, failures + 1))
    rejected = ToolResultPart(
        first.id,
        f"not accepted: the answer does not match the output schema {spec.name!r}: "
        f"{'; '.join(problems)}. Call {spec.tool_name} again with a corrected answer.",
        True,
    )
    item = Item(ItemKind.TOOL, (rejected, *extra), metadata={OUTPUT_REJECTED_KEY: True})
    return Rejected((item,))


def _failures(turn_items: Sequence[Item]) -> int:
    return sum(1 for item in turn_items if item.metadata.get(OUTPUT_REJECTED_KEY) is True)
