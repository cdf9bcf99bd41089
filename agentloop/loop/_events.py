"""Everything observers hear about, as plain frozen values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ..core._delta import Delta
from ..core._errors import ProviderError
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    Metadata,
    ResultOutcome,
    ToolCallPart,
    ToolResultPart,
    Usage,
    result_outcome,
)
from ..core._items import _empty_metadata as _empty

__all__ = [
    "AgentEnded",
    "AgentEvent",
    "ApprovalRequested",
    "ApprovalAnswered",
    "QuestionAsked",
    "QuestionAnswered",
    "ContentDelta",
    "InputAccepted",
    "ExecutedToolCall",
    "LoopObserver",
    "ModelCallFailed",
    "ModelCallFinished",
    "ModelCallRecord",
    "ModelCallStarted",
    "MutationFinished",
    "MutationStarted",
    "RunFailed",
    "RunStarted",
    "ToolCallRequested",
    "ToolCatalogChanged",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
    "ToolResultReceived",
    "TranscriptObserver",
    "TurnFinished",
    "TurnResult",
    "TurnStarted",
    "UsageUpdated",
    "LoopWarning",
]


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


def _to_names(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(names)


def _to_calls(calls: Sequence[ExecutedToolCall]) -> tuple[ExecutedToolCall, ...]:
    return tuple(calls)


def _to_records(records: Sequence[ModelCallRecord]) -> tuple[ModelCallRecord, ...]:
    return tuple(records)


@attrs.frozen(kw_only=True, weakref_slot=False)
class ExecutedToolCall:
    """One tool call of a turn and its one result (seed 001's ``ExecutedToolCall``).

    ``input`` is what the tool ran with (the host's edit for ``approve_with``);
    ``result`` the result the model sees. The times are wall-clock seconds
    since the epoch, ``duration`` in seconds; all three are ``None`` for a call
    that never ran (denied, skipped, refused, ...).
    """

    call_id: str
    tool_name: str
    input: Any
    result: ToolResultPart
    started_at: float | None = None
    finished_at: float | None = None
    duration: float | None = None

    @property
    def output(self) -> Any:
        """The result's output (text, parts or JSON)."""
        return self.result.output

    @property
    def is_error(self) -> bool:
        """Whether the result is an error."""
        return self.result.is_error

    @property
    def outcome(self) -> ResultOutcome | None:
        """The typed outcome of a result agentloop wrote itself; ``None`` for a tool's own."""
        return result_outcome(self.result)


@attrs.frozen(kw_only=True, weakref_slot=False)
class ModelCallRecord:
    """One model call of a turn: its 1-based ``index`` in the turn, usage, reason, duration.

    ``error_kind`` is the :class:`~agentloop.ProviderErrorKind` value of a
    call that failed (then ``finish_reason`` is ``ERROR``).
    """

    index: int
    finish_reason: FinishReason
    usage: Usage | None = None
    duration: float = 0.0
    model: str | None = None
    error_kind: str | None = None


@attrs.frozen
class TurnResult:
    """How a turn ended.

    ``items`` are every item the turn added to the transcript, in order: the
    input that started it, each model response, each tool result (a mutator
    that rewrote the transcript does not change them). ``tool_calls`` lists
    every call of the turn with its result, ``model_calls`` every model call
    with its usage; ``usage`` is their sum. ``error`` is the
    :class:`~agentloop.ProviderError` of a turn that ended with
    ``FinishReason.ERROR`` (its ``kind`` says what to do: ``retry()`` a
    ``RETRYABLE`` one, compact then ``retry()`` a ``CONTEXT_OVERFLOW``).
    ``output`` is the turn's validated structured output when the agent has one
    (``AgentBuilder.output``); an answer that never validated ends the turn with
    ``FinishReason.ERROR`` and an ``OutputValidationError`` instead.
    """

    turn_id: str
    finish_reason: FinishReason
    items: tuple[Item, ...] = attrs.field(converter=_to_items)
    usage: Usage | None = None
    metadata: Metadata = attrs.field(default=_empty())
    tool_calls: tuple[ExecutedToolCall, ...] = attrs.field(
        default=(), converter=_to_calls, kw_only=True
    )
    model_calls: tuple[ModelCallRecord, ...] = attrs.field(
        default=(), converter=_to_records, kw_only=True
    )
    error: ProviderError | None = attrs.field(default=None, kw_only=True, eq=False)
    output: Any = attrs.field(default=None, kw_only=True)

    @property
    def final_items(self) -> tuple[Item, ...]:
        """The output of the turn's last model call (the assistant items after the last
        non-assistant item)."""
        tail: list[Item] = []
        for item in reversed(self.items):
            if item.kind is not ItemKind.ASSISTANT:
                break
            tail.append(item)
        return tuple(reversed(tail))


class AgentEvent:
    """Base of every observer event."""

    __slots__ = ()


@attrs.frozen
class RunStarted(AgentEvent):
    """A driver was started (or resumed) for ``session_id``."""

    session_id: str


@attrs.frozen
class TurnStarted(AgentEvent):
    """A new turn began."""

    session_id: str
    turn_id: str


@attrs.frozen
class InputAccepted(AgentEvent):
    """The host's input was queued for the next model call."""

    session_id: str
    items: tuple[Item, ...] = attrs.field(converter=_to_items)


@attrs.frozen
class ContentDelta(AgentEvent):
    """A streaming delta from the model."""

    delta: Delta


@attrs.frozen
class ToolCallRequested(AgentEvent):
    """The model asked for a tool call."""

    call: ToolCallPart


@attrs.frozen
class ToolExecutionStarted(AgentEvent):
    """A call passed its checks and started running."""

    call_id: str
    tool_name: str
    task_id: str | None = None


@attrs.frozen
class ToolExecutionFinished(AgentEvent):
    """A started call finished; ``duration`` in seconds; ``result`` is its result
    (the output text or the error the model sees)."""

    call_id: str
    tool_name: str
    duration: float
    is_error: bool
    result: ToolResultPart | None = None


@attrs.frozen
class ToolResultReceived(AgentEvent):
    """A tool result (real or synthesized) landed in the transcript."""

    result: ToolResultPart


@attrs.frozen
class ApprovalRequested(AgentEvent):
    """A call needs the host's approval; ``call_id`` names it."""

    call_id: str
    tool_name: str
    request_kind: str
    reason: str
    summary: str


@attrs.frozen
class ApprovalAnswered(AgentEvent):
    """The host answered an approval."""

    call_id: str
    approved: bool
    patched: bool = False


@attrs.frozen
class QuestionAsked(AgentEvent):
    """A running call asked the host a question (a ``CallQuestion`` step surfaced)."""

    call_id: str
    tool_name: str
    question_id: str
    kind: str
    message: str


@attrs.frozen
class QuestionAnswered(AgentEvent):
    """A running call's question ended: ``action`` is ``"accept"`` (answered),
    ``"decline"`` (declined), ``"cancel"`` (cancelled) or ``"withdrawn"`` (the call
    stopped waiting before the host answered)."""

    call_id: str
    question_id: str
    action: str


@attrs.frozen
class ToolCatalogChanged(AgentEvent):
    """A tool source changed before a model call."""

    source: str
    added: tuple[str, ...] = attrs.field(default=(), converter=_to_names)
    removed: tuple[str, ...] = attrs.field(default=(), converter=_to_names)
    changed: tuple[str, ...] = attrs.field(default=(), converter=_to_names)


@attrs.frozen
class MutationStarted(AgentEvent):
    """A mutator is about to run at ``point``."""

    session_id: str
    turn_id: str | None
    mutator: str
    point: str


@attrs.frozen
class MutationFinished(AgentEvent):
    """A mutator ran; ``dirty`` says whether it changed the transcript."""

    session_id: str
    turn_id: str | None
    mutator: str
    point: str
    dirty: bool
    metadata: Metadata = attrs.field(default=_empty())


@attrs.frozen
class ModelCallStarted(AgentEvent):
    """A model call of ``turn_id`` begins; ``index`` counts the turn's calls from 1.

    The request summary: how many transcript items and tool specs it sends
    (``tools_withheld`` for the final-answer call at the limit).
    """

    turn_id: str
    index: int
    transcript_items: int
    tools: int
    tools_withheld: bool = False


@attrs.frozen
class ModelCallFinished(AgentEvent):
    """A model call answered: its usage, finish reason and ``duration`` in seconds."""

    turn_id: str
    index: int
    finish_reason: FinishReason
    usage: Usage | None
    duration: float


@attrs.frozen
class ModelCallFailed(AgentEvent):
    """A model call failed with a ``ProviderError``; the turn ends with ``ERROR``.

    ``error_kind`` is the error's :class:`~agentloop.ProviderErrorKind` value.
    """

    turn_id: str
    index: int
    error_kind: str
    message: str
    duration: float


@attrs.frozen
class UsageUpdated(AgentEvent):
    """The model reported usage."""

    usage: Usage


@attrs.frozen
class LoopWarning(AgentEvent):
    """Something the host should know about that did not stop the loop."""

    message: str


@attrs.frozen
class RunFailed(AgentEvent):
    """A step raised; the driver is now failed."""

    message: str


@attrs.frozen
class TurnFinished(AgentEvent):
    """A turn ended."""

    result: TurnResult


@attrs.frozen
class AgentEnded(AgentEvent):
    """The agent has nothing left to do: a turn finished and no input or follow-up
    waits (seed 003's ``agent_end``). ``finish_reason`` is that turn's."""

    session_id: str
    turn_id: str
    finish_reason: FinishReason


@runtime_checkable
class LoopObserver(Protocol):
    """Receives every :class:`AgentEvent`, synchronously, in order."""

    def handle_event(self, event: AgentEvent) -> None:
        """Handle one event; exceptions are logged and do not stop the loop."""
        ...


@runtime_checkable
class TranscriptObserver(Protocol):
    """Told of each item appended to the transcript, once, in transcript order."""

    def on_item_appended(self, item: Item) -> None:
        """Handle one appended item."""
        ...
