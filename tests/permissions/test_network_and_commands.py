"""NetworkPolicy, URL parsing of NetworkAccess, and CommandPolicy's working-directory roots."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
import agentloop.permissions
from agentloop.permissions import NetworkPolicy


@pytest.mark.parametrize(
    ("url", "scheme", "host"),
    [
        ("https://Example.COM.:8443/x", "https", "example.com"),
        ("example.com", "", "example.com"),
        ("localhost:8080", "", "localhost"),
        ("http://[::1]:80/", "http", "::1"),
        ("http://good.com@evil.com/", "http", "evil.com"),
        ("http://evil.com\\@good.com/", "http", ""),
        ("http://[::1/", "", ""),
        ("file:///etc/passwd", "file", ""),
        ("https://", "https", ""),
        ("", "", ""),
    ],
)
def test_network_access_reads_scheme_and_host(url: str, scheme: str, host: str) -> None:
    request = al.permissions.NetworkAccess(url)
    assert (request.kind, request.summary, request.scheme, request.host) == (
        "network.request",
        f"Access {url}",
        scheme,
        host,
    )


def denied(message: str) -> al.permissions.Deny:
    return al.permissions.Deny("network_not_allowed", message)


POLICY = NetworkPolicy(
    allow=["api.example.com", "*.Docs.example.com"], deny=["*.evil.com", "evil.com"]
)


@pytest.mark.parametrize(
    ("url", "decision"),
    [
        ("https://api.example.com/v1", al.permissions.Allow()),
        ("HTTPS://API.EXAMPLE.COM./v1", al.permissions.Allow()),
        ("api.example.com:443", al.permissions.Allow()),
        ("https://en.docs.example.com/", al.permissions.Allow()),
        (
            "https://docs.example.com/",
            al.permissions.AskApproval(
                "unknown_target",
                "Access https://docs.example.com/ (host docs.example.com is not on the allow list)",
            ),
        ),
        (
            "https://cdn.evil.com/x",
            denied(
                "cannot access 'https://cdn.evil.com/x': host 'cdn.evil.com' matches '*.evil.com' "
                "on the deny list"
            ),
        ),
        (
            "http://api.example.com@evil.com/",
            denied(
                "cannot access 'http://api.example.com@evil.com/': host 'evil.com' matches "
                "'evil.com' on the deny list"
            ),
        ),
        (
            "file:///etc/passwd",
            denied(
                "cannot access 'file:///etc/passwd': scheme 'file' is not allowed "
                "(allowed: http, https)"
            ),
        ),
        (
            "ftp://api.example.com/",
            denied(
                "cannot access 'ftp://api.example.com/': scheme 'ftp' is not allowed "
                "(allowed: http, https)"
            ),
        ),
        (
            "https:///path-only",
            denied(
                "cannot access 'https:///path-only': it names no host; give a URL such as "
                "https://example.com/path"
            ),
        ),
        (
            "http://api.example.com\\@x.org/",
            denied(
                "cannot access 'http://api.example.com\\\\@x.org/': it names no host; give a URL "
                "such as https://example.com/path"
            ),
        ),
    ],
)
def test_network_policy_decides_by_scheme_and_host(
    url: str, decision: al.permissions.PolicyVerdict
) -> None:
    assert POLICY.evaluate(al.permissions.NetworkAccess(url)) == decision


def test_network_policy_options_and_other_requests() -> None:
    strict = NetworkPolicy(allow=["example.com"], unknown="deny", schemes=["HTTPS", "wss"])
    assert (
        strict.evaluate(al.permissions.NetworkAccess("wss://example.com/socket"))
        == al.permissions.Allow()
    )
    assert strict.evaluate(al.permissions.NetworkAccess("https://example.org/")) == denied(
        "cannot access 'https://example.org/': host 'example.org' is not on the allow list "
        "(example.com)"
    )
    assert strict.evaluate(al.permissions.NetworkAccess("http://example.com/")) == denied(
        "cannot access 'http://example.com/': scheme 'http' is not allowed (allowed: https, wss)"
    )
    assert (
        NetworkPolicy(allow=["*"]).evaluate(al.permissions.NetworkAccess("https://any.where/"))
        == al.permissions.Allow()
    )
    assert NetworkPolicy(unknown="deny").evaluate(al.permissions.NetworkAccess("x.org")) == denied(
        "cannot access 'x.org': host 'x.org' is not on the allow list (none)"
    )
    assert strict.evaluate(al.permissions.FileSystemRead("/x")) == al.permissions.NoVerdict()
    assert (
        strict.evaluate(al.permissions.ShellCommand(["curl", "https://x.org"]))
        == al.permissions.NoVerdict()
    )
    with pytest.raises(TypeError) as caught:
        NetworkPolicy(allow="a.com")
    assert str(caught.value) == "expected a collection of names, got the string 'a.com'"
    with pytest.raises(ValueError, match="'unknown' must be in"):
        NetworkPolicy(unknown="allow")  # type: ignore[arg-type]


@pytest.fixture
def dirs(tmp_path: Path) -> Path:
    """repo/{src, out -> ../elsewhere}, elsewhere/."""
    root = tmp_path.resolve()
    (root / "repo" / "src").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    (root / "repo" / "out").symlink_to(root / "elsewhere")
    return root


def test_command_policy_checks_the_working_directory(dirs: Path) -> None:
    repo = dirs / "repo"
    policy = al.permissions.CommandPolicy(
        allow=["make"], deny=["rm"], cwd_roots=[repo], base=str(repo)
    )

    def outside(shown: str, real: Path) -> al.permissions.Deny:
        return al.permissions.Deny(
            "command_not_allowed",
            f"cannot run 'make' in {shown}: it resolves to {real}, outside the allowed working "
            f"directories ({repo}); pass a cwd under one of them",
        )

    assert (
        policy.evaluate(al.permissions.ShellCommand(["make"])) == al.permissions.Allow()
    )  # base is inside
    assert (
        policy.evaluate(al.permissions.ShellCommand(["make"], cwd="src")) == al.permissions.Allow()
    )
    assert (
        policy.evaluate(al.permissions.ShellCommand(["make"], cwd=str(repo / "src")))
        == al.permissions.Allow()
    )
    assert policy.evaluate(al.permissions.ShellCommand(["make"], cwd="..")) == outside("'..'", dirs)
    assert policy.evaluate(al.permissions.ShellCommand(["make"], cwd="src/../..")) == outside(
        "'src/../..'", dirs
    )
    assert policy.evaluate(al.permissions.ShellCommand(["make"], cwd="out")) == outside(
        "'out'", dirs / "elsewhere"
    )
    assert policy.evaluate(al.permissions.ShellCommand(["make"], cwd="/")) == outside(
        "'/'", Path("/")
    )
    assert policy.evaluate(
        al.permissions.ShellCommand(["make"], cwd="bad\0dir")
    ) == al.permissions.Deny(
        "command_not_allowed", "cannot run 'make' in 'bad\\x00dir': the path contains a NUL byte"
    )
    # the deny list is checked first, the allow list after the directory
    assert policy.evaluate(
        al.permissions.ShellCommand(["rm", "x"], cwd="/")
    ) == al.permissions.Deny(
        "command_not_allowed", "command 'rm x' is not allowed: 'rm' is on the deny list"
    )
    assert policy.evaluate(
        al.permissions.ShellCommand(["curl"], cwd="src")
    ) == al.permissions.AskApproval("sensitive_command", "Run curl (in src)")
    elsewhere = al.permissions.CommandPolicy(
        allow=["make"], cwd_roots=[repo], base=str(dirs / "elsewhere")
    )
    assert elsewhere.evaluate(al.permissions.ShellCommand(["make"])) == al.permissions.Deny(
        "command_not_allowed",
        f"cannot run 'make' in the default directory: it resolves to {dirs / 'elsewhere'}, "
        f"outside the allowed working directories ({repo}); pass a cwd under one of them",
    )
    # without cwd_roots the directory is not looked at
    assert al.permissions.CommandPolicy(allow=["make"]).evaluate(
        al.permissions.ShellCommand(["make"], cwd="/")
    ) == (al.permissions.Allow())
    with pytest.raises(TypeError, match="expected a collection of paths, got the single path"):
        al.permissions.CommandPolicy(cwd_roots=str(repo))


# -- NetworkPolicy: every spelling of an address is that address ---------------------------

LOCAL = NetworkPolicy(deny=["127.0.0.1", "::1", "169.254.169.254"], allow=["*"])


@pytest.mark.parametrize(
    ("url", "address", "rule"),
    [
        ("http://127.1/", "127.0.0.1", "127.0.0.1"),
        ("http://2130706433/", "127.0.0.1", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1", "127.0.0.1"),
        ("http://0X7F.0.0.1/", "127.0.0.1", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1", "127.0.0.1"),
        ("http://127.0.1/", "127.0.0.1", "127.0.0.1"),
        ("http://0/", "127.0.0.1", "127.0.0.1"),
        ("http://0.0.0.0:8080/", "127.0.0.1", "127.0.0.1"),
        ("http://[::ffff:127.0.0.1]/", "127.0.0.1", "127.0.0.1"),
        ("http://[::ffff:7f00:1]/", "127.0.0.1", "127.0.0.1"),
        ("http://[0:0:0:0:0:0:0:1]/", "::1", "::1"),
        ("http://[0000::0001]:80/", "::1", "::1"),
        ("http://[::]/", "::1", "::1"),
        ("http://2852039166/", "169.254.169.254", "169.254.169.254"),
        ("http://0xa9fea9fe/", "169.254.169.254", "169.254.169.254"),
        ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254", "169.254.169.254"),
        ("http://[::ffff:a9fe:a9fe]/", "169.254.169.254", "169.254.169.254"),
        ("http://%31%32%37.0.0.1/", "127.0.0.1", "127.0.0.1"),
        (
            "http://\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11/",
            "127.0.0.1",
            "127.0.0.1",
        ),
        ("127.1:22", "127.0.0.1", "127.0.0.1"),
    ],
)
def test_every_spelling_of_a_denied_address_is_denied(url: str, address: str, rule: str) -> None:
    host = al.permissions.NetworkAccess(url).host
    assert LOCAL.evaluate(al.permissions.NetworkAccess(url)) == denied(
        f"cannot access {url!r}: host {host!r} (address {address}) matches {rule!r} on the "
        "deny list"
    )


def test_rules_are_read_in_the_same_canonical_form_and_may_be_networks() -> None:
    policy = NetworkPolicy(
        deny=["127.0.0.0/8", "[::FFFF:10.0.0.0]/104", "0:0::1", "169.254.169.254."],
        allow=["127.1", "fd00::/8", "*.example.com"],
        unknown="deny",
    )
    assert policy.deny == {"127.0.0.0/8", "10.0.0.0/8", "::1", "169.254.169.254"}
    assert policy.allow == {"127.0.0.1", "fd00::/8", "*.example.com"}
    assert policy.evaluate(al.permissions.NetworkAccess("http://127.0.0.2/")) == denied(
        "cannot access 'http://127.0.0.2/': host '127.0.0.2' matches '127.0.0.0/8' on the deny list"
    )
    assert policy.evaluate(al.permissions.NetworkAccess("http://[::ffff:10.1.2.3]/")) == denied(
        "cannot access 'http://[::ffff:10.1.2.3]/': host '::ffff:10.1.2.3' (address 10.1.2.3) "
        "matches '10.0.0.0/8' on the deny list"
    )
    assert (
        policy.evaluate(al.permissions.NetworkAccess("http://[fd00::1:2]/"))
        == al.permissions.Allow()
    )
    assert (
        policy.evaluate(al.permissions.NetworkAccess("https://api.example.com./"))
        == al.permissions.Allow()
    )
    # a network holds addresses only, of its own family
    assert policy.evaluate(al.permissions.NetworkAccess("http://10.example.org/")) == denied(
        "cannot access 'http://10.example.org/': host '10.example.org' is not on the allow list "
        "(*.example.com, 127.0.0.1, fd00::/8)"
    )
    assert policy.evaluate(al.permissions.NetworkAccess("http://[fe80::1%25eth0]/")) == denied(
        "cannot access 'http://[fe80::1%25eth0]/': host 'fe80::1%25eth0' (address fe80::1) is "
        "not on the allow list (*.example.com, 127.0.0.1, fd00::/8)"
    )
    # names that merely look numeric stay names
    assert NetworkPolicy(deny=["127.0.0.1"]).evaluate(
        al.permissions.NetworkAccess("http://1.2.3.4.5/")
    ) == (
        al.permissions.AskApproval(
            "unknown_target", "Access http://1.2.3.4.5/ (host 1.2.3.4.5 is not on the allow list)"
        )
    )


def _ipv4_spellings() -> st.SearchStrategy[tuple[str, str]]:
    """(a spelling inet_aton reads, the dotted quad it means), in 1 to 4 parts, each part
    decimal, octal or hexadecimal."""

    def spell(number: int, base: str) -> str:
        return {"dec": str(number), "oct": f"0{number:o}", "hex": f"0x{number:x}"}[base]

    def build(address: int, parts: int, bases: list[str]) -> tuple[str, str]:
        octets = list(address.to_bytes(4, "big"))
        numbers = [*octets[: parts - 1], int.from_bytes(bytes(octets[parts - 1 :]), "big")]
        text = ".".join(spell(n, b) for n, b in zip(numbers, bases, strict=False))
        return text, ".".join(map(str, octets))

    bases = st.lists(st.sampled_from(["dec", "oct", "hex"]), min_size=4, max_size=4)
    return st.builds(build, st.integers(0, 2**32 - 1), st.integers(1, 4), bases)


@given(spelling=_ipv4_spellings(), bracketed_mapped=st.booleans())
def test_an_address_is_denied_however_it_is_spelled(
    spelling: tuple[str, str], bracketed_mapped: bool
) -> None:
    text, quad = spelling
    # the C library is the oracle: it reads the spelling as this very address
    assert socket.inet_ntoa(socket.inet_aton(text)) == quad
    reached = "127.0.0.1" if quad == "0.0.0.0" else quad
    host = f"[::ffff:{quad}]" if bracketed_mapped else text
    decision = NetworkPolicy(deny=[quad]).evaluate(al.permissions.NetworkAccess(f"http://{host}/"))
    assert isinstance(decision, al.permissions.Deny), (host, decision)
    assert decision.message.endswith(f"matches {reached!r} on the deny list"), decision.message


@given(address=st.ip_addresses(v=6))
def test_an_ipv6_address_is_denied_compressed_or_exploded(address: ipaddress.IPv6Address) -> None:
    # an IPv4-mapped address reaches the IPv4 one; the unspecified address, loopback
    mapped: ipaddress.IPv4Address | ipaddress.IPv6Address = address.ipv4_mapped or address
    if mapped.is_unspecified:
        mapped = ipaddress.ip_address("127.0.0.1" if mapped.version == 4 else "::1")
    reached = mapped
    for spelled in (address.compressed, address.exploded, address.exploded.upper()):
        decision = NetworkPolicy(deny=[address.exploded]).evaluate(
            al.permissions.NetworkAccess(f"http://[{spelled}]:443/")
        )
        assert isinstance(decision, al.permissions.Deny), (spelled, decision)
        assert decision.message.endswith(f"matches {str(reached)!r} on the deny list")
