"""The ``agentloop serve`` subcommand: its arguments and what it runs."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import anyio

from .._extras import install_command
from .._imports import current_directory_on_path, not_found_hint
from ..core._errors import InvalidInputError
from ._config import SERVE_MODULES, ServeConfig, new_token

__all__ = ["add_serve_parser", "run_serve"]

_SECRET_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


def add_serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``serve`` and its options on the CLI's subcommands."""
    serve = commands.add_parser("serve", help="the approval inbox: a web UI over a session store")
    serve.add_argument(
        "--store",
        required=True,
        help="a SQLite file (PATH.db or sqlite:///PATH.db) or postgresql://USER@HOST/DB "
        "(the postgres extra)",
    )
    serve.add_argument(
        "--agent",
        metavar="python:MODULE:ATTR",
        help="a function returning the Agent that resumes sessions after a decision "
        "(given the store if it takes an argument); without it decisions are only recorded",
    )
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any)")
    serve.add_argument(
        "--token", help="the access token (default: generated); or AGENTLOOP_SERVE_TOKEN"
    )
    serve.add_argument("--identity", default=None, help="who decisions are recorded as")
    serve.add_argument(
        "--identity-header", help="a trusted proxy header naming the user (e.g. X-Forwarded-User)"
    )
    serve.add_argument(
        "--approval-ttl", type=float, help="approvals expire this many seconds after the call"
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="another Host the inbox answers for (e.g. the name a reverse proxy forwards); "
        "repeatable; by default only the bound address, 127.0.0.1, localhost and [::1]",
    )
    serve.add_argument(
        "--no-worker",
        action="store_true",
        help="only record decisions; external workers advance the sessions",
    )
    serve.add_argument(
        "--agui",
        action="store_true",
        help="also answer AG-UI runs at POST /agui (needs --agent and the agui extra)",
    )


async def run_serve(arguments: argparse.Namespace, line: Callable[[str], None]) -> int:
    """Open the store, build the app, print the URL with its token, serve until interrupted."""
    import importlib

    for module in SERVE_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError:
            line(
                f"agentloop serve needs the serve extra ({module} is missing): "
                f"{install_command('serve')} (in a clone: pip install '.[serve]')"
            )
            return 2
    store_url = _store_url(arguments.store)
    from . import create_app
    from ._run import load_agent_factory, open_store, run_server
    from ._worker import load_agent

    token = arguments.token or os.environ.get("AGENTLOOP_SERVE_TOKEN") or new_token()
    if len(token) < 16:
        raise InvalidInputError("--token must be at least 16 characters")
    if arguments.approval_ttl is not None and not arguments.approval_ttl > 0:
        raise InvalidInputError(f"--approval-ttl must be > 0 seconds, got {arguments.approval_ttl}")
    if arguments.agui and not arguments.agent:
        raise InvalidInputError("--agui needs --agent: the agent that runs the AG-UI threads")
    factory = _agent_factory(arguments.agent, load_agent_factory) if arguments.agent else None
    try:
        config = _config(arguments, token)
    except ValueError as error:
        raise InvalidInputError(f"--allowed-host: {error}") from None
    async with open_store(store_url) as (store, audit):
        agent = load_agent(factory, store) if factory is not None else None
        app = create_app(store, config=config, audit=audit, agent=agent, agui=arguments.agui)
        if agent is None:
            line("no --agent: decisions are recorded; external workers resume the sessions")
        elif arguments.no_worker:
            line("--no-worker: decisions are recorded; external workers resume the sessions")

        def started(base: str) -> None:
            line(f"agentloop inbox on {arguments.store}")
            line(f"open {base}/?token={token}")
            if arguments.agui:
                line(f"AG-UI endpoint: POST {base}/agui (Authorization: Bearer TOKEN)")

        try:
            await run_server(app, host=arguments.host, port=arguments.port, started=started)
        except anyio.get_cancelled_exc_class():
            raise
    return 0


def _config(arguments: argparse.Namespace, token: str) -> ServeConfig:
    """The server's settings from the command line (``ValueError`` for a bad value)."""
    return ServeConfig(
        token=token,
        identity=arguments.identity or os.environ.get("USER") or "operator",
        identity_header=arguments.identity_header,
        approval_ttl=arguments.approval_ttl,
        worker=not arguments.no_worker,
        allowed_hosts=tuple(arguments.allowed_host),
        secrets=tuple(v for k in _SECRET_VARIABLES if (v := os.environ.get(k))),
    )


def _store_url(value: str) -> str:
    """``--store`` (a path or URL, checked now) as the URL ``open_store`` takes."""
    from ..cli._store import require_postgres
    from ..store._location import parse_store_location

    location = parse_store_location(value)
    if location.kind == "postgres":
        require_postgres()
        return location.target
    return "sqlite:///" + os.path.abspath(location.target)


def _agent_factory(
    spec: str, load: Callable[[str], Callable[..., object]]
) -> Callable[..., object]:
    """``--agent python:MODULE:ATTR``, its MODULE found from the current directory first."""
    current_directory_on_path()
    try:
        return load(spec)
    except InvalidInputError as error:
        module_name = spec.removeprefix("python:").partition(":")[0]
        if f"No module named {module_name.partition('.')[0]!r}" not in str(error):
            raise
        raise InvalidInputError(f"{error}; {not_found_hint(module_name)}") from None
