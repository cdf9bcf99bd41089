"""``NetworkPolicy``: network requests decided by host and scheme."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from ._addresses import canonical_host, canonical_pattern, host_matches
from ._base import NoVerdict, PolicyVerdict, _names
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
    return frozenset(canonical_pattern(pattern) for pattern in _names(values))


def _schemes(values: Iterable[str]) -> frozenset[str]:
    return frozenset(scheme.lower() for scheme in _names(values))


@attrs.frozen(kw_only=True)
class NetworkPolicy:
    """Decides :class:`NetworkAccess` requests by host.

    Host patterns are ``fnmatch`` style and case-insensitive:
    ``"example.com"`` is that host only, ``"*.example.com"`` its subdomains
    (not ``example.com`` itself), ``"*"`` any host; an address may also be
    given as a network (``"127.0.0.0/8"``, ``"fe80::/10"``). Ports are not
    looked at. Hosts and patterns are compared in one canonical form: an
    address in any spelling the C library accepts (``127.1``,
    ``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``,
    ``[0:0:0:0:0:0:0:1]``) is the address a connection reaches, written the
    standard way, and ``0``/``0.0.0.0`` and ``::`` are the loopback address a
    connection to them reaches.
    In order: a URL whose scheme is not in ``schemes`` (a bare
    ``host[:port]`` has none and passes) or that names no host is denied; a host on
    ``deny`` is denied; a host on ``allow`` is allowed; any other asks for
    approval (``unknown="deny"``: denied). Other requests: :class:`NoVerdict`.

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
            return NoVerdict()
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
        address = canonical_host(host)
        shown = f"host {host!r}" if address == host else f"host {host!r} (address {address})"
        if (pattern := _match(address, self.deny)) is not None:
            return Deny(
                DenyCode.NETWORK_NOT_ALLOWED,
                f"cannot access {url!r}: {shown} matches {pattern!r} on the deny list",
            )
        if _match(address, self.allow) is not None:
            return Allow()
        if self.unknown == "approve":
            shown_plain = host if address == host else f"{host} (address {address})"
            summary = f"Access {url} (host {shown_plain} is not on the allow list)"
            return AskApproval(ApprovalReason.UNKNOWN_TARGET, summary)
        allowed = ", ".join(sorted(self.allow)) or "none"
        return Deny(
            DenyCode.NETWORK_NOT_ALLOWED,
            f"cannot access {url!r}: {shown} is not on the allow list ({allowed})",
        )


def _match(host: str, patterns: frozenset[str]) -> str | None:
    """The first pattern (sorted) ``host`` matches, or ``None``."""
    for pattern in sorted(patterns):
        if host_matches(host, pattern):
            return pattern
    return None
