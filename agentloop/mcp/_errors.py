"""MCP errors: a branch of ``ToolError``.

::

    ToolError
    └── McpError               an MCP server could not serve a request
        ├── McpConnectionError cannot connect, connection refused by a policy, or lost
        └── McpCallError       a call failed: timeout, JSON-RPC error, malformed answer

Inside a session these never escape: the executor turns them into failed
tool results the model can read, and the driver carries on.
"""

from __future__ import annotations

from ..core._errors import ToolError

__all__ = ["McpCallError", "McpConnectionError", "McpError"]


class McpError(ToolError):
    """Raised when an MCP server could not serve a request; ``server`` names it."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class McpConnectionError(McpError):
    """Raised when connecting fails, a policy refuses the connection, or it is lost."""


class McpCallError(McpError):
    """Raised when a call times out, the server answers with an error, or the answer is
    malformed."""
