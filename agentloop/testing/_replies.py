"""The replies a :class:`~agentloop.testing.ScriptedModel` streams, and their builders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import attrs

from ..core._delta import AppendText, BeginPart, CommitPart
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    Part,
    PartKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from ..model._protocol import ModelEvent, ModelTurnResult

__all__ = [
    "Reply",
    "ScriptStep",
    "call",
    "chunked",
    "fail",
    "hang",
    "reasoning",
    "text",
    "tool_calls",
]


@attrs.frozen
class _Sleep:
    seconds: float | None  # None: forever


@attrs.frozen
class _Raise:
    error: BaseException


ScriptStep: TypeAlias = ModelEvent | _Sleep | _Raise | ToolCallPart


@attrs.frozen
class Reply:
    """One scripted model response: the events it streams, in order.

    Tool-call parts without an id get ``call-N`` (counting per model) when played.
    """

    steps: tuple[ScriptStep, ...]

    @classmethod
    def raw(cls, steps: Sequence[ScriptStep]) -> Reply:
        """A reply made of exactly these events (it may even lack a ``ModelTurnResult``)."""
        return cls(tuple(steps))


def call(name: str, input: Any = None, *, id: str | None = None) -> ToolCallPart:
    """A tool call for :func:`tool_calls`; ``input`` defaults to ``{}``."""
    return ToolCallPart(id or "", name, {} if input is None else input)


def _result(parts: Sequence[Part], reason: FinishReason, usage: Usage | None) -> ModelTurnResult:
    return ModelTurnResult(reason, (Item(ItemKind.ASSISTANT, tuple(parts)),), usage)


def text(content: str, *, usage: Usage | None = None) -> Reply:
    """A plain answer, streamed as one delta."""
    return chunked(content, usage=usage)


def chunked(*chunks: str, usage: Usage | None = None) -> Reply:
    """A text answer streamed chunk by chunk."""
    whole = "".join(chunks)
    steps: list[ScriptStep] = [BeginPart("text-0", PartKind.TEXT)]
    steps.extend(AppendText("text-0", chunk) for chunk in chunks)
    part = TextPart(whole)
    steps.append(CommitPart("text-0", part))
    if usage is not None:
        steps.append(usage)
    steps.append(_result([part], FinishReason.COMPLETED, usage))
    return Reply(tuple(steps))


def reasoning(thought: str, answer: str, *, usage: Usage | None = None) -> Reply:
    """An answer preceded by reasoning."""
    parts: list[Part] = [ReasoningPart(thought), TextPart(answer)]
    return Reply((_result(parts, FinishReason.COMPLETED, usage),))


def tool_calls(*calls: ToolCallPart, text: str | None = None, usage: Usage | None = None) -> Reply:
    """A response that asks for ``calls`` (optionally with some text first)."""
    parts: list[Part] = [TextPart(text)] if text else []
    parts.extend(calls)
    steps: list[ScriptStep] = list(calls)
    steps.append(_result(parts, FinishReason.TOOL_CALL, usage))
    return Reply(tuple(steps))


def hang(*before: ScriptStep) -> Reply:
    """Stream ``before``, then wait forever (until cancelled)."""
    return Reply((*before, _Sleep(None)))


def fail(error: BaseException, *before: ScriptStep) -> Reply:
    """Stream ``before``, then raise ``error``."""
    return Reply((*before, _Raise(error)))
