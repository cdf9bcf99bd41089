"""Rendering with rich: events and steps as they stream, and stored transcripts.

Only this module (and ``_main``) touch the console; the logic in ``_chat``,
``_demo`` and ``_replay`` hands it values. Every line is printed with
``soft_wrap=True`` so the text is exactly what tests compare.
"""

from __future__ import annotations

import html
import json
import re
import time
import traceback
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.text import Text

from ..core._delta import AppendText, BeginPart
from ..core._items import Item, ItemKind, PartKind, TextPart, ToolCallPart, ToolResultPart, Usage
from ..loop._events import (
    AgentEvent,
    ApprovalAnswered,
    ApprovalRequested,
    ContentDelta,
    LoopWarning,
    RunFailed,
    ToolCallRequested,
    ToolExecutionFinished,
    ToolResultReceived,
    TurnFinished,
)
from ..loop._steps import Step

__all__ = ["Renderer", "brief", "format_arguments", "format_usage", "short_id"]

_MAX_RESULT_CHARS = 200
NOT_REPORTED = "not reported"
_MAX_ID_CHARS = 12
# an HTML entity that may still be cut off at the end of a streamed chunk
_OPEN_ENTITY = re.compile(r"&#?[A-Za-z0-9]{0,8}$")


def short_id(call_id: str) -> str:
    """A call id short enough to read: ``call_8f3a…91c2`` for long provider ids."""
    if len(call_id) <= _MAX_ID_CHARS:
        return call_id
    return f"{call_id[:6]}…{call_id[-4:]}"


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
    """``input 30 tokens, output 6 tokens`` (and cost when known); ``not reported`` for none."""
    usage = usage or Usage()
    if not usage.input_tokens and not usage.output_tokens and usage.cost is None:
        return NOT_REPORTED
    text = f"input {usage.input_tokens} tokens, output {usage.output_tokens} tokens"
    if usage.cost is not None:
        text += f", cost ${usage.cost:.4f}"
    return text


class Renderer:
    """Prints stream items and transcripts on a rich console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._inline = False
        self._pending_text = ""
        self._argument_parts: set[str] = set()
        self._status: Status | None = None

    # -- lines -------------------------------------------------------------------------

    def line(self, text: str, style: str = "") -> None:
        """One whole line (closing streamed text first)."""
        self.end_inline()
        self.console.print(Text(text, style=style), soft_wrap=True)

    def traceback(self, error: BaseException) -> None:
        """The error's traceback, plain (``--verbose``)."""
        text = "".join(traceback.format_exception(error)).rstrip()
        self.line(text, "dim")

    def thinking(self) -> None:
        """Show ``thinking… 3s`` until the next output (only on a terminal)."""
        if self._status is not None or not self.console.is_terminal:
            return
        self._status = Status(_Elapsed("thinking…"), console=self.console)
        self._status.start()

    def stop_thinking(self) -> None:
        """Remove the ``thinking…`` status, if shown."""
        status, self._status = self._status, None
        if status is not None:
            status.stop()

    def note(self, text: str) -> None:
        """A dim side remark."""
        self.line(text, "dim")

    def error(self, text: str) -> None:
        """An error line."""
        self.line(text, "bold red")

    def tokens(self, text: str, style: str = "cyan") -> None:
        """Streamed model text, printed as it arrives (HTML entities like ``&#39;`` decoded)."""
        self.stop_thinking()
        text = self._pending_text + text
        cut = _OPEN_ENTITY.search(text)
        self._pending_text = text[cut.start() :] if cut is not None else ""
        shown = text[: cut.start()] if cut is not None else text
        if shown:
            self.console.print(Text(html.unescape(shown), style=style), end="", soft_wrap=True)
        self._inline = True

    def end_inline(self) -> None:
        """Close a line of streamed text."""
        self.stop_thinking()
        if self._pending_text:
            pending, self._pending_text = self._pending_text, ""
            self.console.print(Text(html.unescape(pending), style="cyan"), end="", soft_wrap=True)
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
            self._delta(event)
        elif isinstance(event, ToolCallRequested):
            call = event.call
            self.line(
                f"-> {call.name}({format_arguments(call.input)}) [{short_id(call.id)}]", "yellow"
            )
        elif isinstance(event, ToolExecutionFinished):
            status = "failed" if event.is_error else "finished"
            milliseconds = round(event.duration * 1000)
            self.line(f"   {event.tool_name} {status} in {milliseconds} ms", "dim")
        elif isinstance(event, ToolResultReceived):
            self._result(event.result)
            self.thinking()  # the model is called again with the result
        elif isinstance(event, ApprovalRequested):
            self.line(
                f"?  {event.tool_name} needs approval: {event.summary} ({event.reason})",
                "bold magenta",
            )
        elif isinstance(event, ApprovalAnswered):
            verdict = "approved" if event.approved else "denied"
            edited = " with edited input" if event.patched else ""
            self.line(f"   {verdict}{edited}", "magenta")
        elif isinstance(event, TurnFinished) and event.result.error is not None:
            error = event.result.error
            self.error(f"failed: {type(error).__name__}: {error}")
        elif isinstance(event, TurnFinished):
            result = event.result
            usage = format_usage(result.usage)
            usage = f"usage {usage}" if usage == NOT_REPORTED else usage
            self.line(f"== turn {result.finish_reason.value} ({usage})", "green")
        elif isinstance(event, LoopWarning):
            self.line(f"warning: {event.message}", "yellow")
        elif isinstance(event, RunFailed):
            self.error(f"failed: {event.message}")

    def _delta(self, event: ContentDelta) -> None:
        delta = event.delta
        if isinstance(delta, BeginPart) and delta.kind is PartKind.TOOL_CALL:
            self._argument_parts.add(delta.part_id)
            self.end_inline()
            self.console.print(Text("   arguments: ", style="dim"), end="", soft_wrap=True)
            self._inline = True
        elif isinstance(delta, AppendText):
            tool_arguments = delta.part_id in self._argument_parts
            self.tokens(delta.text, "dim" if tool_arguments else "cyan")

    def _result(self, result: ToolResultPart) -> None:
        call_id = short_id(result.call_id)
        label = f"{call_id} (error)" if result.is_error else call_id
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
                self.line(f"[{item.kind.value}] {html.unescape(part.text)}", style)
            elif isinstance(part, ToolCallPart):
                self.line(
                    f"[{item.kind.value}] -> {part.name}({format_arguments(part.input)}) "
                    f"[{short_id(part.id)}]",
                    "yellow",
                )
            elif isinstance(part, ToolResultPart):
                call_id = short_id(part.call_id)
                label = f"{call_id} (error)" if part.is_error else call_id
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


class _Elapsed:
    """A status text with the seconds since it was made, re-rendered on each refresh."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()

    def __rich__(self) -> Text:
        return Text(f"{self.label} {time.monotonic() - self.started:.0f}s", style="dim")
