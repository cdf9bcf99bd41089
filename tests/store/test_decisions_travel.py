"""A host's decision travels with the store: reason and edited input, applied by any resumer.

Host A decides (a denial with a reason, an approval with edited input); its
store write after recording the decision fails, so the decision is in the store
but not acted on. Host B, a fresh agent on the same storage, resumes the
session and applies exactly that decision.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.store import (
    MemorySessionStore,
    PostgresSessionStore,
    SessionStore,
    SqliteSessionStore,
    input_digest,
)

pytestmark = pytest.mark.anyio


class Pay:
    """A non-idempotent tool that asks first; remembers what it ran with."""

    spec = al.ToolSpec(
        "pay",
        "Pay an amount.",
        {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
    )

    def __init__(self) -> None:
        self.runs: list[Any] = []

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(f"/ledger/{request.input['amount']}")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs.append(request.input)
        return f"paid {request.input['amount']}"


class AskFirst:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("payments need a person", request.summary)


def reply(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        return al.testing.tool_calls(al.testing.call("pay", {"amount": 500}, id="call-pay"))
    result = last.parts[0]
    assert isinstance(result, al.ToolResultPart)
    return f"The model saw: {result.output}"


def make_agent(store: Any, tool: Pay) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(AskFirst())
        .store(store)
        .build()
    )


class WritesFailAfterDecisions:
    """The real store, except that checkpoint saves and claims fail once ``broken``."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save_checkpoint(
        self, session_id: str, checkpoint: Mapping[str, Any], **options: Any
    ) -> int:
        if self.broken:
            raise OSError(28, "No space left on device")
        return await self.inner.save_checkpoint(session_id, checkpoint, **options)

    async def claim(self, session_id: str, call_id: str, **options: Any) -> Any:
        if self.broken:
            raise OSError(28, "No space left on device")
        return await self.inner.claim(session_id, call_id, **options)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemorySessionStore()
    elif request.param == "sqlite":
        async with SqliteSessionStore(tmp_path / "sessions.db") as opened:
            yield opened
    else:
        uri = request.getfixturevalue("postgres_uri")
        async with PostgresSessionStore(uri) as opened:
            yield opened


async def decided_then_stopped(store: SessionStore, decision: al.ApprovalAnswer) -> None:
    """Host A: park on the approval, decide, and fail the write that would act on it."""
    flaky = WritesFailAfterDecisions(store)
    driver = await make_agent(flaky, Pay()).start("s")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "pay the invoice")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    driver.answer_approval_for("call-pay", decision)
    flaky.broken = True
    with pytest.raises(al.SaveError):
        await driver.next()


async def test_a_denial_reason_reaches_the_model_through_another_host(
    store: SessionStore,
) -> None:
    await decided_then_stopped(store, al.ApprovalAnswer.deny("over the 100 limit"))
    stored = await store.load("s")
    assert stored is not None
    recorded = stored.approvals["call-pay"]
    assert (recorded.approved, recorded.reason, recorded.edited_input) == (
        False,
        "over the 100 limit",
        None,
    )
    tool = Pay()
    driver = await make_agent(store, tool).resume(session_id="s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == []
    items = driver.snapshot().transcript
    assert items[-1].text_content == "The model saw: over the 100 limit"


async def test_an_edited_input_runs_in_another_host(store: SessionStore) -> None:
    await decided_then_stopped(store, al.ApprovalAnswer.approve_with({"amount": 90}))
    stored = await store.load("s")
    assert stored is not None
    recorded = stored.approvals["call-pay"]
    assert (recorded.approved, recorded.edited_input, recorded.input_digest) == (
        True,
        {"amount": 90},
        input_digest("pay", {"amount": 90}),
    )
    tool = Pay()
    driver = await make_agent(store, tool).resume(session_id="s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == [{"amount": 90}]
    items = driver.snapshot().transcript
    assert items[-1].text_content == "The model saw: paid 90"
