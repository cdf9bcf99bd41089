"""The loop's events and transcript items as AG-UI events, in order (no I/O).

``EventTranslator`` is both a ``LoopObserver`` and a ``TranscriptObserver``
of one run's driver: it is fed synchronously and hands each AG-UI event to
``emit``. Text and reasoning stream as the model produces them
(``ContentDelta``); a tool call is reported whole when its assistant item
enters the transcript (``TOOL_CALL_START`` / ``ARGS`` / ``END``), a result
when its tool item does (``TOOL_CALL_RESULT``). Each model call and each tool
execution is a step (``STEP_STARTED`` / ``STEP_FINISHED``). ``close()`` ends
whatever a failed or cancelled step left open, so the stream stays valid.
"""

from __future__ import annotations

from collections.abc import Callable

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ..core._delta import AppendText, BeginPart, CommitPart
from ..core._items import (
    Item,
    ItemKind,
    PartKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..loop._events import (
    AgentEvent,
    ContentDelta,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from ._messages import call_arguments, item_id, part_message_id, result_text

__all__ = ["EventTranslator"]


class EventTranslator:
    """Turns one run's loop events and appended items into AG-UI events for ``emit``."""

    def __init__(self, emit: Callable[[BaseEvent], None]) -> None:
        self._sink = emit
        self._live = False
        self._length = 0
        self._texts = 0
        """Text parts of the coming response item streamed so far."""
        self._reasonings = 0
        self._open: dict[str, tuple[PartKind, str]] = {}
        """Parts begun and not committed: part id -> (kind, message id)."""
        self._steps: list[str] = []
        self.usage: Usage | None = None
        """The usage of the model calls made in this run."""

    def begin(self, transcript_length: int) -> None:
        """Start translating; the transcript holds ``transcript_length`` items now.

        Events before (those a resume produces while restoring) are dropped.
        """
        self._length = transcript_length
        self._live = True

    def _emit(self, event: BaseEvent) -> None:
        self._sink(event)

    # -- LoopObserver --------------------------------------------------------

    def handle_event(self, event: AgentEvent) -> None:
        """Translate one loop event (called by the driver, synchronously)."""
        if not self._live:
            return
        match event:
            case ContentDelta(delta=delta):
                self._delta(delta)
            case ModelCallStarted(turn_id=turn_id, index=index):
                self._texts = self._reasonings = 0
                self._start_step(f"model call {turn_id}/{index}")
            case ModelCallFinished(turn_id=turn_id, index=index, usage=usage):
                self._close_parts()
                if usage is not None:
                    self.usage = usage if self.usage is None else self.usage + usage
                self._finish_step(f"model call {turn_id}/{index}")
            case ModelCallFailed(turn_id=turn_id, index=index):
                self._close_parts()
                self._finish_step(f"model call {turn_id}/{index}")
            case ToolExecutionStarted(call_id=call_id, tool_name=name):
                self._start_step(f"tool {name} {call_id}")
            case ToolExecutionFinished(call_id=call_id, tool_name=name):
                self._finish_step(f"tool {name} {call_id}")
            case _:
                pass

    def _delta(self, delta: object) -> None:
        base = f"agentloop-{self._length}"
        match delta:
            case BeginPart(part_id=part_id, kind=PartKind.TEXT):
                message_id = part_message_id(base, "text", self._texts)
                self._texts += 1
                self._open[part_id] = (PartKind.TEXT, message_id)
                self._emit(TextMessageStartEvent(message_id=message_id, role="assistant"))
            case BeginPart(part_id=part_id, kind=PartKind.REASONING):
                message_id = part_message_id(base, "reasoning", self._reasonings)
                self._reasonings += 1
                self._open[part_id] = (PartKind.REASONING, message_id)
                self._emit(ReasoningStartEvent(message_id=message_id))
                self._emit(ReasoningMessageStartEvent(message_id=message_id, role="reasoning"))
            case AppendText(part_id=part_id, text=text) if text and part_id in self._open:
                kind, message_id = self._open[part_id]
                if kind is PartKind.TEXT:
                    self._emit(TextMessageContentEvent(message_id=message_id, delta=text))
                else:
                    self._emit(ReasoningMessageContentEvent(message_id=message_id, delta=text))
            case CommitPart(part_id=part_id) if part_id in self._open:
                self._end_part(part_id)
            case _:
                pass

    def _end_part(self, part_id: str) -> None:
        kind, message_id = self._open.pop(part_id)
        if kind is PartKind.TEXT:
            self._emit(TextMessageEndEvent(message_id=message_id))
        else:
            self._emit(ReasoningMessageEndEvent(message_id=message_id))
            self._emit(ReasoningEndEvent(message_id=message_id))

    def _close_parts(self) -> None:
        for part_id in list(self._open):
            self._end_part(part_id)

    def _start_step(self, name: str) -> None:
        self._steps.append(name)
        self._emit(StepStartedEvent(step_name=name))

    def _finish_step(self, name: str) -> None:
        if name in self._steps:
            self._steps.remove(name)
            self._emit(StepFinishedEvent(step_name=name))

    # -- TranscriptObserver --------------------------------------------------

    def on_item_appended(self, item: Item) -> None:
        """Report an item entering the transcript (called by the driver, synchronously)."""
        if not self._live:
            return
        index, self._length = self._length, self._length + 1
        base = item_id(item, index)
        if item.kind is ItemKind.ASSISTANT:
            self._assistant(item, base)
        elif item.kind is ItemKind.TOOL:
            results = [p for p in item.parts if isinstance(p, ToolResultPart)]
            for position, result in enumerate(results):
                self._emit(
                    ToolCallResultEvent(
                        message_id=part_message_id(base, "text", position),
                        tool_call_id=result.call_id,
                        content=result_text(result),
                        role="tool",
                    )
                )
        elif item.kind is ItemKind.NOTIFICATION:
            self._emit(CustomEvent(name="agentloop.notification", value=item.text_content))

    def _assistant(self, item: Item, base: str) -> None:
        """The parts no delta streamed (an adapter that does not stream), then the tool calls."""
        self._close_parts()
        reasoning = [p for p in item.parts if isinstance(p, ReasoningPart) and not p.redacted]
        for position, part in enumerate(reasoning[self._reasonings :], start=self._reasonings):
            message_id = part_message_id(base, "reasoning", position)
            self._emit(ReasoningStartEvent(message_id=message_id))
            self._emit(ReasoningMessageStartEvent(message_id=message_id, role="reasoning"))
            if part.text:
                self._emit(ReasoningMessageContentEvent(message_id=message_id, delta=part.text))
            self._emit(ReasoningMessageEndEvent(message_id=message_id))
            self._emit(ReasoningEndEvent(message_id=message_id))
        texts = [p.text for p in item.parts if isinstance(p, TextPart)]
        for position, text in enumerate(texts[self._texts :], start=self._texts):
            message_id = part_message_id(base, "text", position)
            self._emit(TextMessageStartEvent(message_id=message_id, role="assistant"))
            if text:
                self._emit(TextMessageContentEvent(message_id=message_id, delta=text))
            self._emit(TextMessageEndEvent(message_id=message_id))
        self._texts = self._reasonings = 0
        for call in item.parts:
            if isinstance(call, ToolCallPart):
                self._emit(
                    ToolCallStartEvent(
                        tool_call_id=call.id, tool_call_name=call.name, parent_message_id=base
                    )
                )
                self._emit(ToolCallArgsEvent(tool_call_id=call.id, delta=call_arguments(call)))
                self._emit(ToolCallEndEvent(tool_call_id=call.id))

    def close(self) -> None:
        """End the parts and steps left open (a failed or cancelled step)."""
        self._close_parts()
        for name in list(self._steps):
            self._finish_step(name)

    def token_usage(self) -> list[TokenUsage] | None:
        """This run's usage as ``RUN_FINISHED.usage`` (``None`` when no call reported any)."""
        usage = self.usage
        if usage is None:
            return None
        return [
            TokenUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.input_tokens + usage.output_tokens,
                reasoning_tokens=usage.reasoning_tokens or None,
                cached_input_tokens=usage.cache_read_tokens or None,
                cache_write_input_tokens=usage.cache_write_tokens or None,
            )
        ]
