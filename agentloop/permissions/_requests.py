"""What a tool asks permission for, and what a checker can answer."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
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
    "AskApproval",
    "CustomPermission",
    "Deny",
    "DenyAll",
    "DenyCode",
    "FileSystemRead",
    "FileSystemWrite",
    "NetworkAccess",
    "PendingPermission",
    "PermissionChecker",
    "PermissionRequest",
    "Verdict",
    "ShellCommand",
    "ToolInvocation",
]


class PermissionRequest:
    """Base of every permission request: a dotted ``kind``, a one-line ``summary``, metadata."""

    kind: str
    summary: str
    metadata: Metadata


def _text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}: {value!r}")
    return value


def _path(what: str, value: object) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(
            f"{what} must be a string or os.PathLike, got {type(value).__name__}: {value!r}"
        )
    return value


def _read_path(value: object) -> str:
    return _path("FileSystemRead path", value)


def _write_path(value: object) -> str:
    return _path("FileSystemWrite path", value)


def _cwd(value: object) -> str | None:
    return None if value is None else _path("ShellCommand cwd", value)


def _url(value: object) -> str:
    return _text("NetworkAccess url", value)


def _custom_kind(value: object) -> str:
    return _text("CustomPermission kind", value)


def _custom_summary(value: object) -> str:
    return _text("CustomPermission summary", value)


def _tool_name(value: object) -> str:
    return _text("ToolInvocation tool_name", value)


@attrs.frozen
class FileSystemRead(PermissionRequest):
    """Read ``path`` (a string or ``os.PathLike``; anything else raises ``TypeError``)."""

    path: str = attrs.field(converter=_read_path)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "filesystem.read"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Read {self.path}"


@attrs.frozen
class FileSystemWrite(PermissionRequest):
    """Create, change or delete ``path`` (a string or ``os.PathLike``)."""

    path: str = attrs.field(converter=_write_path)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "filesystem.write"

    @property
    def summary(self) -> str:  # type: ignore[override]
        return f"Write {self.path}"


def _to_argv(argv: str | Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    if isinstance(argv, str):
        try:
            return tuple(shlex.split(argv))
        except ValueError as error:
            raise ValueError(
                f"ShellCommand: cannot split the command string {argv!r} into arguments "
                f"({error}); pass the argv as a list of strings"
            ) from None
    if isinstance(argv, bytes | bytearray) or not isinstance(argv, Iterable):
        raise TypeError(
            f"ShellCommand argv must be a list of strings (or one command string), got "
            f"{type(argv).__name__}: {argv!r}"
        )
    words: list[str] = []
    for index, word in enumerate(argv):
        if isinstance(word, os.PathLike):
            word = os.fspath(word)
        if not isinstance(word, str):
            raise TypeError(
                f"ShellCommand argv[{index}] must be a string, got {type(word).__name__}: {word!r}"
            )
        words.append(word)
    return tuple(words)


@attrs.frozen
class ShellCommand(PermissionRequest):
    """Run ``argv`` (program first) in ``cwd``.

    ``argv`` is a list of strings; a single string is split with
    :func:`shlex.split` (``"git log -n 3"`` -> ``("git", "log", "-n", "3")``,
    unbalanced quotes raise ``ValueError``). Anything else raises ``TypeError``.
    """

    argv: tuple[str, ...] = attrs.field(converter=_to_argv)
    cwd: str | None = attrs.field(default=None, kw_only=True, converter=_cwd)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    kind = "shell.command"

    @property
    def program(self) -> str:
        """The program, ``argv[0]`` (empty if there is none)."""
        return self.argv[0] if self.argv else ""

    @property
    def command(self) -> str:
        """``argv`` as one shell-quoted line (:func:`shlex.join`)."""
        return shlex.join(self.argv)

    @property
    def summary(self) -> str:  # type: ignore[override]
        return self.command if self.cwd is None else f"{self.command} (in {self.cwd})"


@attrs.frozen
class NetworkAccess(PermissionRequest):
    """Reach ``url``: a full URL (``https://example.com/x``) or a bare ``host[:port]``."""

    url: str = attrs.field(converter=_url)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
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

    kind: str = attrs.field(converter=_custom_kind)
    summary: str = attrs.field(converter=_custom_summary)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen
class ToolInvocation(PermissionRequest):
    """Call tool ``tool_name``: the executor asks this before a tool's own requests,
    so a checker can decide by tool name or :class:`ToolAnnotations`."""

    tool_name: str = attrs.field(converter=_tool_name)
    annotations: ToolAnnotations = attrs.field(factory=ToolAnnotations)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
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
class AskApproval:
    """Ask the host: the call becomes an ``ApprovalRequest`` interrupt."""

    reason: str
    summary: str
    id: str | None = None


Verdict: TypeAlias = Allow | Deny | AskApproval
"""A checker's answer to a request: run it, refuse it, or ask a human first.

A policy may also answer :class:`NoVerdict` (see :data:`PolicyVerdict`); a
rule's configured action is the string :data:`RuleAction`."""


def request_key(request: PermissionRequest) -> str:
    """What identifies a request across evaluations: its ``repr`` when its class defines
    one (attrs and dataclasses do), else its kind and summary."""
    if type(request).__repr__ is not object.__repr__:
        return repr(request)
    return f"{request.kind}: {request.summary}"


@attrs.frozen
class PendingPermission:
    """One permission request a call needs approval for, as the host is shown it.

    ``kind`` and ``summary`` describe the request, ``reason`` is why the
    checker asked (an :class:`ApprovalReason` or any text), ``request_key``
    identifies the exact request: approving grants these requests and no
    other one.
    """

    kind: str
    summary: str
    reason: str
    request_key: str


@runtime_checkable
class PermissionChecker(Protocol):
    """Decides each permission request a tool proposes."""

    def evaluate(self, request: PermissionRequest) -> Verdict:
        """Allow, deny or ask for approval."""
        ...


_ALLOW = Allow()  # frozen and without fields: one is as good as another


class AllowAll:
    """A checker that allows everything (the default)."""

    __slots__ = ()

    def evaluate(self, request: PermissionRequest) -> Verdict:
        """Always :class:`Allow`."""
        return _ALLOW


ALLOW_ALL = AllowAll()
"""The shared default checker (it keeps no state)."""


class DenyAll:
    """A checker that denies everything."""

    def __init__(self, message: str = "all tool permissions are denied") -> None:
        self.message = message

    def evaluate(self, request: PermissionRequest) -> Verdict:
        """Always :class:`Deny`."""
        return Deny(DenyCode.POLICY_DENIED, f"{self.message} ({request.summary})")
