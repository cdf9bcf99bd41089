"""One approval grants exactly what the host was shown; a checker that fails fails one call."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import agentloop as al
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.permissions import PendingPermission
from agentloop.store import MemorySessionStore
from agentloop.testing import call, tool_calls

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from tools_support import outcome, results_of, run_round, start

pytestmark = pytest.mark.anyio

ran: list[Any] = []


def _two_requests(args: Mapping[str, Any]) -> list[al.permissions.PermissionRequest]:
    return [
        al.permissions.FileSystemWrite(args["path"]),
        al.permissions.ShellCommand(["make", "install"]),
    ]


@al.tool(permissions=_two_requests)
async def install(path: str) -> str:
    """Write a file, then run make."""
    ran.append(path)
    return "installed"


def _asking_policy(tmp: Path) -> al.permissions.PolicyChain:
    return al.permissions.PolicyChain(
        al.permissions.PathPolicy(allowed_roots=[tmp / "ws"], outside="approve"),
        al.permissions.CommandPolicy(allow=["ls"]),
    )


async def test_an_approval_shows_every_request_that_needs_it(tmp_path: Path) -> None:
    ran.clear()
    tmp = tmp_path.resolve()  # noqa: ASYNC240
    driver, _ = await start(
        [install],
        [call("install", {"path": str(tmp / "etc")}, id="c1")],
        permissions=_asking_policy(tmp),
    )
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    assert step.requests == (
        PendingPermission(
            "filesystem.write",
            f"Write {tmp}/etc (outside the allowed roots)",
            "sensitive_path",
            repr(al.permissions.FileSystemWrite(str(tmp / "etc"))),
        ),
        PendingPermission(
            "shell.command",
            "Run make install",
            "sensitive_command",
            repr(al.permissions.ShellCommand(["make", "install"])),
        ),
    )
    assert step.summary == f"Write {tmp}/etc (outside the allowed roots); Run make install"
    assert (step.request_kind, step.reason) == ("filesystem.write", "sensitive_path")
    # what the host saw survives a checkpoint
    assert al.structure(al.unstructure(step), al.Step) == step
    step.approve()
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert ran == [str(tmp / "etc")]
    assert [r.output for r in results_of(driver)] == ["installed"]


proposals: list[list[al.permissions.PermissionRequest]] = []


def _changing(args: Mapping[str, Any]) -> list[al.permissions.PermissionRequest]:
    """A call whose requests grow after the first look (as a file system may change)."""
    return proposals.pop(0) if len(proposals) > 1 else proposals[0]


@al.tool(permissions=_changing)
async def shifty() -> str:
    """Asks for more once approved."""
    ran.append("shifty")
    return "done"


async def test_approving_grants_only_the_requests_shown() -> None:
    ran.clear()
    first = al.permissions.CustomPermission("x.read", "Read the inbox")
    second = al.permissions.CustomPermission("x.send", "Send mail as you")
    proposals[:] = [[first], [first, second]]
    policy = al.permissions.PolicyChain(al.permissions.RequestKindPolicy(require_approval=["x.*"]))
    driver, _ = await start([shifty], [call("shifty", {}, id="c1")], permissions=policy)
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    assert [r.summary for r in step.requests] == ["Read the inbox"]
    step.approve()
    # the approval covered the inbox only: sending mail is asked for on its own
    again = await driver.next()
    assert isinstance(again, al.ApprovalRequest)
    assert [(r.kind, r.summary) for r in again.requests] == [("x.send", "Send mail as you")]
    assert ran == []
    again.deny("no mail")
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert ran == []
    (result,) = results_of(driver)
    assert (result.output, outcome(result)) == ("no mail", "denied")


async def test_a_denied_request_denies_the_call_without_asking() -> None:
    ran.clear()
    proposals[:] = [
        [
            al.permissions.CustomPermission("x.read", "Read"),
            al.permissions.CustomPermission("y.wipe", "Wipe"),
        ]
    ]
    policy = al.permissions.PolicyChain(
        al.permissions.RequestKindPolicy(require_approval=["x.*"], deny=["y.*"])
    )
    (result,) = await run_round([shifty], [call("shifty", {}, id="c1")], permissions=policy)
    assert result.output == (
        "tool permission denied: y.wipe requests are not allowed (Wipe) (code: policy_denied)"
    )
    assert outcome(result) == "permission_denied"
    assert ran == []


class Raising:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "tool.invoke":
            return al.permissions.Allow()
        raise self.error


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")

    def __repr__(self) -> str:
        raise RuntimeError("no")


class Answers:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def evaluate(self, request: al.permissions.PermissionRequest) -> Any:
        return al.permissions.Allow() if request.kind == "tool.invoke" else self.answer


@pytest.mark.parametrize(
    ("checker", "text"),
    [
        (
            Raising(TypeError("expected str, got NoneType")),
            "the permission checker Raising raised TypeError: expected str, got NoneType while "
            "evaluating filesystem.write",
        ),
        (
            Raising(Unprintable()),
            "the permission checker Raising raised Unprintable (its message cannot be shown: "
            "str() and repr() fail) while evaluating filesystem.write",
        ),
        (
            Answers("yes"),
            "permission checker Answers returned 'yes' for filesystem.write; expected Allow, "
            "Deny or AskApproval",
        ),
        (
            Answers(None),
            "permission checker Answers returned None for filesystem.write; expected Allow, "
            "Deny or AskApproval",
        ),
        (
            Answers(al.permissions.NoVerdict()),
            "permission checker Answers returned NoVerdict() for filesystem.write; expected "
            "Allow, Deny or AskApproval; a policy that can abstain must be wrapped in "
            "PolicyChain(...)",
        ),
        (
            al.permissions.PolicyChain(
                al.permissions.RequestKindPolicy(allow=["tool.*"]), Answers(42)
            ),
            "the permission checker PolicyChain raised TypeError: policy Answers returned 42 for "
            "filesystem.write; expected Allow, Deny, AskApproval or NoVerdict while evaluating "
            "filesystem.write",
        ),
    ],
)
async def test_a_checker_that_fails_answers_the_call_and_the_session_goes_on(
    checker: Any, text: str
) -> None:
    ran.clear()
    (result,) = await run_round(
        [install], [call("install", {"path": "/x"}, id="c1")], permissions=checker
    )
    assert (result.output, result.is_error, outcome(result)) == (
        f"tool 'install' was not run: {text}",
        True,
        "permission_denied",
    )
    assert ran == []


@al.tool(permissions=lambda args: [al.permissions.FileSystemRead(args["path"])])
async def loose_read(path: Any) -> str:
    """The path comes from the model, unchecked."""
    ran.append(path)
    return "read"


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        (None, "FileSystemRead path must be a string or os.PathLike, got NoneType: None"),
        (3, "FileSystemRead path must be a string or os.PathLike, got int: 3"),
        (["/etc"], "FileSystemRead path must be a string or os.PathLike, got list: ['/etc']"),
        ({"p": 1}, "FileSystemRead path must be a string or os.PathLike, got dict: {'p': 1}"),
    ],
)
async def test_a_request_built_from_wrongly_typed_model_input_is_an_invalid_input(
    tmp_path: Path, path: Any, problem: str
) -> None:
    ran.clear()
    policy = al.permissions.PolicyChain(al.permissions.PathPolicy(allowed_roots=[tmp_path]))
    (result,) = await run_round(
        [loose_read], [call("loose_read", {"path": path}, id="c1")], permissions=policy
    )
    assert result.output == f"invalid input for tool 'loose_read': TypeError: {problem}"
    assert outcome(result) == "invalid_input"
    assert ran == []


@al.tool(permissions=lambda args: ["not a request", None])  # type: ignore[list-item]
async def confused() -> str:
    """Proposes things that are no permission requests."""
    return "ran"


async def test_proposals_that_are_no_requests_are_an_invalid_input() -> None:
    (result,) = await run_round([confused], [call("confused", {}, id="c1")])
    assert result.output == (
        "invalid input for tool 'confused': TypeError: its permission request 0 is str, "
        "expected a PermissionRequest"
    )


async def test_what_an_approval_showed_survives_a_restart(tmp_path: Path) -> None:
    ran.clear()
    tmp = tmp_path.resolve()  # noqa: ASYNC240
    store = MemorySessionStore()

    def agent(replies: list[Any], *first_input: al.Item) -> al.Agent:
        return (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(replies))
            .add_tool_source(al.ToolRegistry().with_tool(install))
            .permissions(_asking_policy(tmp))
            .store(store)
            .input(list(first_input))
            .build()
        )

    asks = tool_calls(call("install", {"path": str(tmp / "etc")}, id="c1"))
    first = await agent([asks], al.Item.text(al.ItemKind.USER, "go")).start("s1")
    shown = await first.next()
    assert isinstance(shown, al.ApprovalRequest)
    resumed = await agent(["done"]).resume(session_id="s1")  # a new process
    again = await resumed.next()
    assert isinstance(again, al.ApprovalRequest)
    assert again.requests == shown.requests
    assert len(again.requests) == 2
    again.approve()
    finished = await resumed.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert ran == [str(tmp / "etc")]
