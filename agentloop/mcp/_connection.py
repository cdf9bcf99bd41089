"""One connection to an MCP server and the bounded requests sent over it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import attrs
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from ._errors import McpCallError, McpConnectionError, McpError

__all__ = ["Connection", "describe", "is_lost", "is_modern", "lists_change", "request", "usable"]


@attrs.define(eq=False)
class Connection:
    """One session with the server, owned by a task of the source's task group."""

    server: str
    number: int
    stop: anyio.Event = attrs.field(factory=anyio.Event)
    done: anyio.Event = attrs.field(factory=anyio.Event)
    client: Client | None = None
    tasks: anyio.abc.TaskGroup | None = None
    lost: str | None = None  # why it ended, if it was not stopped
    relist_after_calls: bool = False  # 2026 era: changes are not ordered with responses
    relist_features_after_calls: bool = False  # the same, for the feature tools
    max_message_size: int | None = attrs.field(default=None, kw_only=True)

    def drop(self, why: str) -> None:
        """Stop this connection (``why`` it ended, if nothing said so first)."""
        if self.lost is None:
            self.lost = why
        self.stop.set()


async def request(
    connection: Connection,
    operation: str,
    limit: float,
    send: Callable[[Client], Awaitable[Any]],
    timer: Callable[[anyio.CancelScope], None] | None = None,
) -> Any:
    """``send`` on the connection, bounded by ``limit`` seconds and the connection's life;
    raises :class:`McpError` (and drops the connection when it is gone or hung).
    ``timer`` receives the scope that bounds it (the time a question waits for the
    host is added to its deadline)."""
    client = connection.client
    server = connection.server
    if client is None or connection.done.is_set():
        raise McpConnectionError(
            f"MCP server {server!r} is not connected ({connection.lost or 'closed'})",
            server=server,
        )
    outcome, failure, timed_out = await _send_bounded(connection, client, limit, send, timer)
    if outcome:
        return outcome[0]
    if timed_out:
        connection.drop(f"{operation} timed out")
        raise McpCallError(
            f"MCP server {server!r} did not answer {operation} within {limit:g} s; the "
            "call was cancelled and the connection will be reopened on the next call",
            server=server,
        )
    if isinstance(failure, McpError):  # ours, already saying what failed
        raise failure
    if failure is not None:
        raise _failed(connection, operation, failure) from failure
    raise McpConnectionError(
        f"MCP server {server!r} went away during {operation}: "
        f"{connection.lost or 'the connection closed'}; the next call reconnects",
        server=server,
    )


async def _send_bounded(
    connection: Connection,
    client: Client,
    limit: float,
    send: Callable[[Client], Awaitable[Any]],
    timer: Callable[[anyio.CancelScope], None] | None,
) -> tuple[list[Any], Exception | None, bool]:
    """Run ``send`` until it ends, ``limit`` passes or the connection ends: its answer
    (a list of none or one), the error it raised, and whether the limit passed."""
    outcome: list[Any] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await connection.done.wait()
            group.cancel_scope.cancel()

        async def run() -> None:
            try:
                outcome.append(await send(client))
            except Exception as error:  # malformed answers surface as validation errors
                failure.append(error)
            group.cancel_scope.cancel()

        group.start_soon(watch)
        with anyio.move_on_after(limit) as timer_scope:
            if timer is not None:
                timer(timer_scope)
            await run()
        group.cancel_scope.cancel()
    return outcome, failure[0] if failure else None, timer_scope.cancelled_caught


def _failed(connection: Connection, operation: str, error: Exception) -> McpError:
    """The :class:`McpError` for ``send`` raising ``error`` (dropping the connection
    when the error means it is gone)."""
    server = connection.server
    if _is_oversized(connection, error):
        return McpCallError(
            f"MCP server {server!r} answered {operation} with a message larger than "
            f"max_message_size ({connection.max_message_size} bytes); it was not read "
            "(the connection stays open): raise the source's max_message_size to read it",
            server=server,
        )
    if is_lost(connection, error):
        connection.drop(describe(error))
        return McpConnectionError(
            f"MCP server {server!r} went away during {operation}: "
            f"{connection.lost or describe(error)}; the next call reconnects",
            server=server,
        )
    return McpCallError(
        f"MCP server {server!r} failed {operation}: {describe(error)}", server=server
    )


def usable(connection: Connection | None) -> bool:
    """Whether ``connection`` is open and not being closed."""
    return connection is not None and not connection.stop.is_set() and not connection.done.is_set()


def is_lost(connection: Connection, error: BaseException) -> bool:
    """Whether ``error`` means the connection is gone (not just this call failed)."""
    if connection.done.is_set():
        return True
    if isinstance(error, MCPError):
        return error.code == mcp_types.CONNECTION_CLOSED
    return isinstance(error, OSError | anyio.BrokenResourceError | anyio.ClosedResourceError)


def _is_oversized(connection: Connection, error: BaseException) -> bool:
    """Whether ``error`` is the SDK giving up on one streamable HTTP answer whose event
    was over ``max_message_size``: that request failed, the session did not."""
    return (
        not connection.done.is_set()
        and isinstance(error, MCPError)
        and error.code == mcp_types.CONNECTION_CLOSED
        and f"exceeded the {connection.max_message_size} byte limit" in error.message
    )


def is_modern(client: Client) -> bool:
    """Whether the negotiated protocol is of the 2026 era."""
    return client.protocol_version >= "2026"


def lists_change(client: Client) -> bool:
    """Whether the server advertises ``tools.listChanged``."""
    tools = client.server_capabilities.tools
    return bool(tools is not None and tools.list_changed)


def describe(error: BaseException) -> str:
    """``Type: message`` (each of a group's errors, joined by ``; ``)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
