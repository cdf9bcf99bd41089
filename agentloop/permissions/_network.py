"""``NetworkPolicy``: network requests decided by host and scheme."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Literal

import attrs

from ._base import Abstain, PolicyVerdict, _names
from ._requests import (
    Allow,
    ApprovalReason,
    AskApproval,
    Deny,
    DenyCode,
    NetworkAccess,
    PermissionRequest,
)

__all__ = ["NetworkPolicy"]


def _host_patterns(values: Iterable[str]) -> frozenset[str]:
    return frozenset(pattern.lower().rstrip(".") for pattern in _names(values))


def _schemes(values: Iterable[str]) -> frozenset[str]:
    return frozenset(scheme.lower() for scheme in _names(values))


@attrs.frozen(kw_only=True)
class NetworkPolicy:
    """Decides :class:`NetworkAccess` requests by host.

    Host patterns are ``fnmatch`` style and case-insensitive:
    ``"example.com"`` is that host only, ``"*.example.com"`` its subdomains
    (not ``example.com`` itself), ``"*"`` any host. Ports are not looked at.
    In order: a URL whose scheme is not in ``schemes`` (a bare
    ``host[:port]`` has none and passes) or that names no host is denied; a host on
    ``deny`` is denied; a host on ``allow`` is allowed; any other asks for
    approval (``unknown="deny"``: denied). Other requests: :class:`Abstain`.

    The host is read from the URL text as given; it says nothing about
    where DNS will send the request, nor about redirects the tool follows.
    """

    allow: frozenset[str] = attrs.field(default=frozenset(), converter=_host_patterns)
    deny: frozenset[str] = attrs.field(default=frozenset(), converter=_host_patterns)
    unknown: Literal["approve", "deny"] = attrs.field(
        default="approve", validator=attrs.validators.in_(("approve", "deny"))
    )
    schemes: frozenset[str] = attrs.field(default=frozenset({"http", "https"}), converter=_schemes)

    def evaluate(self, request: PermissionRequest) -> PolicyVerdict:
        """Allow, deny or ask for a network request."""
        if not isinstance(request, NetworkAccess):
            return Abstain()
        url, host, scheme = request.url, request.host, request.scheme
        if scheme and scheme not in self.schemes:
            allowed = ", ".join(sorted(self.schemes)) or "none"
            return Deny(
                DenyCode.NETWORK_NOT_ALLOWED,
                f"cannot access {url!r}: scheme {scheme!r} is not allowed (allowed: {allowed})",
            )
        if not host:
            return Deny(
                DenyCode.NETWORK_NOT_ALLOWED,
                f"cannot access {url!r}: it names no host; give a URL such as "
                "https://example.com/path",
            )
        if (pattern := _match(host, self.deny)) is not None:
            return Deny(
                DenyCode.NETWORK_NOT_ALLOWED,
                f"cannot access {url!r}: host {host!r} matches {pattern!r} on the deny list",
            )
        if _match(host, self.allow) is not None:
            return Allow()
        if self.unknown == "approve":
            summary = f"Access {url} (host {host} is not on the allow list)"
            return AskApproval(ApprovalReason.UNKNOWN_TARGET, summary)
        allowed = ", ".join(sorted(self.allow)) or "none"
        return Deny(
            DenyCode.NETWORK_NOT_ALLOWED,
            f"cannot access {url!r}: host {host!r} is not on the allow list ({allowed})",
        )


def _match(host: str, patterns: frozenset[str]) -> str | None:
    """The first pattern (sorted) ``host`` matches, or ``None``."""
    for pattern in sorted(patterns):
        if fnmatch.fnmatchcase(host, pattern):
            return pattern
    return None
