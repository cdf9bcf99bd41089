"""A payment tool that is killed mid-call, an agent that asks about calls in doubt
(``ask_in_doubt()``), and parking a session on the call in doubt in a store: what the
inbox's in-doubt tests share."""

from __future__ import annotations

from typing import Any

import anyio

import agentloop as al
import agentloop.host
import agentloop.testing
from agentloop.store import SessionStore
from agentloop.testing import call, tool_calls


class Pay:
    """``pay``: the first run blocks until cancelled (the "crash"); later runs pay at once."""

    spec = al.ToolSpec(
        "pay",
        "Pay a bill.",
        {"type": "object", "properties": {"amount": {"type": "integer"}}},
        annotations=al.ToolAnnotations(idempotent=False),
    )

    def __init__(self, *, block: bool = False) -> None:
        self.block = block
        self.runs = 0
        self.entered = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs += 1
        if self.block:
            self.entered.set()
            await anyio.sleep_forever()
        return f"paid {request.input['amount']} again ({ctx.idempotency_key})"


def reply(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        part = last.parts[0]
        assert isinstance(part, al.ToolResultPart)
        prefix = "error result: " if part.is_error else "done: "
        return prefix + str(part.output)
    return tool_calls(call("pay", {"amount": 42}, id="call-pay"))


def pay_agent(store: SessionStore, tool: Pay | None = None) -> al.Agent:
    """The agent that asks the host about calls in doubt (the inbox's ``--agent``)."""
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(al.ToolRegistry().with_tool(tool or Pay()))
        .store(store)
        .ask_in_doubt()
        .build()
    )


async def park_in_doubt(store: SessionStore, session_id: str) -> None:
    """Run ``session_id`` until ``pay`` runs, kill it there, and let a worker resume it: the
    session rests on the call in doubt (status ``awaiting_resolution``)."""
    await crash_mid_call(store, session_id)
    worker = al.host.SessionWorker(store=store, agent=pay_agent(store), owner="w0", ttl=30)
    advanced = await worker.advance(session_id)
    assert isinstance(advanced.step, al.CallInDoubt), advanced.step


async def crash_mid_call(store: SessionStore, session_id: str) -> None:
    """Run ``session_id`` until ``pay`` runs, and kill it there (claimed, no result)."""
    tool = Pay(block=True)
    driver = await pay_agent(store, tool).start(session_id)
    driver.submit_input("pay the bill")
    with anyio.CancelScope() as scope:  # the "crash": the step never completes
        async with anyio.create_task_group() as group:
            group.start_soon(driver.next)
            await tool.entered.wait()
            scope.cancel()


class Both:
    """``pay`` whose runs all block while ``block`` (the crash), counted per call."""

    def __init__(self) -> None:
        self.spec = al.ToolSpec(
            "pay", "Pay.", {"type": "object"}, annotations=al.ToolAnnotations(idempotent=False)
        )
        self.runs: list[str] = []
        self.block = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs.append(request.call_id)
        if self.block:
            await anyio.sleep_forever()
        return f"paid {request.call_id}"


def both_agent(tool: Both, store: SessionStore, model: Any, manager: Any) -> al.Agent:
    """Runs ``tool``'s calls in parallel tasks of ``manager``; asks about calls in doubt."""
    return (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .task_manager(manager)
        .store(store)
        .input([al.Item.text(al.ItemKind.USER, "pay both")])
        .ask_in_doubt()
        .build()
    )
