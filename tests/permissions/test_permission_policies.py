"""Request kinds, decisions and the built-in policies, decided directly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentloop as al


def test_request_kinds_have_kind_summary_and_metadata() -> None:
    requests: list[al.PermissionRequest] = [
        al.FileSystemRead("/a", metadata={"m": 1}),
        al.FileSystemWrite("/b"),
        al.ShellCommand(["git", "status"], cwd="/repo"),
        al.NetworkAccess("https://Example.com:8443/x"),
        al.CustomPermission("mcp.connect", "Connect MCP server docs"),
        al.ToolInvocation("rm", al.ToolAnnotations(destructive=True)),
    ]
    assert [(r.kind, r.summary, dict(r.metadata)) for r in requests] == [
        ("filesystem.read", "Read /a", {"m": 1}),
        ("filesystem.write", "Write /b", {}),
        ("shell.command", "git status (in /repo)", {}),
        ("network.request", "Access https://Example.com:8443/x", {}),
        ("mcp.connect", "Connect MCP server docs", {}),
        ("tool.invoke", "Call tool rm", {}),
    ]
    assert al.NetworkAccess("https://Example.com:8443/x").host == "example.com"
    assert al.ShellCommand(["git", "status"]).program == "git"
    assert al.ShellCommand(["git", "status"], cwd="/repo").command == "git status"
    assert (al.NetworkAccess("https://x.org").scheme, al.NetworkAccess("x.org").scheme) == (
        "https",
        "",
    )
    assert al.ShellCommand([]).program == ""


def test_allow_all_and_deny_all() -> None:
    assert al.AllowAll().evaluate(al.FileSystemWrite("/x")) == al.Allow()
    assert al.DenyAll().evaluate(al.FileSystemWrite("/x")) == al.Deny(
        "policy_denied", "all tool permissions are denied (Write /x)"
    )


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


def outside(path: str, real: Path, verb: str, roots: str) -> al.Deny:
    return al.Deny(
        "path_not_allowed",
        f"cannot {verb} {path!r}: it resolves to {real}, outside the allowed roots ({roots}); "
        "use a path under one of them",
    )


def test_path_policy_allows_inside_and_denies_traversal(tree: Path) -> None:
    ws = tree / "workspace"
    policy = al.PathPolicy(allowed_roots=[ws], base=str(ws))
    assert policy.evaluate(al.FileSystemRead("notes.txt")) == al.Allow()
    assert policy.evaluate(al.FileSystemWrite("new/file.txt")) == al.Allow()  # does not exist yet
    assert policy.evaluate(al.FileSystemRead(str(ws / "docs" / "guide.md"))) == al.Allow()
    assert policy.evaluate(al.FileSystemRead("docs/../notes.txt")) == al.Allow()
    assert policy.evaluate(al.FileSystemRead("inner/guide.md")) == al.Allow()  # link stays inside
    assert policy.evaluate(al.FileSystemRead(".")) == al.Allow()
    roots = str(ws)
    assert policy.evaluate(al.FileSystemRead("../secret/key")) == outside(
        "../secret/key", tree / "secret" / "key", "read", roots
    )
    assert policy.evaluate(al.FileSystemRead("docs/../../secret/key")) == outside(
        "docs/../../secret/key", tree / "secret" / "key", "read", roots
    )
    assert policy.evaluate(al.FileSystemWrite("escape/key")) == outside(
        "escape/key", tree / "secret" / "key", "write", roots
    )
    assert policy.evaluate(al.FileSystemRead("/etc/passwd")) == outside(
        "/etc/passwd", Path(os.path.realpath("/etc/passwd")), "read", roots
    )
    # a sibling whose name merely starts with the root's name is outside too
    assert policy.evaluate(al.FileSystemRead(str(ws) + "-other/x")) == outside(
        str(ws) + "-other/x", Path(str(ws) + "-other/x"), "read", roots
    )
    assert policy.evaluate(al.FileSystemRead("bad\0name")) == al.Deny(
        "path_not_allowed",
        "cannot read 'bad\\x00name': it cannot be resolved: the path contains a NUL byte",
    )
    assert policy.evaluate(al.ShellCommand(["ls"])) == al.NoVerdict()


def test_path_policy_resolves_roots_given_through_symlinks(tree: Path) -> None:
    (tree / "ws-link").symlink_to(tree / "workspace")
    policy = al.PathPolicy(allowed_roots=[tree / "ws-link"])
    assert policy.evaluate(al.FileSystemRead(str(tree / "workspace" / "notes.txt"))) == al.Allow()


def test_path_policy_read_only_roots(tree: Path) -> None:
    ws = tree / "workspace"
    policy = al.PathPolicy(allowed_roots=[ws], read_only_roots=[ws / "docs", tree / "secret"])
    assert policy.evaluate(al.FileSystemRead(str(ws / "docs" / "guide.md"))) == al.Allow()
    assert policy.evaluate(al.FileSystemWrite(str(ws / "docs" / "guide.md"))) == al.Deny(
        "path_not_allowed",
        f"cannot write {str(ws / 'docs' / 'guide.md')!r}: it is under the read-only root "
        f"{ws / 'docs'}",
    )
    assert policy.evaluate(al.FileSystemWrite(str(ws / "inner" / "x"))) == al.Deny(
        "path_not_allowed",
        f"cannot write {str(ws / 'inner' / 'x')!r}: it is under the read-only root {ws / 'docs'}",
    )
    assert policy.evaluate(al.FileSystemRead(str(tree / "secret" / "key"))) == al.Allow()
    assert policy.evaluate(al.FileSystemWrite(str(ws / "escape" / "key"))) == al.Deny(
        "path_not_allowed",
        f"cannot write {str(ws / 'escape' / 'key')!r}: it is under the read-only root "
        f"{tree / 'secret'}",
    )


def test_path_policy_can_ask_instead_of_denying(tree: Path) -> None:
    policy = al.PathPolicy(allowed_roots=[tree / "workspace"], outside="approve")
    assert policy.evaluate(al.FileSystemWrite(str(tree / "secret" / "key"))) == al.AskApproval(
        "sensitive_path", f"Write {tree / 'secret' / 'key'} (outside the allowed roots)"
    )


def test_command_policy() -> None:
    policy = al.CommandPolicy(allow=["ls", "git"], deny=["rm", "sudo"])
    assert policy.evaluate(al.ShellCommand(["git", "status"])) == al.Allow()
    assert policy.evaluate(al.ShellCommand(["rm", "-rf", "/"])) == al.Deny(
        "command_not_allowed", "command 'rm -rf /' is not allowed: 'rm' is on the deny list"
    )
    assert policy.evaluate(al.ShellCommand(["/bin/rm", "x"])) == al.Deny(
        "command_not_allowed", "command '/bin/rm x' is not allowed: '/bin/rm' is on the deny list"
    )
    # a path matches a bare allow entry only if it is the file that name runs
    assert policy.evaluate(al.ShellCommand(["/tmp/evil/ls"])) == al.AskApproval(
        "sensitive_command", "Run /tmp/evil/ls"
    )
    assert policy.evaluate(al.ShellCommand(["curl", "x"])) == al.AskApproval(
        "sensitive_command", "Run curl x"
    )
    strict = al.CommandPolicy(allow=["ls"], unknown="deny")
    assert strict.evaluate(al.ShellCommand(["curl", "x"])) == al.Deny(
        "command_not_allowed",
        "command 'curl x' is not allowed: 'curl' is not on the allow list (ls)",
    )
    assert strict.evaluate(al.ShellCommand([])) == al.Deny(
        "command_not_allowed", "cannot run an empty command"
    )
    assert strict.evaluate(al.FileSystemRead("/x")) == al.NoVerdict()
    with pytest.raises(ValueError, match="'unknown' must be in"):
        al.CommandPolicy(unknown="allow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a collection of names, got the string 'ls'"):
        al.CommandPolicy(allow="ls")


def invocation(name: str, **annotations: bool) -> al.ToolInvocation:
    return al.ToolInvocation(name, al.ToolAnnotations(**annotations))


def test_tool_policy_by_name_then_by_annotation() -> None:
    policy = al.ToolPolicy(
        allow=["deploy_preview"],
        deny=["drop_db"],
        require_approval=["deploy"],
        destructive="approve",
        read_only="allow",
        open_world="deny",
    )
    assert policy.evaluate(invocation("drop_db", read_only=True)) == al.Deny(
        "tool_not_allowed", "tool 'drop_db' is not allowed"
    )
    assert policy.evaluate(invocation("deploy")) == al.AskApproval(
        "policy_requires_confirmation", "Call tool deploy"
    )
    assert policy.evaluate(invocation("deploy_preview", open_world=True)) == al.Allow()
    assert policy.evaluate(invocation("rm", destructive=True)) == al.AskApproval(
        "destructive_tool", "Call tool rm (destructive)"
    )
    assert policy.evaluate(invocation("cat", read_only=True)) == al.Allow()
    # the strictest matching annotation rule wins
    assert policy.evaluate(invocation("fetch", read_only=True, open_world=True)) == al.Deny(
        "tool_not_allowed", "tool 'fetch' is open-world, and open-world tools are not allowed"
    )
    assert policy.evaluate(invocation("plain", idempotent=True)) == al.NoVerdict()
    assert policy.evaluate(al.FileSystemRead("/x")) == al.NoVerdict()


def test_kind_policy_matches_patterns() -> None:
    policy = al.RequestKindPolicy(
        allow=["network.*"], deny=["mcp.use_auth_scope"], require_approval=["mcp.*"]
    )
    assert policy.evaluate(al.NetworkAccess("https://x")) == al.Allow()
    assert policy.evaluate(al.CustomPermission("mcp.use_auth_scope", "Use scope")) == al.Deny(
        "policy_denied", "mcp.use_auth_scope requests are not allowed (Use scope)"
    )
    assert policy.evaluate(al.CustomPermission("mcp.connect", "Connect")) == al.AskApproval(
        "policy_requires_confirmation", "Connect"
    )
    assert policy.evaluate(al.FileSystemRead("/x")) == al.NoVerdict()


class Recording:
    def __init__(self, answer: al.PolicyVerdict) -> None:
        self.answer = answer
        self.seen: list[str] = []

    def evaluate(self, request: al.PermissionRequest) -> al.PolicyVerdict:
        self.seen.append(request.kind)
        return self.answer


def test_policy_chain_first_non_abstaining_policy_decides() -> None:
    abstains, denies, allows = (
        Recording(al.NoVerdict()),
        Recording(al.Deny("x", "no")),
        Recording(al.Allow()),
    )
    chain = al.PolicyChain(abstains, denies, allows)
    assert chain.evaluate(al.FileSystemRead("/x")) == al.Deny("x", "no")
    assert (abstains.seen, denies.seen, allows.seen) == (
        ["filesystem.read"],
        ["filesystem.read"],
        [],
    )
    assert isinstance(chain, al.PermissionChecker)
    assert al.PolicyChain(abstains).evaluate(al.FileSystemRead("/x")) == al.Allow()
    deny_rest = al.PolicyChain(abstains, fallback=al.Deny("policy_denied", "nobody decided"))
    assert deny_rest.evaluate(al.FileSystemRead("/x")) == al.Deny("policy_denied", "nobody decided")
    # plain checkers compose too: they never abstain
    assert al.PolicyChain(al.DenyAll(), allows).evaluate(al.FileSystemRead("/x")) == al.Deny(
        "policy_denied", "all tool permissions are denied (Read /x)"
    )


def test_policy_chain_refuses_bad_answers() -> None:
    with pytest.raises(TypeError) as caught:
        al.PolicyChain(fallback=al.NoVerdict())  # type: ignore[arg-type]
    assert str(caught.value) == (
        "PolicyChain fallback must be Allow, Deny or AskApproval, got NoVerdict()"
    )
    with pytest.raises(TypeError) as caught:
        al.PolicyChain(Recording("yes")).evaluate(al.FileSystemRead("/x"))  # type: ignore[arg-type]
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
    policy = al.PathPolicy(allowed_roots=[ws], base=str(ws))
    roots = str(ws)
    assert policy.evaluate(al.FileSystemWrite("dangling")) == al.Deny(
        "path_not_allowed",
        "cannot write 'dangling': it cannot be resolved: a symbolic link leads to "
        f"{tree / 'secret' / 'not-yet'}, which does not exist",
    )
    assert policy.evaluate(al.FileSystemRead("hop/key")) == outside(
        "hop/key", tree / "secret" / "key", "read", roots
    )
    # a loop cannot be resolved, nor can an empty path
    assert policy.evaluate(al.FileSystemRead("loop-a")) == al.Deny(
        "path_not_allowed",
        "cannot read 'loop-a': it cannot be resolved: more than 40 symbolic links (a loop or "
        "a chain that is too long)",
    )
    assert policy.evaluate(al.FileSystemRead("")) == al.Deny(
        "path_not_allowed", "cannot read '': it cannot be resolved: the path is empty"
    )
    assert policy.evaluate(al.FileSystemRead(".//docs///guide.md")) == al.Allow()
    assert policy.evaluate(al.FileSystemRead("~/x")) == al.Allow()  # no ~ expansion: ws/~/x
    assert policy.evaluate(al.FileSystemRead("/../" + str(ws / "notes.txt"))) == al.Allow()
    assert policy.evaluate(al.FileSystemRead("/..")) == outside("/..", Path("/"), "read", roots)
    # roots may be given with .. and relative to the working directory
    relative = al.PathPolicy(allowed_roots=[str(ws / "docs" / "..")], base="/")
    assert relative.evaluate(al.FileSystemRead(str(ws / "notes.txt"))) == al.Allow()
    # a relative path without base is resolved against the process's working directory
    cwd_policy = al.PathPolicy(allowed_roots=[os.getcwd()])
    assert cwd_policy.evaluate(al.FileSystemRead("some/file")) == al.Allow()
    assert cwd_policy.resolve("some/../file") == os.path.join(os.path.realpath(os.getcwd()), "file")
