"""The life of one connection to an MCP server: open it, list the tools, listen, close."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any, Literal, Protocol, TextIO

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged

from .._log import get_logger
from ._asking import Asking
from ._catalog import list_tools
from ._config import McpServer
from ._connection import Connection, describe, is_modern, lists_change
from ._errors import McpConnectionError
from ._features import FEATURE_CHANGES
from ._roots import Roots
from ._task_receiver import TaskReceiver
from ._task_wire import TasksExtension
from ._transport import open_client

__all__ = ["ConnectionRunner", "close_connection"]

log = get_logger()

_CLOSE_TIMEOUT = 5.0
_LIST_CHANGED = "notifications/tools/list_changed"


class Settings(Protocol):
    """What a connection needs of its source's settings (read when it opens)."""

    server: McpServer
    protocol: Literal["auto", "legacy"]
    connect_timeout: float
    max_message_size: int | None
    stderr: TextIO | None
    roots: Roots | None
    asking: Asking


class ConnectionRunner:
    """Runs the connections of one source: ``serve`` owns one from open to close.

    ``tools_changed`` and ``features_changed`` hear the server's list changes;
    ``listen_filter`` says which a 2026-era listen stream asks for."""

    def __init__(
        self,
        settings: Settings,
        extension: TasksExtension,
        *,
        tools_changed: Callable[[Connection], None],
        features_changed: Callable[[Connection], None],
        listen_filter: Callable[[Client], dict[str, bool]],
    ) -> None:
        self._settings = settings
        self._extension = extension
        self._tools_changed = tools_changed
        self._features_changed = features_changed
        self._listen_filter = listen_filter

    async def serve(
        self,
        connection: Connection,
        *,
        task_status: anyio.abc.TaskStatus[list[mcp_types.Tool]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Own one connection: open it, list the tools, report them, then wait for stop."""
        settings = self._settings
        started = False
        scope = anyio.CancelScope(deadline=anyio.current_time() + settings.connect_timeout)
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    client = await self._enter_client(stack, connection)
                    tools = await list_tools(client, settings.server.name)
                    async with anyio.create_task_group() as tasks:
                        connection.client, connection.tasks = client, tasks
                        await self._start_listening(connection, client, tasks)
                        scope.deadline = math.inf
                        started = True
                        task_status.started(tools)
                        await connection.stop.wait()
                        tasks.cancel_scope.cancel()
            if not started:
                raise McpConnectionError(
                    f"cannot connect to MCP server {settings.server.name!r} "
                    f"({settings.server.target}): no answer within "
                    f"{settings.connect_timeout:g} s",
                    server=settings.server.name,
                )
        except Exception as error:
            if not started:
                raise
            self._lost(connection, error)
        finally:
            if started and not connection.stop.is_set() and connection.lost is None:
                connection.lost = "the server closed the connection"
            connection.client = None
            connection.done.set()

    def _lost(self, connection: Connection, error: Exception) -> None:
        """An open connection failed: say why and log it."""
        connection.lost = describe(error)
        log.warning(
            "mcp connection lost",
            server=self._settings.server.name,
            connection=connection.number,
            error=connection.lost,
        )

    async def _start_listening(
        self, connection: Connection, client: Client, tasks: anyio.abc.TaskGroup
    ) -> None:
        """On a 2026-era connection with list changes to hear, start the listen stream
        (and relist after each call: its changes are not ordered with answers)."""
        listened = self._listen_filter(client)
        if is_modern(client) and any(listened.values()):
            connection.relist_after_calls = lists_change(client)
            connection.relist_features_after_calls = (
                listened["resources_list_changed"] or listened["prompts_list_changed"]
            )
            await tasks.start(self._listen, connection)

    async def _enter_client(self, stack: AsyncExitStack, connection: Connection) -> Client:
        settings = self._settings

        async def on_message(message: Any) -> None:
            method = getattr(message, "method", None)
            if method == _LIST_CHANGED:
                self._tools_changed(connection)
            elif method in FEATURE_CHANGES:
                self._features_changed(connection)

        asking = settings.asking
        return await open_client(
            stack,
            settings.server,
            protocol=settings.protocol,
            connect_timeout=settings.connect_timeout,
            max_message_size=settings.max_message_size,
            stderr=settings.stderr,
            on_message=on_message,
            list_roots=None if settings.roots is None else settings.roots.list_roots,
            elicitation=asking.elicit if asking.elicitation else None,
            sampling=asking.sample if asking.sampling else None,
            receiver=TaskReceiver(asking) if asking.enabled else None,
            extensions=[self._extension],
        )

    async def _listen(
        self,
        connection: Connection,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """2026-era servers deliver list changes on a ``subscriptions/listen`` stream."""
        client = connection.client
        assert client is not None
        started = False
        try:
            wanted = self._listen_filter(client)
            async with client.listen(
                tools_list_changed=wanted["tools_list_changed"],
                resources_list_changed=wanted["resources_list_changed"],
                prompts_list_changed=wanted["prompts_list_changed"],
            ) as subscription:
                started = True
                task_status.started()
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        self._tools_changed(connection)
                    else:
                        self._features_changed(connection)
        except Exception as error:
            log.warning(
                "mcp listen stream ended", server=self._settings.server.name, error=describe(error)
            )
            if not started:
                task_status.started()


async def close_connection(connection: Connection | None) -> None:
    """Stop ``connection`` (if any) and wait, shielded and bounded, until it ended."""
    if connection is None:
        return
    connection.stop.set()
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
        await connection.done.wait()
