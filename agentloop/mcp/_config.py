"""Where an MCP server is and how its tool names map into agentloop's catalog."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..core._errors import InvalidInputError

__all__ = ["HttpServer", "McpServer", "StdioServer", "check_options", "tool_names"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
"""Longest tool name every provider accepts."""


def _check_name(_instance: Any, _attribute: Any, value: str) -> None:
    if not isinstance(value, str) or not _SERVER_NAME.match(value) or len(value) > 32:
        raise InvalidInputError(
            f"MCP server name {value!r} is not usable in tool names: use 1-32 letters, digits, "
            "'-' or single '_' (no '__', which separates server and tool in mcp__<server>__<tool>)"
        )


def _to_args(args: Iterable[str]) -> tuple[str, ...]:
    if isinstance(args, str):
        raise InvalidInputError(
            f"StdioServer args must be a list of strings, got the string {args!r}"
        )
    return tuple(args)


def _to_map(values: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if values is None else dict(values)


def _redacted(values: Mapping[str, str] | None) -> str:
    return "None" if values is None else "{" + ", ".join(f"{k!r}: '***'" for k in values) + "}"


@attrs.frozen
class StdioServer:
    """An MCP server the source starts as a child process and talks to over stdin/stdout.

    ``env`` is added to a minimal default environment (the SDK's: ``PATH``,
    ``HOME`` ...); its values never appear in reprs or logs.
    """

    name: str = attrs.field(validator=_check_name)
    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_to_args)
    env: dict[str, str] | None = attrs.field(
        default=None, converter=_to_map, kw_only=True, repr=_redacted
    )
    cwd: str | None = attrs.field(default=None, kw_only=True)

    @property
    def target(self) -> str:
        """The command line, for permission requests and messages."""
        return " ".join((self.command, *self.args))


@attrs.frozen
class HttpServer:
    """An MCP server reached over streamable HTTP at ``url``.

    ``headers`` (e.g. ``Authorization``) are sent with every request; their
    values never appear in reprs or logs.
    """

    name: str = attrs.field(validator=_check_name)
    url: str
    headers: dict[str, str] | None = attrs.field(
        default=None, converter=_to_map, kw_only=True, repr=_redacted
    )

    @property
    def target(self) -> str:
        """The URL, for permission requests and messages."""
        return self.url


McpServer = StdioServer | HttpServer
"""Either kind of server configuration."""


def tool_names(server: str, mcp_names: Iterable[str]) -> dict[str, str]:
    """Agentloop names for the server's tool names: ``{mcp_name: "mcp__<server>__<tool>"}``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_`` and names longer than 64
    characters are cut. When two tools end up with the same name, the one
    whose MCP name sorts first keeps it and each other gets ``_`` plus the
    first 8 hex digits of the SHA-256 of its MCP name (cut to fit): a stable
    mapping that does not depend on the order the server lists its tools in.
    """
    prefix = f"mcp__{server}__"
    taken: dict[str, str] = {}
    out: dict[str, str] = {}
    for mcp_name in sorted(set(mcp_names)):
        candidate = (prefix + _TOOL_CHARS.sub("_", mcp_name))[:_MAX_NAME]
        if candidate in taken:
            suffix = "_" + hashlib.sha256(mcp_name.encode()).hexdigest()[:8]
            candidate = candidate[: _MAX_NAME - len(suffix)] + suffix
        taken[candidate] = mcp_name
        out[mcp_name] = candidate
    return out


def check_options(
    server: object,
    connect_timeout: object,
    call_timeout: object,
    protocol: object,
    max_message_size: object,
) -> None:
    """Raise ``TypeError``/``ValueError`` naming the first bad argument of McpToolSource."""
    if not isinstance(server, StdioServer | HttpServer):
        raise TypeError(
            f"McpToolSource expects a StdioServer or HttpServer, got {type(server).__name__}"
        )
    for label, value in (("connect_timeout", connect_timeout), ("call_timeout", call_timeout)):
        if not (isinstance(value, int | float) and 0 < value < math.inf):
            raise ValueError(f"McpToolSource: {label} must be a positive number, got {value!r}")
    if protocol not in ("auto", "legacy"):
        raise ValueError(f"McpToolSource: protocol must be 'auto' or 'legacy', got {protocol!r}")
    if max_message_size is not None and not (
        type(max_message_size) is int and max_message_size > 0
    ):
        raise ValueError(
            "McpToolSource: max_message_size must be a positive number of bytes or None, "
            f"got {max_message_size!r}"
        )
