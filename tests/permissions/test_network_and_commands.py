"""NetworkPolicy, URL parsing of NetworkAccess, and CommandPolicy's working-directory roots."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentloop as al
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
    request = al.NetworkAccess(url)
    assert (request.kind, request.summary, request.scheme, request.host) == (
        "network.request",
        f"Access {url}",
        scheme,
        host,
    )


def denied(message: str) -> al.Deny:
    return al.Deny("network_not_allowed", message)


POLICY = NetworkPolicy(
    allow=["api.example.com", "*.Docs.example.com"], deny=["*.evil.com", "evil.com"]
)


@pytest.mark.parametrize(
    ("url", "decision"),
    [
        ("https://api.example.com/v1", al.Allow()),
        ("HTTPS://API.EXAMPLE.COM./v1", al.Allow()),
        ("api.example.com:443", al.Allow()),
        ("https://en.docs.example.com/", al.Allow()),
        (
            "https://docs.example.com/",
            al.AskApproval(
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
def test_network_policy_decides_by_scheme_and_host(url: str, decision: al.PolicyVerdict) -> None:
    assert POLICY.evaluate(al.NetworkAccess(url)) == decision


def test_network_policy_options_and_other_requests() -> None:
    strict = NetworkPolicy(allow=["example.com"], unknown="deny", schemes=["HTTPS", "wss"])
    assert strict.evaluate(al.NetworkAccess("wss://example.com/socket")) == al.Allow()
    assert strict.evaluate(al.NetworkAccess("https://example.org/")) == denied(
        "cannot access 'https://example.org/': host 'example.org' is not on the allow list "
        "(example.com)"
    )
    assert strict.evaluate(al.NetworkAccess("http://example.com/")) == denied(
        "cannot access 'http://example.com/': scheme 'http' is not allowed (allowed: https, wss)"
    )
    assert NetworkPolicy(allow=["*"]).evaluate(al.NetworkAccess("https://any.where/")) == al.Allow()
    assert NetworkPolicy(unknown="deny").evaluate(al.NetworkAccess("x.org")) == denied(
        "cannot access 'x.org': host 'x.org' is not on the allow list (none)"
    )
    assert strict.evaluate(al.FileSystemRead("/x")) == al.Abstain()
    assert strict.evaluate(al.ShellCommand(["curl", "https://x.org"])) == al.Abstain()
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
    policy = al.CommandPolicy(allow=["make"], deny=["rm"], cwd_roots=[repo], base=str(repo))

    def outside(shown: str, real: Path) -> al.Deny:
        return al.Deny(
            "command_not_allowed",
            f"cannot run 'make' in {shown}: it resolves to {real}, outside the allowed working "
            f"directories ({repo}); pass a cwd under one of them",
        )

    assert policy.evaluate(al.ShellCommand(["make"])) == al.Allow()  # base is inside
    assert policy.evaluate(al.ShellCommand(["make"], cwd="src")) == al.Allow()
    assert policy.evaluate(al.ShellCommand(["make"], cwd=str(repo / "src"))) == al.Allow()
    assert policy.evaluate(al.ShellCommand(["make"], cwd="..")) == outside("'..'", dirs)
    assert policy.evaluate(al.ShellCommand(["make"], cwd="src/../..")) == outside(
        "'src/../..'", dirs
    )
    assert policy.evaluate(al.ShellCommand(["make"], cwd="out")) == outside(
        "'out'", dirs / "elsewhere"
    )
    assert policy.evaluate(al.ShellCommand(["make"], cwd="/")) == outside("'/'", Path("/"))
    assert policy.evaluate(al.ShellCommand(["make"], cwd="bad\0dir")) == al.Deny(
        "command_not_allowed", "cannot run 'make' in 'bad\\x00dir': the path contains a NUL byte"
    )
    # the deny list is checked first, the allow list after the directory
    assert policy.evaluate(al.ShellCommand(["rm", "x"], cwd="/")) == al.Deny(
        "command_not_allowed", "command 'rm x' is not allowed: 'rm' is on the deny list"
    )
    assert policy.evaluate(al.ShellCommand(["curl"], cwd="src")) == al.AskApproval(
        "sensitive_command", "Run curl (in src)"
    )
    elsewhere = al.CommandPolicy(allow=["make"], cwd_roots=[repo], base=str(dirs / "elsewhere"))
    assert elsewhere.evaluate(al.ShellCommand(["make"])) == al.Deny(
        "command_not_allowed",
        f"cannot run 'make' in the default directory: it resolves to {dirs / 'elsewhere'}, "
        f"outside the allowed working directories ({repo}); pass a cwd under one of them",
    )
    # without cwd_roots the directory is not looked at
    assert al.CommandPolicy(allow=["make"]).evaluate(al.ShellCommand(["make"], cwd="/")) == (
        al.Allow()
    )
    with pytest.raises(TypeError, match="expected a collection of paths, got the single path"):
        al.CommandPolicy(cwd_roots=str(repo))
