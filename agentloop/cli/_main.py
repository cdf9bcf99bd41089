"""The ``agentloop`` command: argument parsing and wiring; no agent logic lives here.

``main(argv, console=..., read_line=...)`` is what tests call: the console
and the line reader are injectable, and nothing here touches ``sys.exit``.
Exit statuses: 0 done; 1 a failure while running (the model server would
not start, a store error); 2 the command could not start (bad arguments or
``--model``/``--tools`` values, a missing or unreadable file, no local model
server); 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog
from rich.console import Console

from .._extras import missing_extra_message
from ..core._cancellation import CancellationController
from ..core._errors import AgentLoopError, InvalidInputError
from ..core._items import ItemKind
from ..core._transcript import find_violation
from ..host._run import Approver
from ..local._install import LocalServerNotInstalledError
from ..loop._release import release_dropped
from ..loop._steps import ApprovalRequest, CallInDoubt, CallQuestion
from ._chat import (
    CHAT_MAX_TOKENS,
    ChatSession,
    ReadLine,
    ask_approval,
    auto_approver,
    build_chat_agent,
    evolve_session,
    load_tools,
    open_model,
)
from ._demo import run_demo
from ._render import Renderer, format_arguments
from ._replay import EXIT_USAGE, replay
from ._store import open_session_store, sqlite_argument
from ._terminal import EXIT_INTERRUPTED, CtrlC, TerminalReader

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentloop", description="Try agentloop: a tour, a chat, a transcript replay."
    )
    verbose = "show agentloop's log lines and tracebacks (on stderr)"
    parser.add_argument("--verbose", action="store_true", help=verbose)
    parser.add_argument("--version", action="version", version=f"agentloop {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo", parents=[common], help="a tour: tool calls, an approval, streamed tokens"
    )
    demo.add_argument(
        "--scripted", action="store_true", help="the instant offline tour on a scripted model"
    )
    demo.add_argument("--yes", action="store_true", help="answer approval prompts with yes")
    demo.add_argument(
        "--store",
        metavar="PATH.db",
        help="save the session in this SQLite file, a path or sqlite:///PATH.db (default: "
        "demo.db in agentloop's cache directory, $AGENTLOOP_CACHE_DIR or ~/.cache/agentloop)",
    )
    chat = commands.add_parser("chat", parents=[common], help="an interactive chat with an agent")
    chat.add_argument("--model", default="local", help=MODEL_HELP)
    chat.add_argument("--tools", metavar="MODULE:ATTR", help="a ToolSource, Tool or list of Tools")
    chat.add_argument("--session", default="chat", help="the session id (default: chat)")
    chat.add_argument("--store", metavar="STORE", help=STORE_HELP)
    chat.add_argument("--yes", action="store_true", help="approve every tool call")
    chat.add_argument(
        "--max-tokens",
        type=int,
        default=CHAT_MAX_TOKENS,
        help=f"the longest answer, in tokens (default {CHAT_MAX_TOKENS}); a longer one ends "
        "'max_tokens'",
    )
    chat.add_argument(
        "--max-context-tokens",
        type=_positive_int,
        metavar="N",
        help="compact the conversation to stay within N tokens per request",
    )
    replay = commands.add_parser(
        "replay",
        parents=[common],
        help="render a transcript: a JSONL file or a session store (chat --store)",
    )
    replay.add_argument(
        "path",
        help="a JSONL transcript (export_jsonl, /export), a store .db, or a store URL "
        "(sqlite:///PATH.db, postgresql://USER@HOST/DB)",
    )
    replay.add_argument("--session", help="which session of a store (needed if it holds several)")
    replay.add_argument(
        "--steps", action="store_true", help="list the session's saved steps (its history)"
    )
    replay.add_argument(
        "--step",
        type=_positive_int,
        metavar="N",
        help="render the session as it was saved at step N (see --steps)",
    )
    from ..serve._cli import add_serve_parser

    add_serve_parser(commands)
    return parser


STORE_HELP = (
    "persist the session in this store: a SQLite file (PATH.db or sqlite:///PATH.db) or "
    "postgresql://USER@HOST/DB (the postgres extra)"
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


MODEL_HELP = (
    "'local' (the embedded 135M toy, the default), PROVIDER:MODEL (openai:gpt-4o-mini, "
    "anthropic:claude-sonnet-4-5, openai-compatible:http://HOST/v1#MODEL), or "
    "python:MODULE:ATTR (a ModelAdapter or a function returning one)"
)


def _version() -> str:
    from .. import __version__

    return __version__


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
    configure_logging(arguments.verbose)
    console = console or Console(highlight=False)
    renderer = Renderer(console)
    ctrl_c = CtrlC(renderer, None) if read_line is None else None
    reader = read_line or TerminalReader(console)
    if ctrl_c is not None:
        reader = ctrl_c.prompts(reader)
    try:
        status: int = anyio.run(_run_unwrapped, arguments, renderer, reader, ctrl_c)
    except KeyboardInterrupt:
        renderer.error("interrupted")
        return EXIT_INTERRUPTED
    except (LocalServerNotInstalledError, InvalidInputError) as error:
        renderer.error(f"agentloop {arguments.command}: {error}")
        return EXIT_USAGE
    except ModuleNotFoundError as error:
        message = missing_extra_message(error, f"agentloop {arguments.command}")
        if message is None:
            raise
        renderer.error(message)
        return EXIT_USAGE
    except AgentLoopError as error:
        renderer.error(f"agentloop {arguments.command}: {error}")
        if arguments.verbose:
            renderer.traceback(error)
        return 1
    return status


async def _run_unwrapped(
    arguments: argparse.Namespace, renderer: Renderer, reader: ReadLine, ctrl_c: CtrlC | None
) -> int:
    """``_run``, with an error that a task group wrapped alone re-raised as itself."""
    try:
        return await _run(arguments, renderer, reader, ctrl_c)
    except BaseExceptionGroup as group:
        alone: BaseException = group
        while isinstance(alone, BaseExceptionGroup) and len(alone.exceptions) == 1:
            alone = alone.exceptions[0]
        if isinstance(alone, AgentLoopError) or missing_extra_message(alone) is not None:
            raise alone from group
        raise


def configure_logging(verbose: bool) -> None:
    """agentloop's log lines on stderr: only critical ones by default, all with ``--verbose``.

    Tracebacks are plain (no locals), so a tool that raises shows one
    readable traceback, not pages.
    """
    level = logging.DEBUG if verbose else logging.CRITICAL
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


async def _run(
    arguments: argparse.Namespace, renderer: Renderer, read_line: ReadLine, ctrl_c: CtrlC | None
) -> int:
    if ctrl_c is None:
        return await _dispatch(arguments, renderer, read_line, ctrl_c)
    return await ctrl_c.run(lambda: _dispatch(arguments, renderer, read_line, ctrl_c))


async def _dispatch(
    arguments: argparse.Namespace, renderer: Renderer, read_line: ReadLine, ctrl_c: CtrlC | None
) -> int:
    if arguments.command == "demo":
        approve = _approver(renderer, read_line, arguments.yes)
        given = arguments.store
        store = Path(sqlite_argument(given, "demo")) if given is not None else None
        return await run_demo(
            renderer, approve, scripted=arguments.scripted, store_path=store, ctrl_c=ctrl_c
        )
    if arguments.command == "replay":
        return await replay(
            renderer,
            arguments.path,
            arguments.session,
            step=arguments.step,
            list_steps=arguments.steps,
        )
    if arguments.command == "serve":
        from ..serve._cli import run_serve

        return await run_serve(arguments, renderer.line)
    return await _chat(arguments, renderer, read_line, ctrl_c)


def _approver(renderer: Renderer, read_line: ReadLine, yes: bool) -> Approver:
    if yes:
        return auto_approver(renderer)

    async def ask(request: ApprovalRequest) -> Any:
        return await ask_approval(renderer, read_line, request)

    return ask


async def _chat(
    arguments: argparse.Namespace, renderer: Renderer, read_line: ReadLine, ctrl_c: CtrlC | None
) -> int:
    tools = load_tools(arguments.tools) if arguments.tools else None
    if arguments.store is None:
        return await _chat_with(arguments, renderer, read_line, ctrl_c, tools, None, None)
    store, location = open_session_store(arguments.store)  # a bad value is refused here
    try:
        await store.open()  # and an unreadable store now, before a model starts
        archive_path = location.target if location.kind == "sqlite" else None
        return await _chat_with(arguments, renderer, read_line, ctrl_c, tools, store, archive_path)
    finally:
        await store.aclose()


async def _chat_with(
    arguments: argparse.Namespace,
    renderer: Renderer,
    read_line: ReadLine,
    ctrl_c: CtrlC | None,
    tools: Any,
    store: Any,
    archive_path: str | None,
) -> int:
    controller = CancellationController()
    if ctrl_c is not None:
        ctrl_c.controller = controller
    async with open_model(arguments.model, renderer, max_tokens=arguments.max_tokens) as model:
        agent = build_chat_agent(
            model,
            tools,
            controller,
            max_context_tokens=arguments.max_context_tokens,
            archive_path=archive_path,
        )
        if store is not None:
            agent = _with_store(agent, store)
        session = ChatSession(
            agent,
            renderer,
            read_line,
            controller,
            session=arguments.session,
            approve_all=arguments.yes,
            ctrl_c=ctrl_c,
        )
        if store is not None and not await _load_session(store, arguments.store, session, renderer):
            return EXIT_USAGE
        return await session.loop()


def _with_store(agent: Any, store: Any) -> Any:
    import attrs

    return attrs.evolve(agent, store=store)


async def _load_session(store: Any, where: str, session: ChatSession, renderer: Renderer) -> bool:
    session_id = session.config.session_id
    transcript = await store.transcript(session_id)
    if transcript is None:
        renderer.note(f"new session {session_id!r} in {where}")
        return True
    if find_violation(transcript) is not None:
        # It stopped inside a turn (killed, or quit at an approval): finish that
        # turn from its checkpoint first; started calls come back as in doubt.
        renderer.note(f"session {session_id!r} stopped inside a turn; finishing it first")
        finished = await _finish_interrupted_turn(session, renderer, where)
        if finished is None:
            return False
        transcript = finished
    evolve_session(session, tuple(transcript))
    renderer.note(f"resumed session {session_id!r}: {len(transcript)} items")
    return True


async def _finish_interrupted_turn(
    session: ChatSession, renderer: Renderer, where: str
) -> list[Any] | None:
    """The turn finished (approvals asked at the prompt), or ``None`` when it rests on a
    question or a call in doubt, which the chat cannot answer (said on the renderer).

    The driver is released however this ends (``LoopDriver.release()``): a call of the
    turn still waiting in ``ToolContext.ask`` is cancelled, not left for the process's life.
    """
    driver = await session.agent.resume(session_id=session.config.session_id)
    try:
        return await _finish_with(driver, session, renderer, where)
    finally:
        await release_dropped(driver)


async def _finish_with(
    driver: Any, session: ChatSession, renderer: Renderer, where: str
) -> list[Any] | None:
    step = await driver.run_until_blocked()
    while isinstance(step, ApprovalRequest):
        renderer.line(
            f"approval pending from the last run: {step.tool_name}({format_arguments(step.input)})"
        )
        decision = await session.approve(step)
        driver.answer_approval_for(step.call_id, decision)
        step = await driver.run_until_blocked()
    if isinstance(step, CallQuestion | CallInDoubt):
        renderer.error(_cannot_answer(step, session.config.session_id, where))
        return None
    items = list(driver.snapshot().transcript)
    if items and items[-1].kind is ItemKind.ASSISTANT:
        renderer.line(f"assistant> {items[-1].text_content}")
    return items


def _cannot_answer(step: CallQuestion | CallInDoubt, session_id: str, where: str) -> str:
    then = (
        f"answer it in the inbox (agentloop serve --store {where}) or from your host, "
        "then chat again; the session is left as it was"
    )
    if isinstance(step, CallQuestion):
        return (
            f"session {session_id!r} waits for an answer: {step.tool_name} asks "
            f"{step.question.message!r} (question {step.id}, kind {step.question.kind}); "
            f"the chat cannot answer questions: {then}"
        )
    return (
        f"session {session_id!r} waits for call {step.call_id} ({step.tool_name}), in doubt, "
        f"to be settled, failed or run again; the chat cannot resolve it: {then}"
    )
