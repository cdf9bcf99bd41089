"""Rendering with rich: events and steps as they stream, and stored transcripts.

Only this module (and ``_main``) touch the console; the logic in ``_chat``,
``_demo`` and ``_replay`` hands it values. Every line is printed with
``soft_wrap=True`` so the text is exactly what tests compare.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.text import Text

from ..core._delta import AppendText
from ..core._items import Item, ItemKind, TextPart, ToolCallPart, ToolResultPart, Usage
from ..loop._events import (
    AgentEvent,
    ApprovalRequired,
    ApprovalResolved,
    ContentDelta,
    RunFailed,
    ToolCallRequested,
    ToolExecutionFinished,
    ToolResultReceived,
    TurnFinished,
    Warning,
)
from ..loop._steps import Step

__all__ = ["Renderer", "brief", "format_arguments", "format_usage"]

_MAX_RESULT_CHARS = 200


def format_arguments(value: Any) -> str:
    """Tool-call arguments as compact JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def brief(output: Any) -> str:
    """A tool output on one line, shortened."""
    text = output if isinstance(output, str) else format_arguments(output)
    text = " ".join(text.split())
    if len(text) > _MAX_RESULT_CHARS:
        return text[: _MAX_RESULT_CHARS - 3] + "..."
    return text


def format_usage(usage: Usage | None) -> str:
    """``input 30 tokens, output 6 tokens`` (and cost when known)."""
    usage = usage or Usage()
    text = f"input {usage.input_tokens} tokens, output {usage.output_tokens} tokens"
    if usage.cost is not None:
        text += f", cost ${usage.cost:.4f}"
    return text


class Renderer:
    """Prints stream items and transcripts on a rich console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._inline = False

    # -- lines -------------------------------------------------------------------------

    def line(self, text: str, style: str = "") -> None:
        """One whole line (closing streamed text first)."""
        self.end_inline()
        self.console.print(Text(text, style=style), soft_wrap=True)

    def note(self, text: str) -> None:
        """A dim side remark."""
        self.line(text, "dim")

    def error(self, text: str) -> None:
        """An error line."""
        self.line(text, "bold red")

    def tokens(self, text: str) -> None:
        """Streamed model text, printed as it arrives."""
        self.console.print(Text(text, style="cyan"), end="", soft_wrap=True)
        self._inline = True

    def end_inline(self) -> None:
        """Close a line of streamed text."""
        if self._inline:
            self.console.print(soft_wrap=True)
            self._inline = False

    # -- stream items ------------------------------------------------------------------

    def item(self, item: AgentEvent | Step) -> None:
        """Render one item of ``agentloop.stream`` (steps are shown through their events)."""
        if isinstance(item, AgentEvent):
            self.event(item)

    def event(self, event: AgentEvent) -> None:
        """Render the events a user cares about; the rest stay quiet."""
        if isinstance(event, ContentDelta):
            if isinstance(event.delta, AppendText):
                self.tokens(event.delta.text)
        elif isinstance(event, ToolCallRequested):
            call = event.call
            self.line(f"-> {call.name}({format_arguments(call.input)}) [{call.id}]", "yellow")
        elif isinstance(event, ToolExecutionFinished):
            status = "failed" if event.is_error else "finished"
            milliseconds = round(event.duration * 1000)
            self.line(f"   {event.tool_name} {status} in {milliseconds} ms", "dim")
        elif isinstance(event, ToolResultReceived):
            self._result(event.result)
        elif isinstance(event, ApprovalRequired):
            self.line(
                f"?  {event.tool_name} needs approval: {event.summary} ({event.reason})",
                "bold magenta",
            )
        elif isinstance(event, ApprovalResolved):
            verdict = "approved" if event.approved else "denied"
            edited = " with edited input" if event.patched else ""
            self.line(f"   {verdict}{edited}", "magenta")
        elif isinstance(event, TurnFinished):
            result = event.result
            self.line(
                f"== turn {result.finish_reason.value} ({format_usage(result.usage)})",
                "green",
            )
        elif isinstance(event, Warning):
            self.line(f"warning: {event.message}", "yellow")
        elif isinstance(event, RunFailed):
            self.error(f"failed: {event.message}")

    def _result(self, result: ToolResultPart) -> None:
        label = f"{result.call_id} (error)" if result.is_error else result.call_id
        self.line(f"<- {label}: {brief(result.output)}", "red" if result.is_error else "blue")

    # -- transcripts -------------------------------------------------------------------

    def transcript(self, items: Iterable[Item]) -> int:
        """Render stored items (``replay``, ``/history``); returns how many."""
        count = 0
        for item in items:
            self.transcript_item(item)
            count += 1
        return count

    def transcript_item(self, item: Item) -> None:
        """One item: its kind, then its text, calls and results."""
        style = _KIND_STYLES.get(item.kind, "")
        for part in item.parts:
            if isinstance(part, TextPart):
                self.line(f"[{item.kind.value}] {part.text}", style)
            elif isinstance(part, ToolCallPart):
                self.line(
                    f"[{item.kind.value}] -> {part.name}({format_arguments(part.input)}) "
                    f"[{part.id}]",
                    "yellow",
                )
            elif isinstance(part, ToolResultPart):
                label = f"{part.call_id} (error)" if part.is_error else part.call_id
                self.line(f"[{item.kind.value}] <- {label}: {brief(part.output)}", "blue")
            else:
                self.line(f"[{item.kind.value}] ({type(part).__name__})", "dim")
        if not item.parts:
            self.line(f"[{item.kind.value}] (empty)", "dim")


_KIND_STYLES = {
    ItemKind.SYSTEM: "dim",
    ItemKind.DEVELOPER: "dim",
    ItemKind.USER: "bold",
    ItemKind.ASSISTANT: "cyan",
    ItemKind.NOTIFICATION: "magenta",
}
