"""A built-in policy given alone to ``.permissions()`` decides what it knows; the rest is
allowed, as with no checker (it is used as ``PolicyChain(policy)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentloop as al
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

written: list[str] = []


@al.tool(permissions=lambda args: [al.permissions.FileSystemWrite(args["path"])])
def write(path: str) -> str:
    """Write a file (pretend)."""
    written.append(path)
    return f"wrote {path}"


@al.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


def outcome(result: al.ToolResultPart) -> Any:
    return result.metadata.get(al.tools.OUTCOME_KEY)


def results_of(driver: al.LoopDriver) -> list[al.ToolResultPart]:
    return [part for item in driver.snapshot().transcript for part in item.tool_results()]


async def start(checker: Any, *calls: al.ToolCallPart) -> tuple[al.LoopDriver, al.Step]:
    registry = al.ToolRegistry().with_tool(write).with_tool(echo)
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([tool_calls(*calls), "done"]))
        .add_tool_source(registry)
        .permissions(checker)
        .input([al.Item.text(al.ItemKind.USER, "go")])
        .build()
    )
    driver = await agent.start("s1")
    return driver, await driver.run_until_blocked()


async def test_a_bare_kind_policy_asks_for_what_it_names_and_allows_the_rest() -> None:
    written.clear()
    driver, step = await start(
        al.permissions.RequestKindPolicy(require_approval={"filesystem.write"}),
        call("echo", {"text": "hi"}, id="c1"),
        call("write", {"path": "/tmp/x"}, id="c2"),
    )
    assert isinstance(step, al.ApprovalRequest)
    assert (step.call_id, step.request_kind, step.summary, step.reason) == (
        "c2",
        "filesystem.write",
        "Write /tmp/x",
        "policy_requires_confirmation",
    )
    assert written == []
    step.approve()
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [(r.call_id, r.output, outcome(r)) for r in results_of(driver)] == [
        ("c1", "hi", None),
        ("c2", "wrote /tmp/x", None),
    ]
    assert written == ["/tmp/x"]


async def test_a_bare_tool_policy_denies_what_it_names_and_allows_the_rest() -> None:
    written.clear()
    driver, step = await start(
        al.permissions.ToolPolicy(deny={"write"}),
        call("write", {"path": "/tmp/x"}, id="c1"),
        call("echo", {"text": "hi"}, id="c2"),
    )
    assert isinstance(step, al.Finished)
    assert [(r.output, outcome(r)) for r in results_of(driver)] == [
        ("tool permission denied: tool 'write' is not allowed (code: tool_not_allowed)",
         "permission_denied"),
        ("hi", None),
    ]  # fmt: skip
    assert written == []


async def test_a_bare_path_policy_keeps_writes_in_its_roots(tmp_path: Path) -> None:
    written.clear()
    inside, outside = tmp_path / "ws" / "a.txt", tmp_path / "b.txt"
    (tmp_path / "ws").mkdir()
    driver, step = await start(
        al.permissions.PathPolicy(allowed_roots=[tmp_path / "ws"]),
        call("write", {"path": str(inside)}, id="c1"),
        call("write", {"path": str(outside)}, id="c2"),
    )
    assert isinstance(step, al.Finished)
    assert [outcome(r) for r in results_of(driver)] == [None, "permission_denied"]
    assert written == [str(inside)]


async def test_chains_and_plain_checkers_are_used_as_given() -> None:
    chain = al.permissions.PolicyChain(al.permissions.RequestKindPolicy(deny={"filesystem.write"}))
    deny_all = al.permissions.DenyAll()
    for checker in (chain, deny_all):
        agent = (
            al.Agent.builder().model(al.testing.ScriptedModel(["x"])).permissions(checker).build()
        )
        assert agent.permissions is checker
    bare = al.permissions.RequestKindPolicy(deny={"filesystem.write"})
    agent = al.Agent.builder().model(al.testing.ScriptedModel(["x"])).permissions(bare).build()
    assert isinstance(agent.permissions, al.permissions.PolicyChain)
    assert (agent.permissions.policies, agent.permissions.fallback) == (
        (bare,),
        al.permissions.Allow(),
    )


async def test_something_that_is_no_checker_is_refused_and_the_builder_keeps_its_own() -> None:
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(["x"]))
        .permissions(al.permissions.DenyAll())
    )
    before = builder.build().permissions
    with pytest.raises(al.InvalidInputError) as refused:
        builder.permissions("allow")  # type: ignore[arg-type]
    assert str(refused.value) == (
        "AgentBuilder.permissions expects a PermissionChecker (an object with an "
        "evaluate(request) method) or a policy, got str; combine policies with PolicyChain(...)"
    )
    assert builder.build().permissions is before
