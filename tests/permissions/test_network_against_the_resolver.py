"""NetworkPolicy against the C library's resolver and a real listener on loopback.

httpx hands a host it does not read as a dotted quad to ``getaddrinfo``, which
reads every ``inet_aton`` spelling; so ``getaddrinfo`` (numeric only: no DNS)
is the oracle for where a spelling goes, and a connection to a listener on
127.0.0.1 shows that it really gets there.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import agentloop as al
import agentloop.permissions
from agentloop.permissions import NetworkPolicy

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7f.1",
    "0177.0.0.1",
    "017700000001",
    "0",
    "0.0.0.0",
]


def resolved(host: str) -> str | None:
    """The address ``getaddrinfo`` gives for ``host`` without asking DNS, or ``None``."""
    try:
        found = socket.getaddrinfo(host, 80, proto=socket.IPPROTO_TCP, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return str(found[0][4][0])


@pytest.fixture(scope="module")
def listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_a_spelling_that_reaches_loopback_is_denied_by_a_loopback_rule(
    host: str, listener: int
) -> None:
    with socket.create_connection((host, listener), timeout=5):
        pass  # the spelling really reaches the listener on 127.0.0.1
    decision = NetworkPolicy(deny=["127.0.0.1"]).evaluate(
        al.permissions.NetworkAccess(f"http://{host}:{listener}/")
    )
    assert isinstance(decision, al.permissions.Deny), (host, decision)
    assert decision.message.endswith("matches '127.0.0.1' on the deny list")


numeric_hosts = st.one_of(
    st.text(alphabet="0123456789.x", min_size=1, max_size=16),
    st.text(alphabet="0123456789abcdefABCDEF:.", min_size=2, max_size=24),
    st.ip_addresses().map(str),
)


@given(host=numeric_hosts)
def test_the_policy_reads_a_host_where_the_resolver_sends_it(host: str) -> None:
    """Whenever getaddrinfo reads a host as an address, the policy reads it as the same
    address (or, for the unspecified one, the loopback a connection reaches)."""
    address = resolved(host)
    event("an address" if address is not None else "not an address")
    if address is None:
        return
    address = address.removeprefix("::ffff:") if "." in address else address
    reached = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    bracketed = f"[{host}]" if ":" in host else host
    decision = NetworkPolicy(deny=[reached]).evaluate(
        al.permissions.NetworkAccess(f"http://{bracketed}/")
    )
    if al.permissions.NetworkAccess(f"http://{bracketed}/").host == "":
        return  # the URL itself is unreadable: a different test's business
    assert isinstance(decision, al.permissions.Deny), (host, address, decision)
