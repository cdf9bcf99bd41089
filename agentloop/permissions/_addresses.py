"""One canonical form for every spelling of a host, so a rule matches however it is written.

The C library and the kernel accept many spellings of one address:
``inet_aton`` reads ``127.1``, ``2130706433``, ``0x7f000001`` and
``0177.0.0.1`` as ``127.0.0.1``; ``[::ffff:127.0.0.1]`` reaches 127.0.0.1 over
IPv6; ``[0:0:0:0:0:0:0:1]`` is ``::1``; a connection to ``0.0.0.0`` (``0``)
or ``::`` reaches the local host (Linux routes it to 127.0.0.1 / ::1).
:func:`canonical_host` turns each into the address a connection reaches,
written the standard way (dotted quad, compressed IPv6); a name stays a name
(lower case, NFKC, no trailing dot). Rules are canonicalised the same way,
and a rule may be a network (``127.0.0.0/8``, ``fe80::/10``).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
import unicodedata
from urllib.parse import unquote

__all__ = ["canonical_host", "canonical_pattern", "host_matches"]

_IPV4_SPELLING = re.compile(r"^[0-9a-fx.]+$")  # what inet_aton may read: digits, hex, dots
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})  # IDNA's full stops
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> _Address | None:
    """The address ``text`` spells in any form the C library accepts, or ``None``."""
    if ":" in text:
        try:
            address = ipaddress.IPv6Address(text.partition("%")[0])
        except ValueError:
            return None
        return address.ipv4_mapped or address
    if not _IPV4_SPELLING.match(text):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


def _reached(address: _Address) -> _Address:
    """The address a connection to ``address`` reaches (the unspecified one: loopback)."""
    if address == ipaddress.IPv4Address("0.0.0.0"):
        return ipaddress.IPv4Address("127.0.0.1")
    if address == ipaddress.IPv6Address("::"):
        return ipaddress.IPv6Address("::1")
    return address


def _cleaned(text: str) -> str:
    """``text`` lower case, percent-decoded, NFKC, without brackets or trailing dots."""
    text = unquote(text.strip()) if "%" in text and ":" not in text else text.strip()
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text.translate(_DOTS))
    text = text.lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return text.rstrip(".")


def canonical_host(host: str) -> str:
    """The address ``host`` reaches, written the standard way; a name, cleaned."""
    text = _cleaned(host)
    address = _address(text)
    return text if address is None else str(_reached(address))


def _network(text: str) -> _Network | None:
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        mapped = network.network_address.ipv4_mapped
        assert mapped is not None
        return ipaddress.IPv4Network((mapped, network.prefixlen - 96))
    return network


def canonical_pattern(pattern: str) -> str:
    """A rule in canonical form: an address or a network written the standard way, or a
    name pattern cleaned like a host."""
    text = _cleaned(pattern)
    if text.startswith("[") and "]/" in text:  # [::ffff:10.0.0.0]/104
        text = text[1:].replace("]/", "/", 1)
    if "/" in text and (network := _network(text)) is not None:
        return str(network)
    return canonical_host(text)


def host_matches(host: str, pattern: str) -> bool:
    """Whether the canonical ``host`` matches the canonical ``pattern`` (a network holds
    its addresses; any other pattern is an ``fnmatch`` pattern)."""
    if "/" in pattern and (network := _network(pattern)) is not None:
        address = _address(host)
        return address is not None and address.version == network.version and address in network
    return fnmatch.fnmatchcase(host, pattern)
