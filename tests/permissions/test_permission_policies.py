"""Request kinds, decisions and the built-in policies, decided directly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentloop as al
import agentloop.permissions


def test_request_kinds_have_kind_summary_and_metadata() -> None:
    requests: list[al.permissions.PermissionRequest] = [
        al.permissions.FileSystemRead("/a", metadata={"m": 1}),
        al.permissions.FileSystemWrite("/b"),
        al.permissions.ShellCommand(["git", "status"], cwd="/repo"),
        al.permissions.NetworkAccess("https://Example.com:8443/x"),
        al.permissions.CustomPermission("mcp.connect", "Connect MCP server docs"),
        al.permissions.ToolInvocation("rm", al.ToolAnnotations(destructive=True)),
    ]
    assert [(r.kind, r.summary, dict(r.metadata)) for r in requests] == [
        ("filesystem.read", "Read /a", {"m": 1}),
        ("filesystem.write", "Write /b", {}),
        ("shell.command", "git status (in /repo)", {}),
        ("network.request", "Access https://Example.com:8443/x", {}),
        ("mcp.connect", "Connect MCP server docs", {}),
        ("tool.invoke", "Call tool rm", {}),
    ]
    assert al.permissions.NetworkAccess("https://Example.com:8443/x").host == "example.com"
    assert al.permissions.ShellCommand(["git", "status"]).program == "git"
    assert al.permissions.ShellCommand(["git", "status"], cwd="/repo").command == "git status"
    assert (
        al.permissions.NetworkAccess("https://x.org").scheme,
        al.permissions.NetworkAccess("x.org").scheme,
    ) == (
        "https",
        "",
    )
    assert al.permissions.ShellCommand([]).program == ""


def test_allow_all_and_deny_all() -> None:
    assert (
        al.permissions.AllowAll().evaluate(al.permissions.FileSystemWrite("/x"))
        == al.permissions.Allow()
    )
    assert al.permissions.DenyAll().evaluate(
        al.permissions.FileSystemWrite("/x")
    ) == al.permissions.Deny("policy_denied", "all tool permissions are denied (Write /x)")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """workspace/{notes.txt, docs/guide.md, inner -> docs, escape -> ../secret}, secret/key."""
    root = tmp_path.resolve()
    (root / "workspace" / "docs").mkdir(parents=True)
    (root / "workspace" / "notes.txt").write_text("n")
    (root / "workspace" / "docs" / "guide.md").write_text("g")
    (root / "secret").mkdir()
    (root / "secret" / "key").write_text("k")
    (root / "workspace" / "inner").symlink_to(root / "workspace" / "docs")
    (root / "workspace" / "escape").symlink_to(root / "secret")
    return root


def outside(path: str, real: Path, verb: str, roots: str) -> al.permissions.Deny:
    return al.permissions.Deny(
        "path_not_allowed",
        f"cannot {verb} {path!r}: it resolves to {real}, outside the allowed roots ({roots}); "
        "use a path under one of them",
    )


def test_path_policy_allows_inside_and_denies_traversal(tree: Path) -> None:
    ws = tree / "workspace"
    policy = al.permissions.PathPolicy(allowed_roots=[ws], base=str(ws))
    assert policy.evaluate(al.permissions.FileSystemRead("notes.txt")) == al.permissions.Allow()
    assert (
        policy.evaluate(al.permissions.FileSystemWrite("new/file.txt")) == al.permissions.Allow()
    )  # does not exist yet
    assert (
        policy.evaluate(al.permissions.FileSystemRead(str(ws / "docs" / "guide.md")))
        == al.permissions.Allow()
    )
    assert (
        policy.evaluate(al.permissions.FileSystemRead("docs/../notes.txt"))
        == al.permissions.Allow()
    )
    assert (
        policy.evaluate(al.permissions.FileSystemRead("inner/guide.md")) == al.permissions.Allow()
    )  # link stays inside
    assert policy.evaluate(al.permissions.FileSystemRead(".")) == al.permissions.Allow()
    roots = str(ws)
    assert policy.evaluate(al.permissions.FileSystemRead("../secret/key")) == outside(
        "../secret/key", tree / "secret" / "key", "read", roots
    )
    assert policy.evaluate(al.permissions.FileSystemRead("docs/../../secret/key")) == outside(
        "docs/../../secret/key", tree / "secret" / "key", "read", roots
    )
    assert policy.evaluate(al.permissions.FileSystemWrite("escape/key")) == outside(
        "escape/key", tree / "secret" / "key", "write", roots
    )
    assert policy.evaluate(al.permissions.FileSystemRead("/etc/passwd")) == outside(
        "/etc/passwd", Path(os.path.realpath("/etc/passwd")), "read", roots
    )
    # a sibling whose name merely starts with the root's name is outside too
    assert policy.evaluate(al.permissions.FileSystemRead(str(ws) + "-other/x")) == outside(
        str(ws) + "-other/x", Path(str(ws) + "-other/x"), "read", roots
    )
    assert policy.evaluate(al.permissions.FileSystemRead("bad\0name")) == al.permissions.Deny(
        "path_not_allowed",
        "cannot read 'bad\\x00name': it cannot be resolved: the path contains a NUL byte",
    )
    assert policy.evaluate(al.permissions.ShellCommand(["ls"])) == al.permissions.NoVerdict()


def test_path_policy_resolves_roots_given_through_symlinks(tree: Path) -> None:
    (tree / "ws-link").symlink_to(tree / "workspace")
    policy = al.permissions.PathPolicy(allowed_roots=[tree / "ws-link"])
    assert (
        policy.evaluate(al.permissions.FileSystemRead(str(tree / "workspace" / "notes.txt")))
        == al.permissions.Allow()
    )


def test_path_policy_read_only_roots(tree: Path) -> None:
    ws = tree / "workspace"
    policy = al.permissions.PathPolicy(
        allowed_roots=[ws], read_only_roots=[ws / "docs", tree / "secret"]
    )
    assert (
        policy.evaluate(al.permissions.FileSystemRead(str(ws / "docs" / "guide.md")))
        == al.permissions.Allow()
    )
    assert policy.evaluate(
        al.permissions.FileSystemWrite(str(ws / "docs" / "guide.md"))
    ) == al.permissions.Deny(
        "path_not_allowed",
        f"cannot write {str(ws / 'docs' / 'guide.md')!r}: it is under the read-only root "
        f"{ws / 'docs'}",
    )
    assert policy.evaluate(
        al.permissions.FileSystemWrite(str(ws / "inner" / "x"))
    ) == al.permissions.Deny(
        "path_not_allowed",
        f"cannot write {str(ws / 'inner' / 'x')!r}: it is under the read-only root {ws / 'docs'}",
    )
    assert (
        policy.evaluate(al.permissions.FileSystemRead(str(tree / "secret" / "key")))
        == al.permissions.Allow()
    )
    assert policy.evaluate(
        al.permissions.FileSystemWrite(str(ws / "escape" / "key"))
    ) == al.permissions.Deny(
        "path_not_allowed",
        f"cannot write {str(ws / 'escape' / 'key')!r}: it is under the read-only root "
        f"{tree / 'secret'}",
    )


def test_path_policy_can_ask_instead_of_denying(tree: Path) -> None:
    policy = al.permissions.PathPolicy(allowed_roots=[tree / "workspace"], outside="approve")
    assert policy.evaluate(
        al.permissions.FileSystemWrite(str(tree / "secret" / "key"))
    ) == al.permissions.AskApproval(
        "sensitive_path", f"Write {tree / 'secret' / 'key'} (outside the allowed roots)"
    )


def test_command_policy() -> None:
    policy = al.permissions.CommandPolicy(allow=["ls", "git"], deny=["rm", "sudo"])
    assert policy.evaluate(al.permissions.ShellCommand(["git", "status"])) == al.permissions.Allow()
    assert policy.evaluate(al.permissions.ShellCommand(["rm", "-rf", "/"])) == al.permissions.Deny(
        "command_not_allowed", "command 'rm -rf /' is not allowed: 'rm' is on the deny list"
    )
    assert policy.evaluate(al.permissions.ShellCommand(["/bin/rm", "x"])) == al.permissions.Deny(
        "command_not_allowed", "command '/bin/rm x' is not allowed: '/bin/rm' is on the deny list"
    )
    # a path matches a bare allow entry only if it is the file that name runs
    assert policy.evaluate(
        al.permissions.ShellCommand(["/tmp/evil/ls"])
    ) == al.permissions.AskApproval("sensitive_command", "Run /tmp/evil/ls")
    assert policy.evaluate(
        al.permissions.ShellCommand(["curl", "x"])
    ) == al.permissions.AskApproval("sensitive_command", "Run curl x")
    strict = al.permissions.CommandPolicy(allow=["ls"], unknown="deny")
    assert strict.evaluate(al.permissions.ShellCommand(["curl", "x"])) == al.permissions.Deny(
        "command_not_allowed",
        "command 'curl x' is not allowed: 'curl' is not on the allow list (ls)",
    )
    assert strict.evaluate(al.permissions.ShellCommand([])) == al.permissions.Deny(
        "command_not_allowed", "cannot run an empty command"
    )
    assert strict.evaluate(al.permissions.FileSystemRead("/x")) == al.permissions.NoVerdict()
    with pytest.raises(ValueError, match="'unknown' must be in"):
        al.permissions.CommandPolicy(unknown="allow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a collection of names, got the string 'ls'"):
        al.permissions.CommandPolicy(allow="ls")


def invocation(name: str, **annotations: bool) -> al.permissions.ToolInvocation:
    return al.permissions.ToolInvocation(name, al.ToolAnnotations(**annotations))


def test_tool_policy_by_name_then_by_annotation() -> None:
    policy = al.permissions.ToolPolicy(
        allow=["deploy_preview"],
        deny=["drop_db"],
        require_approval=["deploy"],
        destructive="approve",
        read_only="allow",
        open_world="deny",
    )
    assert policy.evaluate(invocation("drop_db", read_only=True)) == al.permissions.Deny(
        "tool_not_allowed", "tool 'drop_db' is not allowed"
    )
    assert policy.evaluate(invocation("deploy")) == al.permissions.AskApproval(
        "policy_requires_confirmation", "Call tool deploy"
    )
    assert policy.evaluate(invocation("deploy_preview", open_world=True)) == al.permissions.Allow()
    assert policy.evaluate(invocation("rm", destructive=True)) == al.permissions.AskApproval(
        "destructive_tool", "Call tool rm (destructive)"
    )
    assert policy.evaluate(invocation("cat", read_only=True)) == al.permissions.Allow()
    # the strictest matching annotation rule wins
    assert policy.evaluate(
        invocation("fetch", read_only=True, open_world=True)
    ) == al.permissions.Deny(
        "tool_not_allowed", "tool 'fetch' is open-world, and open-world tools are not allowed"
    )
    assert policy.evaluate(invocation("plain", idempotent=True)) == al.permissions.NoVerdict()
    assert policy.evaluate(al.permissions.FileSystemRead("/x")) == al.permissions.NoVerdict()


def test_kind_policy_matches_patterns() -> None:
    policy = al.permissions.RequestKindPolicy(
        allow=["network.*"], deny=["mcp.use_auth_scope"], require_approval=["mcp.*"]
    )
    assert policy.evaluate(al.permissions.NetworkAccess("https://x")) == al.permissions.Allow()
    assert policy.evaluate(
        al.permissions.CustomPermission("mcp.use_auth_scope", "Use scope")
    ) == al.permissions.Deny(
        "policy_denied", "mcp.use_auth_scope requests are not allowed (Use scope)"
    )
    assert policy.evaluate(
        al.permissions.CustomPermission("mcp.connect", "Connect")
    ) == al.permissions.AskApproval("policy_requires_confirmation", "Connect")
    assert policy.evaluate(al.permissions.FileSystemRead("/x")) == al.permissions.NoVerdict()


class Recording:
    def __init__(self, answer: al.permissions.PolicyVerdict) -> None:
        self.answer = answer
        self.seen: list[str] = []

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.PolicyVerdict:
        self.seen.append(request.kind)
        return self.answer


def test_policy_chain_first_non_abstaining_policy_decides() -> None:
    abstains, denies, allows = (
        Recording(al.permissions.NoVerdict()),
        Recording(al.permissions.Deny("x", "no")),
        Recording(al.permissions.Allow()),
    )
    chain = al.permissions.PolicyChain(abstains, denies, allows)
    assert chain.evaluate(al.permissions.FileSystemRead("/x")) == al.permissions.Deny("x", "no")
    assert (abstains.seen, denies.seen, allows.seen) == (
        ["filesystem.read"],
        ["filesystem.read"],
        [],
    )
    assert isinstance(chain, al.permissions.PermissionChecker)
    assert (
        al.permissions.PolicyChain(abstains).evaluate(al.permissions.FileSystemRead("/x"))
        == al.permissions.Allow()
    )
    deny_rest = al.permissions.PolicyChain(
        abstains, fallback=al.permissions.Deny("policy_denied", "nobody decided")
    )
    assert deny_rest.evaluate(al.permissions.FileSystemRead("/x")) == al.permissions.Deny(
        "policy_denied", "nobody decided"
    )
    # plain checkers compose too: they never abstain
    assert al.permissions.PolicyChain(al.permissions.DenyAll(), allows).evaluate(
        al.permissions.FileSystemRead("/x")
    ) == al.permissions.Deny("policy_denied", "all tool permissions are denied (Read /x)")


def test_policy_chain_refuses_bad_answers() -> None:
    with pytest.raises(TypeError) as caught:
        al.permissions.PolicyChain(fallback=al.permissions.NoVerdict())  # type: ignore[arg-type]
    assert str(caught.value) == (
        "PolicyChain fallback must be Allow, Deny or AskApproval, got NoVerdict()"
    )
    with pytest.raises(TypeError) as caught:
        al.permissions.PolicyChain(Recording("yes")).evaluate(al.permissions.FileSystemRead("/x"))  # type: ignore[arg-type]
    assert str(caught.value) == (
        "policy Recording returned 'yes' for filesystem.read; expected Allow, Deny, "
        "AskApproval or NoVerdict"
    )


def test_path_policy_corner_cases(tree: Path) -> None:
    ws = tree / "workspace"
    (ws / "dangling").symlink_to(tree / "secret" / "not-yet")  # a write would land outside
    (ws / "hop").symlink_to(ws / "escape")  # a link to a link that leaves
    (ws / "loop-a").symlink_to(ws / "loop-b")
    (ws / "loop-b").symlink_to(ws / "loop-a")
    policy = al.permissions.PathPolicy(allowed_roots=[ws], base=str(ws))
    roots = str(ws)
    assert policy.evaluate(al.permissions.FileSystemWrite("dangling")) == al.permissions.Deny(
        "path_not_allowed",
        "cannot write 'dangling': it cannot be resolved: a symbolic link leads to "
        f"{tree / 'secret' / 'not-yet'}, which does not exist",
    )
    assert policy.evaluate(al.permissions.FileSystemRead("hop/key")) == outside(
        "hop/key", tree / "secret" / "key", "read", roots
    )
    # a loop cannot be resolved, nor can an empty path
    assert policy.evaluate(al.permissions.FileSystemRead("loop-a")) == al.permissions.Deny(
        "path_not_allowed",
        "cannot read 'loop-a': it cannot be resolved: more than 40 symbolic links (a loop or "
        "a chain that is too long)",
    )
    assert policy.evaluate(al.permissions.FileSystemRead("")) == al.permissions.Deny(
        "path_not_allowed", "cannot read '': it cannot be resolved: the path is empty"
    )
    assert (
        policy.evaluate(al.permissions.FileSystemRead(".//docs///guide.md"))
        == al.permissions.Allow()
    )
    assert (
        policy.evaluate(al.permissions.FileSystemRead("~/x")) == al.permissions.Allow()
    )  # no ~ expansion: ws/~/x
    assert (
        policy.evaluate(al.permissions.FileSystemRead("/../" + str(ws / "notes.txt")))
        == al.permissions.Allow()
    )
    assert policy.evaluate(al.permissions.FileSystemRead("/..")) == outside(
        "/..", Path("/"), "read", roots
    )
    # roots may be given with .. and relative to the working directory
    relative = al.permissions.PathPolicy(allowed_roots=[str(ws / "docs" / "..")], base="/")
    assert (
        relative.evaluate(al.permissions.FileSystemRead(str(ws / "notes.txt")))
        == al.permissions.Allow()
    )
    # a relative path without base is resolved against the process's working directory
    cwd_policy = al.permissions.PathPolicy(allowed_roots=[os.getcwd()])
    assert cwd_policy.evaluate(al.permissions.FileSystemRead("some/file")) == al.permissions.Allow()
    assert cwd_policy.resolve("some/../file") == os.path.join(os.path.realpath(os.getcwd()), "file")
