"""Opening what ``agentloop serve`` is given (a store URL, an agent spec) and running uvicorn."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from ..core._errors import InvalidInputError
from ..loop._agent import Agent
from ..loop._session_store import SessionStore
from ._audit import AuditLog
from ._audit_sql import PostgresAuditLog, SqliteAuditLog

__all__ = ["load_agent_factory", "open_store", "run_server"]


@asynccontextmanager
async def open_store(url: str) -> AsyncIterator[tuple[SessionStore, AuditLog]]:
    """The store and audit log named by ``sqlite:///PATH`` or ``postgresql://...``.

    As in SQLAlchemy, ``sqlite:///sessions.db`` is relative to the current
    directory and ``sqlite:////srv/sessions.db`` (four slashes) absolute.
    """
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        path = path[1:] if path.startswith("/") else path
        if not path or path == "/":
            raise InvalidInputError(f"--store {url!r}: expected sqlite:///PATH.db")
        from ..store import SqliteSessionStore

        async with SqliteSessionStore(Path(path)) as sqlite_store:
            yield sqlite_store, SqliteAuditLog(Path(path))
        return
    if url.startswith(("postgresql://", "postgres://")):
        from ..store import PostgresSessionStore

        async with PostgresSessionStore(url) as postgres_store:
            yield postgres_store, PostgresAuditLog(url)
        return
    raise InvalidInputError(
        f"--store {url!r}: expected sqlite:///PATH.db or postgresql://USER@HOST/DB"
    )


def load_agent_factory(spec: str) -> Callable[..., Any]:
    """The callable named by ``python:MODULE:ATTR`` (it returns an ``Agent``)."""
    module_name, colon, attribute = spec.removeprefix("python:").partition(":")
    if not spec.startswith("python:") or not colon or not module_name or not attribute:
        raise InvalidInputError(f"--agent {spec!r}: expected python:MODULE:ATTR")
    try:
        value: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise InvalidInputError(f"--agent {spec!r}: {error}") from None
    if isinstance(value, Agent):
        agent = value
        return lambda: agent
    if not callable(value):
        raise InvalidInputError(f"--agent {spec!r}: {attribute} is not callable")
    return value  # type: ignore[no-any-return]


async def run_server(
    app: Any,
    *,
    host: str,
    port: int,
    started: Callable[[str], None],
    graceful_timeout: float = 2.0,
) -> None:
    """Serve ``app`` with uvicorn until cancelled; ``started(base_url)`` once it listens."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=int(graceful_timeout) or 1,
            lifespan="on",
        )
    )
    async with anyio.create_task_group() as group:

        async def announce() -> None:
            while not server.started:  # noqa: ASYNC110 (uvicorn offers no event)
                await anyio.sleep(0.05)
            socket = server.servers[0].sockets[0]
            bound_host, bound_port = socket.getsockname()[:2]
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            started(f"http://{shown}:{bound_port}")

        group.start_soon(announce)
        try:
            await server.serve()
        finally:
            group.cancel_scope.cancel()
