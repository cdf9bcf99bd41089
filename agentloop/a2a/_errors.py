"""Errors of the A2A tool source: a branch of ``ToolError``.

::

    ToolError
    └── RemoteAgentError            a remote A2A agent could not serve a call
        └── RemoteAgentConnectionError  its card cannot be read, or it cannot be reached

Inside a session these never escape: the executor turns them into failed tool
results the model can read. A remote *task* that ends failed, rejected or
cancelled is not an exception: the call's result is an error output saying so.
"""

from __future__ import annotations

from ..core._errors import ToolError

__all__ = ["RemoteAgentConnectionError", "RemoteAgentError"]


class RemoteAgentError(ToolError):
    """Raised when a remote A2A agent cannot serve a call (a timeout, an HTTP or
    JSON-RPC error, a malformed or oversized answer); ``agent`` is its URL."""

    def __init__(self, message: str, *, agent: str) -> None:
        super().__init__(message)
        self.agent = agent


class RemoteAgentConnectionError(RemoteAgentError):
    """Raised when the agent card cannot be fetched or read, or names no endpoint this
    client can use."""
