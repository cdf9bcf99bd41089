"""Everything observers hear about, as plain frozen values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from ..core._delta import Delta
from ..core._items import FinishReason, Item, Metadata, ToolCallPart, ToolResultPart, Usage
from ..core._items import _empty_metadata as _empty

__all__ = [
    "AgentEvent",
    "ApprovalRequired",
    "ApprovalResolved",
    "ContentDelta",
    "InputAccepted",
    "LoopObserver",
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
    "Warning",
]


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


def _to_names(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(names)


@attrs.frozen
class TurnResult:
    """How a turn ended.

    ``items`` are the output items of the turn's last model call (the whole
    history is in ``driver.snapshot().transcript``); ``usage`` is summed over
    every model call of the turn.
    """

    turn_id: str
    finish_reason: FinishReason
    items: tuple[Item, ...] = attrs.field(converter=_to_items)
    usage: Usage | None = None
    metadata: Metadata = attrs.field(factory=_empty)


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
    """A started call finished; ``duration`` in seconds."""

    call_id: str
    tool_name: str
    duration: float
    is_error: bool


@attrs.frozen
class ToolResultReceived(AgentEvent):
    """A tool result (real or synthesized) landed in the transcript."""

    result: ToolResultPart


@attrs.frozen
class ApprovalRequired(AgentEvent):
    """A call needs the host's approval; ``call_id`` names it."""

    call_id: str
    tool_name: str
    request_kind: str
    reason: str
    summary: str


@attrs.frozen
class ApprovalResolved(AgentEvent):
    """The host answered an approval."""

    call_id: str
    approved: bool
    patched: bool = False


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
    metadata: Metadata = attrs.field(factory=_empty)


@attrs.frozen
class UsageUpdated(AgentEvent):
    """The model reported usage."""

    usage: Usage


@attrs.frozen
class Warning(AgentEvent):
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
