"""Opening the SDK's client over stdio or streamable HTTP, with the source's settings."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from typing import Any, Literal, TextIO

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.extension import ClientExtension
from mcp.client.session import (
    ClientSession,
    ElicitationFnT,
    ListRootsFnT,
    MessageHandlerFnT,
    SamplingFnT,
)
from mcp.client.streamable_http import streamable_http_client

from ._config import McpServer, StdioServer
from ._task_receiver import TaskReceiver

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "open_client"]

DEFAULT_MAX_MESSAGE_SIZE = 64 * 1024 * 1024
"""The largest message (bytes) read from a streamable HTTP event stream by default."""


async def open_client(
    stack: AsyncExitStack,
    server: McpServer,
    *,
    protocol: Literal["auto", "legacy"],
    connect_timeout: float,
    max_message_size: int | None,
    stderr: TextIO | None,
    on_message: MessageHandlerFnT,
    list_roots: ListRootsFnT | None,
    elicitation: ElicitationFnT | None = None,
    sampling: SamplingFnT | None = None,
    receiver: TaskReceiver | None = None,
    extensions: list[ClientExtension] | None = None,
) -> Client:
    """An entered :class:`Client` for ``server``; ``stack`` closes it (and its transport).

    ``max_message_size`` bounds one server-sent event of a streamable HTTP
    answer (the SDK's own default, 1 MiB, is far below what a tool result may
    be); stdio lines and plain JSON answers are read whole. ``receiver`` answers the
    server's task-augmented requests and ``tasks/*`` (it is entered on ``stack``).
    """
    transport: Any
    if isinstance(server, StdioServer):
        parameters = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env, cwd=server.cwd
        )
        transport = stdio_client(parameters, errlog=stderr or sys.stderr)
    else:
        http = httpx2.AsyncClient(
            headers=server.headers or {},
            timeout=httpx2.Timeout(connect_timeout, read=None),
        )
        await stack.enter_async_context(http)
        transport = streamable_http_client(
            server.url, http_client=http, max_sse_event_size=max_message_size
        )
    if receiver is not None:
        await stack.enter_async_context(receiver)
    client = _Client(
        transport,
        mode=protocol,
        message_handler=on_message,
        list_roots_callback=list_roots,
        elicitation_callback=elicitation,
        sampling_callback=sampling,
        cache=None,
        client_info=mcp_types.Implementation(name="agentloop", version="0"),
        extensions=extensions,
    )
    client.receiver = receiver
    return await stack.enter_async_context(client)


class _Client(Client):
    """The SDK's client, with a session that answers task requests (``receiver``)."""

    receiver: TaskReceiver | None = None

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        session = await super()._build_session(exit_stack)
        if self.receiver is not None:
            self.receiver.install(session)
        return session
