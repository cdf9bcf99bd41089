"""The ``agentloop`` command: argument parsing and wiring; no agent logic lives here.

``main(argv, console=..., read_line=...)`` is what tests call: the console
and the line reader are injectable, and nothing here touches ``sys.exit``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
from rich.console import Console
from rich.text import Text

from ..core._cancellation import CancellationController
from ..core._errors import AgentLoopError
from ..core._items import ItemKind
from ..core._transcript import find_violation
from ..host._run import Approver
from ..loop._steps import ApprovalRequest
from ._chat import (
    ChatSession,
    ReadLine,
    ask_approval,
    auto_approver,
    build_chat_agent,
    evolve_session,
    load_tools,
    open_model,
)
from ._demo import run_local_tour, run_scripted_tour
from ._render import Renderer, format_arguments

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentloop", description="Try agentloop: a tour, a chat, a transcript replay."
    )
    parser.add_argument(
        "--verbose", action="store_true", help="show agentloop's log lines (warnings always show)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser("demo", help="a tour: tool calls, an approval, streamed tokens")
    demo.add_argument(
        "--scripted", action="store_true", help="the instant offline tour on a scripted model"
    )
    demo.add_argument("--yes", action="store_true", help="answer approval prompts with yes")
    chat = commands.add_parser("chat", help="an interactive chat with an agent")
    chat.add_argument(
        "--model",
        default="local",
        help="'local' (the embedded 135M toy), PROVIDER:MODEL (e.g. openai:gpt-4o-mini), "
        "or python:MODULE:ATTR (a ModelAdapter or a function returning one)",
    )
    chat.add_argument("--tools", metavar="MODULE:ATTR", help="a ToolSource, Tool or list of Tools")
    chat.add_argument("--session", default="chat", help="the session id (default: chat)")
    chat.add_argument("--store", metavar="PATH.db", help="persist the session in this SQLite file")
    chat.add_argument("--yes", action="store_true", help="approve every tool call")
    replay = commands.add_parser("replay", help="render a stored transcript (JSONL)")
    replay.add_argument("path", help="one agentloop.unstructure(item) JSON object per line")
    from ..serve._cli import add_serve_parser

    add_serve_parser(commands)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    console: Console | None = None,
    read_line: ReadLine | None = None,
) -> int:
    """Run the ``agentloop`` command; returns the exit status."""
    try:
        arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit:
        return int(exit.code or 0)
    _quiet_library_logs(arguments.verbose)
    console = console or Console(highlight=False)
    renderer = Renderer(console)
    reader = read_line or _terminal_reader(console)
    try:
        status: int = anyio.run(_dispatch, arguments, renderer, reader, read_line is None)
    except KeyboardInterrupt:
        renderer.error("interrupted")
        return 130
    except AgentLoopError as error:
        renderer.error(f"agentloop {arguments.command}: {error}")
        return 1
    return status


def _quiet_library_logs(verbose: bool) -> None:
    """Show agentloop's own log lines only with ``--verbose`` (warnings always)."""
    level = logging.DEBUG if verbose else logging.WARNING
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))


async def _dispatch(
    arguments: argparse.Namespace, renderer: Renderer, read_line: ReadLine, terminal: bool
) -> int:
    if arguments.command == "demo":
        approve = _approver(renderer, read_line, arguments.yes)
        if arguments.scripted:
            return await run_scripted_tour(renderer, approve)
        return await run_local_tour(renderer, approve)
    if arguments.command == "replay":
        return _replay(renderer, arguments.path)
    if arguments.command == "serve":
        from ..serve._cli import run_serve

        return await run_serve(arguments, renderer.line)
    return await _chat(arguments, renderer, read_line, terminal)


def _approver(renderer: Renderer, read_line: ReadLine, yes: bool) -> Approver:
    if yes:
        return auto_approver(renderer)

    async def ask(request: ApprovalRequest) -> Any:
        return await ask_approval(renderer, read_line, request)

    return ask


def _replay(renderer: Renderer, path: str) -> int:
    from ..store import import_jsonl

    if not Path(path).is_file():
        renderer.error(f"agentloop replay: no file {path!r}; expected a JSONL transcript")
        return 2
    items = import_jsonl(path)
    renderer.note(f"replaying {path} ({len(items)} items)")
    renderer.transcript(items)
    violation = find_violation(items)
    if violation is not None:
        renderer.error(f"note: the transcript is not provider-valid: {violation.message}")
    return 0


async def _chat(
    arguments: argparse.Namespace, renderer: Renderer, read_line: ReadLine, terminal: bool
) -> int:
    tools = load_tools(arguments.tools) if arguments.tools else None
    controller = CancellationController()
    async with open_model(arguments.model, renderer) as model:
        agent = build_chat_agent(model, tools, controller)
        store: Any = None
        if arguments.store:
            from ..store import SqliteSessionStore

            store = SqliteSessionStore(arguments.store)
            agent = _with_store(agent, store)
        session = ChatSession(
            agent,
            renderer,
            read_line,
            controller,
            session=arguments.session,
            approve_all=arguments.yes,
        )
        try:
            if store is not None and not await _load_session(store, session, renderer):
                return 2
            if not terminal:
                return await session.loop()
            return await _with_ctrl_c(session)
        finally:
            if store is not None:
                await store.aclose()


def _with_store(agent: Any, store: Any) -> Any:
    import attrs

    return attrs.evolve(agent, store=store)


async def _load_session(store: Any, session: ChatSession, renderer: Renderer) -> bool:
    session_id = session.config.session_id
    transcript = await store.transcript(session_id)
    if transcript is None:
        renderer.note(f"new session {session_id!r} in {store.path}")
        return True
    if find_violation(transcript) is not None:
        # It stopped inside a turn (killed, or quit at an approval): finish that
        # turn from its checkpoint first; started calls come back as in doubt.
        renderer.note(f"session {session_id!r} stopped inside a turn; finishing it first")
        transcript = await _finish_interrupted_turn(session, renderer)
    evolve_session(session, tuple(transcript))
    renderer.note(f"resumed session {session_id!r}: {len(transcript)} items")
    return True


async def _finish_interrupted_turn(session: ChatSession, renderer: Renderer) -> list[Any]:
    driver = await session.agent.resume(session_id=session.config.session_id)
    step = await driver.run_until_blocked()
    while isinstance(step, ApprovalRequest):
        renderer.line(
            f"approval pending from the last run: {step.tool_name}({format_arguments(step.input)})"
        )
        decision = await session.approve(step)
        driver.resolve_approval_for(step.call_id, decision)
        step = await driver.run_until_blocked()
    items = list(driver.snapshot().transcript)
    if items and items[-1].kind is ItemKind.ASSISTANT:
        renderer.line(f"assistant> {items[-1].text_content}")
    return items


async def _with_ctrl_c(session: ChatSession) -> int:
    """Route SIGINT to ``session.interrupt()`` while the chat runs."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async with anyio.create_task_group() as group:

            async def route() -> None:
                async for _signal in signals:
                    session.interrupt()

            group.start_soon(route)
            status = await session.loop()
            group.cancel_scope.cancel()
    return status


def _terminal_reader(console: Console) -> ReadLine:
    read: Callable[[Text], str] = console.input

    async def read_line(prompt: str) -> str | None:
        try:  # Text: a prompt like "[y/n/e(dit)]" is not rich markup
            return await anyio.to_thread.run_sync(read, Text(prompt), abandon_on_cancel=True)
        except EOFError:
            return None

    return read_line
