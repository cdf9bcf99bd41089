"""Permissions through the driver: denials become results, approvals become interrupts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import agentloop as al
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, tool_calls

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from tools_support import outcome, results_of, run_round, start, user

pytestmark = pytest.mark.anyio

ETC_PASSWD = Path("/etc/passwd").resolve()

opened: list[str] = []


@al.tool(read_only=True, permissions=lambda args: [al.permissions.FileSystemRead(args["path"])])
def read_file(path: str, ctx: al.ToolContext) -> str:
    """Read a text file (relative paths are relative to the workspace in ``ctx.resources``)."""
    opened.append(path)
    return (Path(ctx.resources) / path).read_text()


ran: list[list[str]] = []


@al.tool(destructive=True, permissions=lambda args: [al.permissions.ShellCommand(args["argv"])])
async def shell(argv: list[str]) -> str:
    """Run a command."""
    ran.append(argv)
    return "ran " + " ".join(argv)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path.resolve()
    (root / "ws").mkdir()
    (root / "ws" / "notes.txt").write_text("hello")
    (root / "secret.txt").write_text("top secret")
    (root / "ws" / "link").symlink_to(root / "secret.txt")
    return root


def denied(message: str, code: str = "path_not_allowed") -> str:
    return f"tool permission denied: {message} (code: {code})"


async def test_path_traversal_attempts_are_denied_and_never_run(workspace: Path) -> None:
    opened.clear()
    ws = workspace / "ws"
    secret = workspace / "secret.txt"
    policy = al.permissions.PolicyChain(al.permissions.PathPolicy(allowed_roots=[ws], base=str(ws)))
    attempts = ["notes.txt", "../secret.txt", "link", str(secret), "/etc/passwd"]
    results = await run_round(
        [read_file],
        [call("read_file", {"path": p}, id=f"call-{i}") for i, p in enumerate(attempts, 1)],
        permissions=policy,
        resources=ws,
    )

    def escape(path: str, real: Path) -> str:
        return denied(
            f"cannot read {path!r}: it resolves to {real}, outside the allowed roots ({ws}); "
            "use a path under one of them"
        )

    assert [(r.output, outcome(r)) for r in results] == [
        ("hello", None),
        (escape("../secret.txt", secret), "permission_denied"),
        (escape("link", secret), "permission_denied"),
        (escape(str(secret), secret), "permission_denied"),
        (escape("/etc/passwd", ETC_PASSWD), "permission_denied"),
    ]
    assert opened == ["notes.txt"]


async def test_a_denied_shell_command_becomes_an_error_result() -> None:
    ran.clear()
    policy = al.permissions.PolicyChain(al.permissions.CommandPolicy(allow=["ls"], deny=["rm"]))
    results = await run_round(
        [shell],
        [
            call("shell", {"argv": ["rm", "-rf", "/"]}, id="call-1"),
            call("shell", {"argv": ["ls"]}, id="call-2"),
        ],
        permissions=policy,
    )
    assert [(r.output, r.is_error, outcome(r)) for r in results] == [
        (
            denied(
                "command 'rm -rf /' is not allowed: 'rm' is on the deny list", "command_not_allowed"
            ),
            True,
            "permission_denied",
        ),
        ("ran ls", False, None),
    ]
    assert ran == [["ls"]]


def approving_chain() -> al.permissions.PolicyChain:
    return al.permissions.PolicyChain(
        al.permissions.ToolPolicy(destructive="approve"), al.permissions.CommandPolicy(allow=["ls"])
    )


async def test_destructive_tools_need_approval_then_run() -> None:
    ran.clear()
    driver, _ = await start(
        [shell], [call("shell", {"argv": ["ls"]}, id="call-1")], permissions=approving_chain()
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    assert (
        step.call_id,
        step.tool_name,
        step.request_kind,
        step.reason,
        step.summary,
        step.id,
    ) == (
        "call-1",
        "shell",
        "tool.invoke",
        "destructive_tool",
        "Call tool shell (destructive)",
        "approval:call-1",
    )
    assert ran == []
    step.approve()
    final = await driver.run_until_blocked()
    assert isinstance(final, al.Finished)
    assert [r.output for r in results_of(driver)] == ["ran ls"]
    assert ran == [["ls"]]


async def test_denied_approval_becomes_a_denied_result() -> None:
    ran.clear()
    driver, _ = await start(
        [shell], [call("shell", {"argv": ["ls"]}, id="call-1")], permissions=approving_chain()
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    step.deny("not today")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    (result,) = results_of(driver)
    assert (result.output, result.is_error, outcome(result)) == ("not today", True, "denied")
    assert ran == []
    al.transcript.validate_transcript(driver.snapshot().transcript)


async def two_pending() -> al.LoopDriver:
    driver, _ = await start(
        [shell],
        [
            call("shell", {"argv": ["ls"]}, id="call-1"),
            call("shell", {"argv": ["pwd"]}, id="call-2"),
        ],
        permissions=approving_chain(),
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    return driver


async def test_answering_an_unknown_call_id_raises_and_changes_nothing() -> None:
    driver = await two_pending()
    before = driver.snapshot()
    with pytest.raises(al.InvalidStateError) as caught:
        driver.answer_approval_for("call-9", al.ApprovalAnswer.approve())
    assert str(caught.value) == (
        "cannot answer the approval for call-9: no approval is pending for it "
        "(pending: call-1, call-2)"
    )
    assert driver.snapshot() == before
    assert driver.state is al.DriverState.AWAITING_APPROVAL


async def test_answering_twice_raises_and_keeps_the_first_answer() -> None:
    ran.clear()
    driver = await two_pending()
    driver.answer_approval_for("call-1", al.ApprovalAnswer.approve())
    with pytest.raises(al.InvalidStateError) as caught:
        driver.answer_approval_for("call-1", al.ApprovalAnswer.deny("changed my mind"))
    assert str(caught.value) == (
        "cannot answer the approval for call-1: it was already answered (approve); "
        "call next() to continue"
    )
    driver.answer_approval_for("call-2", al.ApprovalAnswer.deny("no"))
    with pytest.raises(al.InvalidStateError) as caught:
        driver.answer_approval_for("call-2", al.ApprovalAnswer.approve())
    assert str(caught.value) == (
        "cannot answer the approval for call-2: every pending approval is answered; call next()"
    )
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [(r.output, outcome(r)) for r in results_of(driver)] == [
        ("ran ls", None),
        ("no", "denied"),
    ]


async def test_answering_after_the_turn_was_cancelled_raises() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("shell", {"argv": ["ls"]}, id="call-1"))])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(shell))
        .permissions(approving_chain())
        .cancellation(controller.handle())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s1")
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    controller.interrupt()
    before = driver.snapshot()
    for answer in (step.approve, lambda: step.deny("no"), lambda: step.approve_with({})):
        with pytest.raises(al.InvalidStateError) as caught:
            answer()
        assert str(caught.value) == (
            "cannot answer the approval for call-1: turn turn-1 was cancelled; call next() to "
            "finish it"
        )
    assert driver.snapshot() == before
    assert driver.state is al.DriverState.AWAITING_APPROVAL
    final = await driver.next()
    assert isinstance(final, al.Finished)
    assert final.result.finish_reason is al.FinishReason.CANCELLED
    (result,) = results_of(driver)
    assert outcome(result) == "cancelled"
    al.transcript.validate_transcript(driver.snapshot().transcript)


async def test_approve_with_edited_input_is_validated_again() -> None:
    ran.clear()
    driver, _ = await start(
        [shell], [call("shell", {"argv": ["ls"]}, id="call-1")], permissions=approving_chain()
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    bad: Any = {"argv": "ls"}
    step.approve_with(bad)
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    (result,) = results_of(driver)
    assert (result.output, outcome(result)) == (
        "invalid input for tool 'shell': at $.argv: 'ls' is not of type 'array'",
        "invalid_input",
    )
    assert ran == []


fetched: list[str] = []


@al.tool(open_world=True, permissions=lambda args: [al.permissions.NetworkAccess(args["url"])])
async def fetch(url: str) -> str:
    """Fetch a URL (pretend)."""
    fetched.append(url)
    return f"fetched {url}"


async def test_network_requests_are_allowed_denied_or_asked_by_host() -> None:
    from agentloop.permissions import NetworkPolicy

    fetched.clear()
    policy = al.permissions.PolicyChain(
        NetworkPolicy(allow=["api.example.com"], deny=["*.evil.com"])
    )
    driver, _ = await start(
        [fetch],
        [
            call("fetch", {"url": "https://api.example.com/v1"}, id="call-1"),
            call("fetch", {"url": "https://x.evil.com/steal"}, id="call-2"),
            call("fetch", {"url": "https://docs.python.org/3/"}, id="call-3"),
        ],
        permissions=policy,
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    assert (step.call_id, step.request_kind, step.reason, step.summary) == (
        "call-3",
        "network.request",
        "unknown_target",
        "Access https://docs.python.org/3/ (host docs.python.org is not on the allow list)",
    )
    step.approve()
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [(r.output, outcome(r)) for r in results_of(driver)] == [
        ("fetched https://api.example.com/v1", None),
        (
            denied(
                "cannot access 'https://x.evil.com/steal': host 'x.evil.com' matches '*.evil.com' "
                "on the deny list",
                "network_not_allowed",
            ),
            "permission_denied",
        ),
        ("fetched https://docs.python.org/3/", None),
    ]
    assert fetched == ["https://api.example.com/v1", "https://docs.python.org/3/"]
    al.transcript.validate_transcript(driver.snapshot().transcript)


@al.tool(permissions=lambda args: [al.permissions.ShellCommand(args["argv"], cwd=args["cwd"])])
async def run_in(argv: list[str], cwd: str | None = None) -> str:
    """Run a command in a directory."""
    ran.append(argv)
    return f"ran {' '.join(argv)} in {cwd}"


async def test_a_command_outside_the_working_directory_roots_is_denied(workspace: Path) -> None:
    ran.clear()
    ws = workspace / "ws"
    policy = al.permissions.PolicyChain(
        al.permissions.CommandPolicy(allow=["ls"], cwd_roots=[ws], base=str(ws))
    )
    results = await run_round(
        [run_in],
        [
            call("run_in", {"argv": ["ls"], "cwd": "."}, id="call-1"),
            call("run_in", {"argv": ["ls"], "cwd": "../"}, id="call-2"),
        ],
        permissions=policy,
    )
    assert [(r.output, outcome(r)) for r in results] == [
        ("ran ls in .", None),
        (
            denied(
                f"cannot run 'ls' in '../': it resolves to {workspace}, outside the allowed "
                f"working directories ({ws}); pass a cwd under one of them",
                "command_not_allowed",
            ),
            "permission_denied",
        ),
    ]
    assert ran == [["ls"]]


async def test_approving_the_same_request_object_twice_raises_and_changes_nothing() -> None:
    driver, _ = await start(
        [shell], [call("shell", {"argv": ["ls"]}, id="call-1")], permissions=approving_chain()
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    before = driver.snapshot()
    with pytest.raises(al.InvalidStateError) as caught:
        step.deny("too late")
    assert str(caught.value) == (
        "cannot answer the approval for call-1: every pending approval is answered; call next()"
    )
    assert driver.snapshot() == before
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [r.output for r in results_of(driver)] == ["ran ls"]
