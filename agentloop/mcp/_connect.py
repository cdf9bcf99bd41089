"""Whether a source may connect: ``McpConnect`` through its checker and approver."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..permissions._requests import Allow, AskApproval, Deny, PermissionChecker
from ._config import McpServer
from ._errors import McpConnectionError
from ._permissions import McpConnect

__all__ = ["ConnectApprover", "check_connect"]

ConnectApprover = Callable[[McpConnect, AskApproval], Awaitable[bool]]
"""Asked when the source's checker wants approval to connect; returns whether to connect."""


async def check_connect(
    server: McpServer, permissions: PermissionChecker, approve_connect: ConnectApprover | None
) -> None:
    """Return when ``permissions`` allow connecting to ``server`` (or ``approve_connect``
    approved it); else raise :class:`McpConnectionError` saying why."""
    name = server.name
    request = McpConnect(name, server.target)
    decision = permissions.evaluate(request)
    if isinstance(decision, Allow):
        return
    if isinstance(decision, Deny):
        raise McpConnectionError(
            f"connecting to MCP server {name!r} was denied: {decision.message} "
            f"(code: {decision.code})",
            server=name,
        )
    if isinstance(decision, AskApproval):
        if approve_connect is None:
            raise McpConnectionError(
                f"connecting to MCP server {name!r} needs approval "
                f"({decision.summary}) and the source has no approve_connect callback; pass "
                "one, or allow mcp.connect for this server",
                server=name,
            )
        if not await approve_connect(request, decision):
            raise McpConnectionError(
                f"connecting to MCP server {name!r} was not approved", server=name
            )
        return
    raise McpConnectionError(
        f"permission checker {type(permissions).__name__} returned {decision!r} for "
        "mcp.connect; expected Allow, Deny or AskApproval",
        server=name,
    )
