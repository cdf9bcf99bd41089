"""The permission requests an MCP source raises: connecting to a server, invoking a tool,
reading a resource or getting a prompt (the opt-in feature tools)."""

from __future__ import annotations

import attrs

from ..core._items import Metadata, _empty_metadata
from ..core._tool_spec import ToolAnnotations
from ..permissions._requests import PermissionRequest

__all__ = ["McpConnect", "McpGetPrompt", "McpInvoke", "McpReadResource"]


@attrs.frozen
class McpConnect(PermissionRequest):
    """Connect to MCP server ``server`` (``target``: its command line or URL).

    Asked by :class:`McpToolSource` before every connection, the first and
    each reconnection, from the checker given to the source.
    """

    server: str
    target: str
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "mcp.connect"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Connect MCP server {self.server} ({self.target})"


@attrs.frozen
class McpInvoke(PermissionRequest):
    """Invoke tool ``tool`` (its MCP name) of server ``server``.

    Proposed by every MCP tool call, after the executor's ``ToolInvocation``,
    so a policy can decide per server and tool: ``RequestKindPolicy(require_approval=
    {"mcp.invoke_tool"})`` or a custom policy matching ``request.server``.
    """

    server: str
    tool: str
    annotations: ToolAnnotations = attrs.field(factory=ToolAnnotations)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "mcp.invoke_tool"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Invoke MCP tool {self.server}.{self.tool}"


@attrs.frozen
class McpReadResource(PermissionRequest):
    """Read resource ``uri`` of server ``server`` (the model called its ``read_resource``
    tool; see ``McpToolSource(feature_tools=True)``).

    Its own kind, so a policy can allow tools and refuse reads, or the reverse:
    ``RequestKindPolicy(deny={"mcp.read_resource"})``.
    """

    server: str
    uri: str
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "mcp.read_resource"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Read MCP resource {self.uri} of {self.server}"


@attrs.frozen
class McpGetPrompt(PermissionRequest):
    """Get prompt ``prompt`` of server ``server`` (the model called its ``get_prompt``
    tool; see ``McpToolSource(feature_tools=True)``)."""

    server: str
    prompt: str
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "mcp.get_prompt"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Get MCP prompt {self.server}.{self.prompt}"
