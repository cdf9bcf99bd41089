"""Helpers for the CLI tests: a captured console, scripted input, models and tools."""

from __future__ import annotations

import io
import re
import signal
from collections.abc import Sequence

import anyio
from rich.console import Console

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
from agentloop.testing import Reply, call, chunked, fail, hang, tool_calls

WIDTH = 100
DURATION = re.compile(r"^   \w+ (finished|failed) in \d+ ms$")


def console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=False, width=WIDTH, highlight=False), buffer


def lines(buffer: io.StringIO) -> list[str]:
    """The output's lines, with tool durations (the only timing) normalized."""
    out = []
    for line in buffer.getvalue().splitlines():
        out.append(DURATION.sub(r"   <tool> \1 in N ms", line))
    return out


class Answers:
    """A ``read_line`` that answers from a list and echoes like a terminal."""

    def __init__(self, target: Console, answers: Sequence[str]) -> None:
        self.console = target
        self.answers = list(answers)
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        if not self.answers:
            self.console.print(f"{prompt}<EOF>", soft_wrap=True, markup=False)
            return None
        answer = self.answers.pop(0)
        self.console.print(f"{prompt}{answer}", soft_wrap=True, markup=False)
        return answer


def _chat_reply(request: al.model.TurnRequest) -> Reply | str:
    """Decides from the request: 'add ...' calls add; a tool result is summed up."""
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        result = next(iter(last.tool_results()))
        return chunked("the sum is ", str(result.output), usage=al.Usage(5, 3))
    text = last.text_content
    if text.startswith("add"):
        a, b = (int(word) for word in text.split()[1:3])
        return tool_calls(call("add", {"a": a, "b": b}), usage=al.Usage(4, 2))
    if text.startswith("touch"):
        return tool_calls(call("touch", {"path": "/etc/motd"}))
    if text.startswith("fail"):
        return fail(al.ProviderError("the server said no (HTTP 503)"))
    if text.startswith("boom"):
        return tool_calls(call("boom", {}))
    if text.startswith("book"):
        return tool_calls(call("book", {}, id="call-1"))
    if text.startswith("wait"):  # streams a little, then waits for Ctrl-C
        return hang(
            al.BeginPart("text-0", al.PartKind.TEXT), al.AppendText("text-0", "partial answer")
        )
    user_turns = sum(1 for item in request.transcript if item.kind is al.ItemKind.USER)
    return chunked("you said ", f"{text!r} ", f"(message {user_turns})", usage=al.Usage(7, 4))


def make_model() -> al.testing.ScriptedModel:
    """``--model python:cli_support:make_model``."""
    return al.testing.ScriptedModel(_chat_reply)


class Touch:
    """Proposes a file write, so the chat's policy asks first."""

    spec = al.ToolSpec(
        "touch",
        "Touch a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(request.input["path"])]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"touched {request.input['path']}"


class Boom:
    """Raises, to show how a failing tool is reported."""

    spec = al.ToolSpec("boom", "Always fails.", {"type": "object", "properties": {}})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        raise ValueError("the boom tool always fails")


class Book:
    """Asks the host which seat (a question with resume data); records how each run ended."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        question = al.tools.Question(
            "seat",
            "Which seat?",
            {"type": "object", "properties": {"seat": {"type": "string"}}},
            resume={"n": 1},
        )
        try:
            answer = await ctx.ask(question)
        except anyio.get_cancelled_exc_class():
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return f"booked {answer.content}"


def _tools() -> list[object]:
    from agentloop.cli._demo import AddTool

    return [AddTool(), Touch(), Boom(), Book()]


TOOLS = _tools()
"""``--tools cli_support:TOOLS``."""


def as_in_a_terminal() -> None:
    """Reset Ctrl-C and Ctrl-\\ to their default action, as a shell in a terminal has them
    (``preexec_fn`` of a command spawned under a pseudo-terminal).

    A suite started as a background job of a shell without job control (``cmd &``
    in a script) inherits SIGINT and SIGQUIT ignored, and so would the command
    under test: a person's Ctrl-C would never reach it.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
