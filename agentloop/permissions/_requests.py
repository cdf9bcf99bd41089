"""What a tool asks permission for, and what a checker can answer."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, TypeAlias, runtime_checkable
from urllib.parse import urlsplit

import attrs

from ..core._items import Metadata, _empty_metadata
from ..core._tool_spec import ToolAnnotations

__all__ = [
    "Allow",
    "AllowAll",
    "ApprovalReason",
    "CustomPermission",
    "Deny",
    "DenyAll",
    "DenyCode",
    "FileSystemRead",
    "FileSystemWrite",
    "NetworkAccess",
    "PermissionChecker",
    "PermissionDecision",
    "PermissionRequest",
    "RequireApproval",
    "ShellCommand",
    "ToolInvocation",
]


class PermissionRequest:
    """Base of every permission request: a dotted ``kind``, a one-line ``summary``, metadata."""

    kind: str
    summary: str
    metadata: Metadata


@attrs.frozen
class FileSystemRead(PermissionRequest):
    """Read ``path``."""

    path: str
    metadata: Metadata = attrs.field(factory=_empty_metadata, kw_only=True)
    kind = "filesystem.read"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Read {self.path}"


@attrs.frozen
class FileSystemWrite(PermissionRequest):
    """Create, change or delete ``path``."""

    path: str
    metadata: Metadata = attrs.field(factory=_empty_metadata, kw_only=True)
    kind = "filesystem.write"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Write {self.path}"


def _to_argv(argv: Sequence[str]) -> tuple[str, ...]:
    return tuple(argv)


@attrs.frozen
class ShellCommand(PermissionRequest):
    """Run ``argv`` (program first) in ``cwd``."""

    argv: tuple[str, ...] = attrs.field(converter=_to_argv)
    cwd: str | None = attrs.field(default=None, kw_only=True)
    metadata: Metadata = attrs.field(factory=_empty_metadata, kw_only=True)
    kind = "shell.command"

    @property
    def program(self) -> str:
        """The program, ``argv[0]`` (empty if there is none)."""
        return self.argv[0] if self.argv else ""

    @property
    def command(self) -> str:
        """``argv`` joined by spaces."""
        return " ".join(self.argv)

    @property
    def summary(self) -> str:  # type: ignore[override]
        return self.command if self.cwd is None else f"{self.command} (in {self.cwd})"


@attrs.frozen
class NetworkAccess(PermissionRequest):
    """Reach ``url``: a full URL (``https://example.com/x``) or a bare ``host[:port]``."""

    url: str
    metadata: Metadata = attrs.field(factory=_empty_metadata, kw_only=True)
    kind = "network.request"

    @property
    def host(self) -> str:
        """The host name, lower case without a trailing dot; ``""`` if there is none or
        the URL cannot be parsed (a backslash in the authority counts as unparsable)."""
        return _split_url(self.url)[1]

    @property
    def scheme(self) -> str:
        """The URL's scheme, lower case; ``""`` for a bare host."""
        return _split_url(self.url)[0]

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Access {self.url}"


def _split_url(url: str) -> tuple[str, str]:
    """``(scheme, host)`` of ``url``, both lower case; ``("", "")`` if unparsable."""
    text = url.strip()
    if "://" not in text:
        text = "//" + text
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
    except ValueError:
        return "", ""
    if "\\" in parts.netloc:
        return parts.scheme.lower(), ""
    return parts.scheme.lower(), host.lower().rstrip(".")


@attrs.frozen
class CustomPermission(PermissionRequest):
    """Anything else (an MCP server, a host-defined capability): kind and summary are free."""

    kind: str
    summary: str
    metadata: Metadata = attrs.field(factory=_empty_metadata, kw_only=True)


@attrs.frozen
class ToolInvocation(PermissionRequest):
    """Call tool ``tool_name``: the executor asks this before a tool's own requests,
    so a checker can decide by tool name or :class:`ToolAnnotations`."""

    tool_name: str
    annotations: ToolAnnotations = attrs.field(factory=ToolAnnotations)
    metadata: Metadata = attrs.field(factory=_empty_metadata, kw_only=True)
    kind = "tool.invoke"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Call tool {self.tool_name}"


class DenyCode(StrEnum):
    """Why a request was denied."""

    PATH_NOT_ALLOWED = "path_not_allowed"
    COMMAND_NOT_ALLOWED = "command_not_allowed"
    NETWORK_NOT_ALLOWED = "network_not_allowed"
    TOOL_NOT_ALLOWED = "tool_not_allowed"
    POLICY_DENIED = "policy_denied"


class ApprovalReason(StrEnum):
    """Common reasons a checker asks for approval (any string is accepted)."""

    POLICY_REQUIRES_CONFIRMATION = "policy_requires_confirmation"
    SENSITIVE_PATH = "sensitive_path"
    SENSITIVE_COMMAND = "sensitive_command"
    DESTRUCTIVE_TOOL = "destructive_tool"
    UNKNOWN_TARGET = "unknown_target"


@attrs.frozen
class Allow:
    """Let the request through."""


@attrs.frozen
class Deny:
    """Refuse the request; the model sees ``message``."""

    code: str
    message: str


@attrs.frozen
class RequireApproval:
    """Ask the host: the call becomes an ``ApprovalRequest`` interrupt."""

    reason: str
    summary: str
    id: str | None = None


PermissionDecision: TypeAlias = Allow | Deny | RequireApproval


@runtime_checkable
class PermissionChecker(Protocol):
    """Decides each permission request a tool proposes."""

    def evaluate(self, request: PermissionRequest) -> PermissionDecision:
        """Allow, deny or ask for approval."""
        ...


class AllowAll:
    """A checker that allows everything (the default)."""

    def evaluate(self, request: PermissionRequest) -> PermissionDecision:
        """Always :class:`Allow`."""
        return Allow()


class DenyAll:
    """A checker that denies everything."""

    def __init__(self, message: str = "all tool permissions are denied") -> None:
        self.message = message

    def evaluate(self, request: PermissionRequest) -> PermissionDecision:
        """Always :class:`Deny`."""
        return Deny(DenyCode.POLICY_DENIED, f"{self.message} ({request.summary})")
