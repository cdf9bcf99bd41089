"""A real agent session the kill test SIGKILLs at random moments; also its shared parts.

Usage: python session_kill_runner.py DATABASE SIDE_EFFECTS BACKEND. Resumes the
session in DATABASE (or starts it), approves every call and drives it until
all ``TURNS`` turns are done, printing one line per step. ``append`` (not
idempotent, asks for approval) and ``notify`` (not idempotent, runs without
asking) write their call id to SIDE_EFFECTS before they return; ``lookup``
(idempotent) may run again after a restart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.store import SessionStore, SqliteSessionStore
from agentloop.testing import Reply, call, tool_calls

SESSION_ID = "killed-agent-session"
TURNS = 5
ROUNDS_PER_TURN = 3


class Append:
    """Appends its call id to a file, then takes a moment to answer (a window to die in).

    Not idempotent. ``append`` asks for approval; ``notify`` runs without asking.
    """

    def __init__(self, name: str, side_effects: Path, *, ask: bool) -> None:
        self.spec = al.ToolSpec(name, "Append a line.", {"type": "object"})
        self.side_effects = side_effects
        self.ask = ask

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(str(self.side_effects))] if self.ask else []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        with self.side_effects.open("a", encoding="utf-8") as file:
            file.write(f"{request.call_id}\n")
        await anyio.sleep(0.03)
        return f"appended {request.call_id}"


class Lookup:
    spec = al.ToolSpec(
        "lookup",
        "Look a value up.",
        {"type": "object"},
        annotations=al.ToolAnnotations(read_only=True, idempotent=True),
    )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await anyio.sleep(0.01)
        return f"looked up {request.call_id}"


class AskBeforeWriting:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.write":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def answer(request: al.model.TurnRequest) -> Reply | str:
    """Decided from the transcript alone: ``ROUNDS_PER_TURN`` tool rounds, then an answer."""
    items = list(request.transcript)
    last_user = max(i for i, item in enumerate(items) if item.kind is al.ItemKind.USER)
    rounds = sum(1 for item in items[last_user:] if any(item.tool_calls()))
    turn = sum(1 for item in items if item.kind is al.ItemKind.USER)
    if rounds == ROUNDS_PER_TURN:
        return f"turn {turn} done"
    base = f"call-{len(items)}"
    if rounds % 2 == 0:
        return tool_calls(call("lookup", id=f"{base}-0"), call("notify", id=f"{base}-1"))
    return tool_calls(call("append", id=f"{base}-0"), call("append", id=f"{base}-1"))


def build_agent(store: SessionStore, side_effects: Path) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(
            al.ToolRegistry()
            .with_tool(Append("append", side_effects, ask=True))
            .with_tool(Append("notify", side_effects, ask=False))
            .with_tool(Lookup())
        )
        .permissions(AskBeforeWriting())
        .store(store)
        .build()
    )


async def drive(driver: al.LoopDriver) -> None:
    """Approve everything; between turns submit the next task until ``TURNS`` turns are done.

    A fresh or restored driver is asked for its next step first: only a step
    (``Finished``, ``AwaitingInput``) says a turn is over, not ``driver.state``.
    """
    while True:
        step = await driver.next()
        print(type(step).__name__, flush=True)
        if isinstance(step, al.ApprovalRequest):
            step.approve()
        elif isinstance(step, al.Finished | al.AwaitingInput):
            turns = sum(1 for item in driver.snapshot().transcript if item.kind is al.ItemKind.USER)
            if turns == TURNS:
                return
            driver.submit_input([al.Item.text(al.ItemKind.USER, f"task {turns + 1}")])


async def main(database: str, side_effects: str) -> None:
    async with SqliteSessionStore(database) as store:
        agent = build_agent(store, Path(side_effects))
        if await store.load(SESSION_ID) is None:
            driver = await agent.start(SESSION_ID)
        else:
            driver = await agent.resume(session_id=SESSION_ID)
        await drive(driver)
        print("complete", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], backend=sys.argv[3])
