"""``agentloop chat``: an interactive session over ``agentloop.stream``.

The session keeps the last :class:`RunResult`; each message runs on its
continuation. Approvals are asked as ``approve? [y/n/e(dit)]`` (the demo
uses the same prompt). Ctrl-C (routed here by ``_main``) interrupts the running turn
through the agent's :class:`CancellationController`, not the program.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import attrs

from ..core._cancellation import CancellationController
from ..core._errors import AgentLoopError, InvalidInputError
from ..core._items import Item, ItemKind, Usage
from ..core._transcript import find_violation
from ..host._run import RunResult, RunStopReason
from ..host._stream import stream
from ..loop._agent import Agent
from ..loop._steps import ApprovalDecision, ApprovalRequest
from ..model._config import SessionConfig
from ..model._protocol import ModelAdapter
from ..permissions._policies import KindPolicy, PathPolicy, PolicyChain
from ..tools._registry import ToolRegistry, ToolSource
from ._render import Renderer, format_arguments, format_usage

__all__ = [
    "APPROVAL_PROMPT",
    "COMMANDS",
    "ChatSession",
    "ReadLine",
    "ask_approval",
    "auto_approver",
    "build_chat_agent",
    "load_tools",
    "open_model",
    "parse_edited_input",
]

COMMANDS = "/quit  /history  /usage  /help"
CHAT_PROMPT = "you> "
APPROVAL_PROMPT = "approve? [y/n/e(dit)] "

ReadLine: TypeAlias = Callable[[str], Awaitable[str | None]]
"""Shows a prompt and returns the line typed (``None`` at end of input)."""


def parse_edited_input(text: str, original: Any) -> Any:
    """The edited input: JSON text, or ``original`` when ``text`` is blank.

    Raises ``ValueError`` naming the problem when the text is not a JSON object.
    """
    if not text.strip():
        return original
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


async def ask_approval(
    renderer: Renderer, read_line: ReadLine, request: ApprovalRequest
) -> ApprovalDecision:
    """Ask until the answer is y, n or e; end of input denies."""
    while True:
        answer = await read_line(APPROVAL_PROMPT)
        if answer is None:
            return ApprovalDecision.deny("no answer: the input ended")
        choice = answer.strip().lower()
        if choice in ("y", "yes"):
            return ApprovalDecision.approve()
        if choice in ("n", "no"):
            reason = await read_line("reason (optional): ")
            return ApprovalDecision.deny(reason.strip() if reason and reason.strip() else None)
        if choice in ("e", "edit"):
            decision = await _ask_edit(renderer, read_line, request)
            if decision is not None:
                return decision
            continue
        renderer.error(f"please answer y, n or e (got {answer.strip()!r})")


async def _ask_edit(
    renderer: Renderer, read_line: ReadLine, request: ApprovalRequest
) -> ApprovalDecision | None:
    text = await read_line(f"new input as JSON (blank keeps {format_arguments(request.input)}): ")
    if text is None:
        return ApprovalDecision.deny("no answer: the input ended")
    try:
        edited = parse_edited_input(text, request.input)
    except ValueError as error:
        renderer.error(f"cannot use that input: {error}; try again")
        return None
    if edited == request.input:
        return ApprovalDecision.approve()
    return ApprovalDecision.approve_with(edited)


def auto_approver(renderer: Renderer) -> Callable[[ApprovalRequest], ApprovalDecision]:
    """An approver for ``--yes``: approves everything and says so."""

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        renderer.line(f"{APPROVAL_PROMPT}y  (--yes)", "magenta")
        return ApprovalDecision.approve()

    return approve


def load_tools(spec: str) -> ToolSource:
    """``module:attr`` -> a tool source: a ToolSource, one Tool, or a list of Tools."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise InvalidInputError(
            f"--tools {spec!r}: expected MODULE:ATTRIBUTE (e.g. mytools:registry)"
        )
    try:
        value: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise InvalidInputError(f"--tools {spec!r}: cannot import it: {error}") from None
    if hasattr(value, "specs") and hasattr(value, "get"):
        source: ToolSource = value
        return source
    tools = value if isinstance(value, list | tuple) else [value]
    registry = ToolRegistry(spec)
    for tool in tools:
        if not hasattr(tool, "spec") or not hasattr(tool, "invoke"):
            raise InvalidInputError(
                f"--tools {spec!r}: {tool!r} is not a tool (no spec/invoke); expected a "
                "ToolSource, a Tool or a list of Tools"
            )
        registry.add(tool)
    return registry


@asynccontextmanager
async def open_model(spec: str, renderer: Renderer) -> AsyncIterator[ModelAdapter]:
    """``local`` (the embedded toy model), ``python:MODULE:ATTR`` or ``PROVIDER:MODEL``."""
    if spec == "local":
        from ..local import LocalServer

        server = LocalServer()
        renderer.note(f"starting the local toy model (SmolLM2-135M) on {server.base_url} ...")
        async with server:
            renderer.note("ready; it is a 135M-parameter toy: fluent, often wrong")
            yield server.model()
        return
    if spec.startswith("python:"):
        module_name, colon, attribute = spec.removeprefix("python:").partition(":")
        if not colon:
            raise InvalidInputError(f"--model {spec!r}: expected python:MODULE:ATTRIBUTE")
        try:
            value: Any = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise InvalidInputError(f"--model {spec!r}: cannot import it: {error}") from None
        yield value() if callable(value) and not hasattr(value, "start_session") else value
        return
    from ..providers import from_string

    yield from_string(spec)


def build_chat_agent(
    model: ModelAdapter, tools: ToolSource | None, controller: CancellationController
) -> Agent:
    """Reads under the working directory run; other file access, shell and network ask first."""
    builder = (
        Agent.builder()
        .model(model)
        .permissions(
            PolicyChain(
                PathPolicy(allowed_roots=["."], outside="approve"),
                KindPolicy(require_approval=["shell.*", "network.*", "filesystem.write"]),
            )
        )
        .cancellation(controller.handle())
        .transcript([Item.text(ItemKind.SYSTEM, "You are a helpful assistant.")])
    )
    if tools is not None:
        builder = builder.add_tool_source(tools)
    return builder.build()


class ChatSession:
    """The chat's logic: commands, turns, approvals, Ctrl-C; rendering goes to ``renderer``."""

    def __init__(
        self,
        agent: Agent,
        renderer: Renderer,
        read_line: ReadLine,
        controller: CancellationController,
        *,
        session: str = "chat",
        approve_all: bool = False,
        on_result: Callable[[RunResult], None] | None = None,
    ) -> None:
        self.agent = agent
        self.renderer = renderer
        self.read_line = read_line
        self.controller = controller
        self.config = SessionConfig(session)
        self.approve_all = approve_all
        self.on_result = on_result
        self.last: RunResult | None = None
        self.usage = Usage()
        self.turn_running = False

    @property
    def transcript(self) -> tuple[Item, ...]:
        """The conversation so far."""
        return self.last.transcript if self.last is not None else self.agent.transcript

    async def loop(self) -> int:
        """Read lines until ``/quit`` or the end of input."""
        self.renderer.note(f"commands: {COMMANDS}; Ctrl-C cancels a running turn")
        while True:
            line = await self.read_line(CHAT_PROMPT)
            if line is None or line.strip() == "/quit":
                self.renderer.note("bye")
                return 0
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                self.command(text)
            else:
                await self.ask(text)

    def command(self, text: str) -> None:
        """Run a slash command."""
        if text == "/history":
            count = self.renderer.transcript(self.transcript)
            self.renderer.note(f"({count} items)")
        elif text == "/usage":
            self.renderer.line(f"usage: {format_usage(self.usage)}")
        elif text == "/help":
            self.renderer.note(f"commands: {COMMANDS}")
        else:
            self.renderer.error(f"unknown command {text!r}; commands: {COMMANDS}")

    async def ask(self, text: str) -> RunResult | None:
        """Run one message through the agent, rendering as it streams."""
        agent = self.last.continuation() if self.last is not None else self.agent
        self.turn_running = True
        try:
            async with stream(agent, text, approve=self.approve, config=self.config) as events:
                async for item in events:
                    self.renderer.item(item)
                result = await events.result()
        except AgentLoopError as error:
            self.renderer.error(f"error: {error}")
            return None
        finally:
            self.turn_running = False
            self.renderer.end_inline()
        self.usage = self.usage + result.usage
        if result.stop_reason is RunStopReason.MAX_STEPS:
            self.renderer.error(f"stopped after {result.steps} steps (max_steps)")
        if find_violation(result.transcript) is None:
            self.last = result
        if self.on_result is not None:
            self.on_result(result)
        return result

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running turn, or explain how to leave."""
        if self.turn_running:
            self.renderer.note("(Ctrl-C: cancelling the current turn)")
            self.controller.interrupt()
        else:
            self.renderer.note("(Ctrl-C cancels a running turn; type /quit to leave)")

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Answer ``request``: yes with ``--yes``, else ask at the terminal."""
        if self.approve_all:
            return ApprovalDecision.approve()
        return await ask_approval(self.renderer, self.read_line, request)


def evolve_session(session: ChatSession, transcript: tuple[Item, ...]) -> None:
    """Start ``session`` from a stored transcript (used when resuming)."""
    session.agent = attrs.evolve(session.agent, transcript=transcript)
