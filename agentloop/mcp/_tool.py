"""One MCP tool as an agentloop tool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..core._tool_spec import ToolSpec
from ..permissions._requests import PermissionRequest
from ..tools._tool import ToolContext, ToolOutput, ToolRequest
from ._permissions import McpInvoke

__all__ = ["McpTool", "ToolServer"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _Specced(Protocol):
    @property
    def spec(self) -> ToolSpec: ...


class ToolServer(Protocol):
    """What an :class:`McpTool` needs of its source (an ``McpToolSource``)."""

    @property
    def server(self) -> _Named: ...

    def get(self, name: str) -> _Specced | None: ...

    async def call_tool(self, mcp_name: str, arguments: dict[str, Any]) -> ToolOutput: ...


class McpTool:
    """One tool of an MCP server, as an agentloop :class:`~agentloop.Tool`.

    Its calls propose :class:`McpInvoke` (after the executor's
    ``ToolInvocation``); its input is validated by the executor against the
    server's input schema, like any tool's.
    """

    def __init__(self, source: ToolServer, mcp_name: str, spec: ToolSpec) -> None:
        self.source = source
        self.mcp_name = mcp_name
        self.spec = spec

    def __repr__(self) -> str:
        return f"<McpTool {self.spec.name!r}: {self.mcp_name!r} of {self.source.server.name!r}>"

    def current_spec(self) -> ToolSpec | None:
        """This tool's spec while the server lists it, else ``None`` (hidden)."""
        live = self.source.get(self.spec.name)
        return live.spec if live is not None else None

    def proposed_requests(self, request: ToolRequest) -> Sequence[PermissionRequest]:
        """``McpInvoke(server, tool)``."""
        return (McpInvoke(self.source.server.name, self.mcp_name, self.spec.annotations),)

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput:
        """Call the tool on the server (see ``McpToolSource.call_tool``)."""
        arguments = request.input if isinstance(request.input, dict) else {}
        return await self.source.call_tool(self.mcp_name, arguments)
