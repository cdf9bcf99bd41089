"""Observation as a layer: one method per thing the loop tells its observers.

A driver with no :class:`~agentloop.LoopObserver` gets :data:`NOBODY`, whose
methods do nothing (no event is built, nothing is checked); with observers it
gets an :class:`Observers`, which builds each event and hands it to every
observer (an observer's error is logged, never raised). The decisions and the
effects call these methods unconditionally: nothing checks for observers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from .._log import get_logger
from ..core._delta import Delta
from ..core._items import FinishReason, Item, ToolCallPart, ToolResultPart, Usage
from ..model._protocol import ModelTurnResult
from ._events import (
    AgentEnded,
    AgentEvent,
    ApprovalAnswered,
    ApprovalRequested,
    ContentDelta,
    InputAccepted,
    LoopObserver,
    LoopWarning,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    MutationFinished,
    MutationStarted,
    QuestionAnswered,
    QuestionAsked,
    RunFailed,
    ToolCallRequested,
    ToolCatalogChanged,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolResultReceived,
    TurnFinished,
    TurnResult,
    TurnStarted,
    UsageUpdated,
)
from ._steps import CallQuestion

__all__ = ["NOBODY", "Nobody", "Observers", "observers_of"]

log = get_logger()


class Nobody:
    """The observer layer of a driver nobody observes: every method does nothing."""

    __slots__ = ()

    def emit(self, event: AgentEvent) -> None:
        """Hand ``event`` to the observers (none)."""

    def warning(self, message: str) -> None:
        """A ``LoopWarning``."""

    def turn_started(self, session_id: str, turn_id: str) -> None:
        """A turn opened."""

    def turn_finished(self, result: TurnResult, session_id: str, agent_ended: bool) -> None:
        """A turn closed (and, when ``agent_ended``, nothing more is queued)."""

    def run_failed(self, error: BaseException) -> None:
        """A step raised ``error``."""

    def input_accepted(self, session_id: str, items: tuple[Item, ...]) -> None:
        """The host queued ``items``."""

    def approval_requested(
        self, call_id: str, tool_name: str, kind: str, reason: str, summary: str
    ) -> None:
        """A call waits for an approval."""

    def approval_answered(self, call_id: str, approved: bool, edited: bool) -> None:
        """The host answered an approval."""

    def question_asked(self, question: CallQuestion) -> None:
        """A running call's question surfaced as a step."""

    def question_answered(self, call_id: str, question_id: str, action: str) -> None:
        """The host answered a running call's question."""

    def tool_started(self, call_id: str, tool_name: str, task_id: str | None) -> None:
        """A call's task started."""

    def tool_answered(
        self, call_id: str, tool_name: str, started_at: float | None, result: ToolResultPart
    ) -> None:
        """A call of a round has its result, now appended (``started_at``: its
        ``time.monotonic()`` start if it ran, else ``None``)."""

    def tool_result(self, result: ToolResultPart) -> None:
        """A result is appended."""

    def catalog_changed(self, changes: Iterable[Any]) -> None:
        """The tool catalog changed since the last model call."""

    def model_call_started(
        self, turn_id: str, index: int, items: int, tools: int, withheld: bool
    ) -> None:
        """A model call is about to be made."""

    def model_call_finished(
        self,
        turn_id: str,
        index: int,
        reason: FinishReason,
        usage: Usage | None,
        duration: float,
    ) -> None:
        """A model call answered."""

    def model_call_failed(
        self, turn_id: str, index: int, kind: str, message: str, duration: float
    ) -> None:
        """A model call failed."""

    def content_delta(self, delta: Delta) -> None:
        """The model streamed ``delta``."""

    def usage_updated(self, usage: Usage) -> None:
        """The model streamed a usage figure."""

    def tool_call_requested(self, call: ToolCallPart) -> None:
        """The model streamed a complete tool call."""

    def stream_ended(self, result: ModelTurnResult) -> None:
        """The model's stream ended with ``result`` (calls not yet announced are)."""

    def mutation_started(
        self, session_id: str, turn_id: str | None, mutator: str, point: str
    ) -> None:
        """A mutator starts."""

    def mutation_finished(
        self, session_id: str, turn_id: str | None, mutator: str, point: str, dirty: bool
    ) -> None:
        """A mutator finished (``dirty``: it changed the transcript)."""


NOBODY = Nobody()
"""The shared observer layer of every driver without observers."""


class Observers(Nobody):
    """The observer layer of a driver with observers: builds each event and fans it out."""

    __slots__ = ("_announced", "_observers")

    def __init__(self, observers: tuple[LoopObserver, ...]) -> None:
        self._observers = observers
        self._announced: set[str] = set()
        """The calls of the current model stream already announced one by one."""

    def emit(self, event: AgentEvent) -> None:
        for observer in self._observers:
            try:
                observer.handle_event(event)
            except Exception:
                log.exception("observer raised", observer=type(observer).__name__)

    def warning(self, message: str) -> None:
        self.emit(LoopWarning(message))

    def turn_started(self, session_id: str, turn_id: str) -> None:
        self.emit(TurnStarted(session_id, turn_id))

    def turn_finished(self, result: TurnResult, session_id: str, agent_ended: bool) -> None:
        self.emit(TurnFinished(result))
        if agent_ended:
            self.emit(AgentEnded(session_id, result.turn_id, result.finish_reason))

    def run_failed(self, error: BaseException) -> None:
        self.emit(RunFailed(f"{type(error).__name__}: {error}"))

    def input_accepted(self, session_id: str, items: tuple[Item, ...]) -> None:
        self.emit(InputAccepted(session_id, items))

    def approval_requested(
        self, call_id: str, tool_name: str, kind: str, reason: str, summary: str
    ) -> None:
        self.emit(ApprovalRequested(call_id, tool_name, kind, reason, summary))

    def approval_answered(self, call_id: str, approved: bool, edited: bool) -> None:
        self.emit(ApprovalAnswered(call_id, approved, edited))

    def question_asked(self, question: CallQuestion) -> None:
        asked = question.question
        self.emit(
            QuestionAsked(
                question.call_id, question.tool_name, question.id, asked.kind, asked.message
            )
        )

    def question_answered(self, call_id: str, question_id: str, action: str) -> None:
        self.emit(QuestionAnswered(call_id, question_id, action))

    def tool_started(self, call_id: str, tool_name: str, task_id: str | None) -> None:
        self.emit(ToolExecutionStarted(call_id, tool_name, task_id))

    def tool_answered(
        self, call_id: str, tool_name: str, started_at: float | None, result: ToolResultPart
    ) -> None:
        if started_at is not None:
            elapsed = time.monotonic() - started_at
            self.emit(ToolExecutionFinished(call_id, tool_name, elapsed, result.is_error, result))
        self.emit(ToolResultReceived(result))

    def tool_result(self, result: ToolResultPart) -> None:
        self.emit(ToolResultReceived(result))

    def catalog_changed(self, changes: Iterable[Any]) -> None:
        for change in changes:
            self.emit(
                ToolCatalogChanged(change.source, change.added, change.removed, change.changed)
            )

    def model_call_started(
        self, turn_id: str, index: int, items: int, tools: int, withheld: bool
    ) -> None:
        self._announced = set()
        self.emit(ModelCallStarted(turn_id, index, items, tools, withheld))

    def model_call_finished(
        self,
        turn_id: str,
        index: int,
        reason: FinishReason,
        usage: Usage | None,
        duration: float,
    ) -> None:
        self.emit(ModelCallFinished(turn_id, index, reason, usage, duration))

    def model_call_failed(
        self, turn_id: str, index: int, kind: str, message: str, duration: float
    ) -> None:
        self.emit(ModelCallFailed(turn_id, index, kind, message, duration))

    def content_delta(self, delta: Delta) -> None:
        self.emit(ContentDelta(delta))

    def usage_updated(self, usage: Usage) -> None:
        self.emit(UsageUpdated(usage))

    def tool_call_requested(self, call: ToolCallPart) -> None:
        self._announced.add(call.id)
        self.emit(ToolCallRequested(call))

    def stream_ended(self, result: ModelTurnResult) -> None:
        announced = self._announced
        for item in result.output_items:
            for call in item.tool_calls():
                if call.id not in announced:
                    self.emit(ToolCallRequested(call))
        self._announced = set()

    def mutation_started(
        self, session_id: str, turn_id: str | None, mutator: str, point: str
    ) -> None:
        self.emit(MutationStarted(session_id, turn_id, mutator, point))

    def mutation_finished(
        self, session_id: str, turn_id: str | None, mutator: str, point: str, dirty: bool
    ) -> None:
        self.emit(MutationFinished(session_id, turn_id, mutator, point, dirty))


def observers_of(observers: tuple[LoopObserver, ...]) -> Nobody:
    """The observer layer for ``observers``: :data:`NOBODY` when there are none."""
    return Observers(observers) if observers else NOBODY
