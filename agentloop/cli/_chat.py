"""``agentloop chat``: an interactive session over ``agentloop.stream``.

The session keeps the last :class:`RunResult`; each message runs on its
continuation. Approvals are asked as ``approve? [y/n/e(dit)]`` (the demo
uses the same prompt). Ctrl-C (routed by ``_terminal.CtrlC``) cancels the
prompt and the running turn through the agent's
:class:`CancellationController`; a second Ctrl-C exits.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import attrs

from .._imports import import_attribute
from ..compaction import SqliteResultArchive, default_compactor
from ..core._cancellation import CancellationController
from ..core._delta import AppendText
from ..core._errors import AgentLoopError, InvalidInputError
from ..core._items import Item, ItemKind, TextPart, Usage
from ..core._transcript import find_violation
from ..host._run import RunResult, RunStopReason
from ..host._stream import stream
from ..loop._agent import Agent
from ..loop._events import ContentDelta, RunFailed
from ..loop._steps import ApprovalAnswer, ApprovalRequest
from ..model._protocol import ModelAdapter
from ..model._session_config import SessionConfig
from ..permissions._policies import PathPolicy, PolicyChain, RequestKindPolicy
from ..tools._registry import ToolRegistry, ToolSource
from ._render import Renderer, format_arguments, format_usage
from ._terminal import CtrlC, PromptInterrupted, ReadLine

__all__ = [
    "APPROVAL_PROMPT",
    "CHAT_MAX_TOKENS",
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

COMMANDS = "/quit  /history  /export FILE.jsonl  /usage  /help"
CHAT_PROMPT = "you> "
APPROVAL_PROMPT = "approve? [y/n/e(dit)] "
CHAT_MAX_TOKENS = 1024
"""The longest answer chat asks for (``--max-tokens``); a longer one ends ``max_tokens``."""
INTERRUPTED_KEY = "agentloop.cli.interrupted"


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
) -> ApprovalAnswer:
    """Ask until the answer is y, n or e; end of input denies, so does Ctrl-C (which also
    cancels the turn, so the answer is dropped)."""
    renderer.end_inline()  # no "thinking…" status or half line over the prompt
    try:
        return await _ask_approval(renderer, read_line, request)
    except PromptInterrupted:
        return ApprovalAnswer.deny("cancelled with Ctrl-C")


async def _ask_approval(
    renderer: Renderer, read_line: ReadLine, request: ApprovalRequest
) -> ApprovalAnswer:
    while True:
        answer = await read_line(APPROVAL_PROMPT)
        if answer is None:
            return ApprovalAnswer.deny("no answer: the input ended")
        choice = answer.strip().lower()
        if choice in ("y", "yes"):
            return ApprovalAnswer.approve()
        if choice in ("n", "no"):
            reason = await read_line("reason (optional): ")
            return ApprovalAnswer.deny(reason.strip() if reason and reason.strip() else None)
        if choice in ("e", "edit"):
            decision = await _ask_edit(renderer, read_line, request)
            if decision is not None:
                return decision
            continue
        renderer.error(f"please answer y, n or e (got {answer.strip()!r})")


async def _ask_edit(
    renderer: Renderer, read_line: ReadLine, request: ApprovalRequest
) -> ApprovalAnswer | None:
    text = await read_line(f"new input as JSON (blank keeps {format_arguments(request.input)}): ")
    if text is None:
        return ApprovalAnswer.deny("no answer: the input ended")
    try:
        edited = parse_edited_input(text, request.input)
    except ValueError as error:
        renderer.error(f"cannot use that input: {error}; try again")
        return None
    if edited == request.input:
        return ApprovalAnswer.approve()
    return ApprovalAnswer.approve_with(edited)


def auto_approver(renderer: Renderer) -> Callable[[ApprovalRequest], ApprovalAnswer]:
    """An approver for ``--yes``: approves everything and says so."""

    def approve(request: ApprovalRequest) -> ApprovalAnswer:
        renderer.line(f"{APPROVAL_PROMPT}y  (--yes)", "magenta")
        return ApprovalAnswer.approve()

    return approve


def load_tools(spec: str) -> ToolSource:
    """``module:attr`` -> a tool source: a ToolSource, one Tool, or a list of Tools."""
    value: Any = import_attribute("--tools", spec, prefix="", example="mytools:registry")
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
async def open_model(
    spec: str, renderer: Renderer, *, max_tokens: int = CHAT_MAX_TOKENS
) -> AsyncIterator[ModelAdapter]:
    """``local`` (the embedded toy model), ``python:MODULE:ATTR`` or ``PROVIDER:MODEL``.

    ``max_tokens`` applies to ``local`` and provider models (a ``python:``
    adapter is used as built).
    """
    if max_tokens < 1:
        raise InvalidInputError(f"--max-tokens must be at least 1, got {max_tokens}")
    if spec == "local":
        from ..local import LocalServer

        server = LocalServer()
        renderer.note(f"starting the local toy model (SmolLM2-135M) on {server.base_url} ...")
        async with server:
            renderer.note("ready; it is a 135M-parameter toy: fluent, often wrong")
            yield server.model(max_tokens=max_tokens)
        return
    if spec.startswith("python:"):
        yield _python_model(spec, import_attribute("--model", spec))
        return
    from ..providers import from_string

    try:
        model = from_string(spec, max_tokens=max_tokens)
    except InvalidInputError as error:
        raise InvalidInputError(
            f"--model {spec!r}: {error}; or 'local' (the embedded toy model), or "
            "python:MODULE:ATTR (your own ModelAdapter)"
        ) from None
    yield model


def _python_model(spec: str, value: Any) -> ModelAdapter:
    """``value`` as a model: an adapter as is; a class or factory called without arguments."""
    if isinstance(value, type) or (callable(value) and not hasattr(value, "start_session")):
        try:
            value = value()
        except Exception as error:
            raise InvalidInputError(
                f"--model {spec!r}: calling it without arguments failed: "
                f"{type(error).__name__}: {error}"
            ) from None
    if not callable(getattr(value, "start_session", None)):
        raise InvalidInputError(
            f"--model {spec!r}: a {type(value).__name__} is not a ModelAdapter "
            "(it has no start_session method)"
        )
    return cast(ModelAdapter, value)


def build_chat_agent(
    model: ModelAdapter,
    tools: ToolSource | None,
    controller: CancellationController,
    *,
    max_context_tokens: int | None = None,
    archive_path: str | None = None,
) -> Agent:
    """Reads under the working directory run; other file access, shell and network ask first.

    With ``max_context_tokens``, the conversation is compacted to stay within
    that many tokens per request (``compaction.default_compactor``); trimmed
    tool outputs are kept in ``archive_path`` (a SQLite file, usually the
    chat's store) or in memory, and the model can read them back with
    ``read_result``.
    """
    builder = (
        Agent.builder()
        .model(model)
        .permissions(
            PolicyChain(
                PathPolicy(allowed_roots=["."], outside="approve"),
                RequestKindPolicy(require_approval=["shell.*", "network.*", "filesystem.write"]),
            )
        )
        .cancellation(controller.handle())
        .transcript([Item.text(ItemKind.SYSTEM, "You are a helpful assistant.")])
    )
    if tools is not None:
        builder = builder.add_tool_source(tools)
    if max_context_tokens is not None:
        archive = SqliteResultArchive(archive_path) if archive_path is not None else None
        builder = default_compactor(max_context_tokens, archive=archive).install(builder)
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
        ctrl_c: CtrlC | None = None,
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
        self.ctrl_c = ctrl_c

    @property
    def transcript(self) -> tuple[Item, ...]:
        """The conversation so far."""
        return self.last.transcript if self.last is not None else self.agent.transcript

    async def loop(self) -> int:
        """Read lines until ``/quit`` or the end of input."""
        self.renderer.note(f"commands: {COMMANDS}; Ctrl-C cancels a running turn")
        while True:
            try:
                line = await self.read_line(CHAT_PROMPT)
            except PromptInterrupted:
                continue
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
        name, _, argument = text.partition(" ")
        if text == "/history":
            count = self.renderer.transcript(self.transcript)
            self.renderer.note(f"({count} items)")
        elif name == "/export":
            self.export(argument.strip())
        elif text == "/usage":
            self.renderer.line(f"usage: {format_usage(self.usage)}")
        elif text == "/help":
            self.renderer.note(f"commands: {COMMANDS}")
        else:
            self.renderer.error(f"unknown command {text!r}; commands: {COMMANDS}")

    def export(self, path: str) -> None:
        """``/export FILE.jsonl``: the transcript so far, for ``agentloop replay``."""
        from ..store import export_jsonl

        if not path:
            self.renderer.error("usage: /export FILE.jsonl")
            return
        try:
            count = export_jsonl(self.transcript, path)
        except (OSError, AgentLoopError) as error:
            self.renderer.error(f"cannot export to {path!r}: {error}")
            return
        self.renderer.note(f"wrote {count} items to {path}; agentloop replay {path} shows them")

    async def ask(self, text: str) -> RunResult | None:
        """Run one message through the agent, rendering as it streams."""
        agent = self.last.continuation() if self.last is not None else self.agent
        self.turn_running = True
        if self.ctrl_c is not None:
            self.ctrl_c.start_turn()
        failed = False
        shown: list[str] = []
        self.renderer.thinking()
        try:
            async with stream(agent, text, approve=self.approve, config=self.config) as events:
                async for item in events:
                    self.renderer.item(item)
                    failed = failed or isinstance(item, RunFailed)
                    if isinstance(item, ContentDelta) and isinstance(item.delta, AppendText):
                        shown.append(item.delta.text)
                result = await events.result()
        except AgentLoopError as error:
            if not failed:  # a RunFailed event already said it
                self.renderer.error(f"error: {error}")
            return None
        finally:
            self.turn_running = False
            if self.ctrl_c is not None:
                self.ctrl_c.end_turn()
            self.renderer.end_inline()
        result = _keep_interrupted_text(result, "".join(shown))
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
        if self.ctrl_c is not None:
            self.ctrl_c.press()
        elif self.turn_running:
            self.renderer.note("(Ctrl-C: cancelling the current turn)")
            self.controller.interrupt()
        else:
            self.renderer.note("(Ctrl-C cancels a running turn; type /quit to leave)")

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Answer ``request``: yes with ``--yes``, else ask at the terminal."""
        if self.approve_all:
            return ApprovalAnswer.approve()
        return await ask_approval(self.renderer, self.read_line, request)


def evolve_session(session: ChatSession, transcript: tuple[Item, ...]) -> None:
    """Start ``session`` from a stored transcript (used when resuming)."""
    session.agent = attrs.evolve(session.agent, transcript=transcript)


def _keep_interrupted_text(result: RunResult, shown: str) -> RunResult:
    """Keep the text the user saw before Ctrl-C in the transcript, before the marker.

    The loop closes a cancelled turn with an assistant item that only says it
    was interrupted; the chat puts the streamed text in front of that
    marker, so ``/history`` (and the model's next turn) shows what was said.
    """
    transcript = result.transcript
    if not shown.strip() or not transcript:
        return result
    last = transcript[-1]
    if last.kind is not ItemKind.ASSISTANT or not last.metadata.get("agentloop.interrupted"):
        return result
    kept = attrs.evolve(last, parts=(TextPart(shown), *last.parts))
    return attrs.evolve(result, transcript=(*transcript[:-1], kept))
