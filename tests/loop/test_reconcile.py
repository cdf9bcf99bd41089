"""Idempotency keys and reconcile: a call left in doubt by a crash is settled by its tool.

The crash is the one of ``test_checkpoint``: the process dies while a claimed,
non-idempotent call runs; the resumed driver never runs it again. With a
``reconcile`` the tool says what the call came to (looked up by the call's
idempotency key, the same in both processes); without one, or when it cannot
tell, the call is answered in doubt as before.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from loop_support import ApproveFsReads, Recorder, user
from test_checkpoint import Journalled, crash_while_running

import agentloop as al
import agentloop.observe
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore

pytestmark = pytest.mark.anyio

PAID: dict[str, str] = {}
"""The payment service: idempotency key -> receipt (what a real API would hold)."""


class Reconciled(Journalled):
    """``pay`` that records its key with the service before it blocks, and settles from it."""

    def __init__(self, answer: str) -> None:
        super().__init__(idempotent=False)
        self.answer = answer  # "known", "unknown" or "raises"
        self.keys: list[str] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.keys.append(ctx.idempotency_key)
        PAID[ctx.idempotency_key] = "receipt-7"
        return await super().invoke(request, ctx)

    async def reconcile(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        self.keys.append(ctx.idempotency_key)
        if self.answer == "raises":
            raise RuntimeError("the payment service is down")
        if self.answer == "unknown":
            return None
        return al.ToolOutput(f"paid: {PAID[ctx.idempotency_key]}")


async def resume(tool: Journalled, store: MemorySessionStore) -> tuple[Any, Recorder, Any]:
    recorder = Recorder()
    model = al.testing.ScriptedModel(["done"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(ApproveFsReads())
        .observer(recorder)
        .store(store)
        .build()
    )
    driver = await agent.resume(session_id="s")
    return driver, recorder, model


async def test_a_call_in_doubt_is_settled_by_its_reconcile_with_the_same_key() -> None:
    store = MemorySessionStore()
    tool = Reconciled("known")
    await crash_while_running(tool, store)
    driver, recorder, model = await resume(tool, store)
    assert [w.message for w in recorder.of(al.observe.LoopWarning)] == [
        "call call-pay (pay) started before the restore and has no result; settled by its "
        "tool's reconcile"
    ]
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert tool.runs == 1  # never run again
    assert tool.keys[0] == tool.keys[1]  # the key the call ran with is the one settled
    result = model.last_request.transcript[-1].parts[0]
    assert isinstance(result, al.ToolResultPart)
    assert (result.call_id, result.output, result.is_error) == (
        "call-pay",
        "paid: receipt-7",
        False,
    )
    assert [c.result.output for c in step.result.tool_calls] == ["paid: receipt-7"]


@pytest.mark.parametrize("answer", ["unknown", "raises"])
async def test_a_reconcile_that_cannot_tell_leaves_the_call_in_doubt(answer: str) -> None:
    store = MemorySessionStore()
    tool = Reconciled(answer)
    await crash_while_running(tool, store)
    driver, recorder, model = await resume(tool, store)
    assert [w.message for w in recorder.of(al.observe.LoopWarning)] == [
        "call call-pay (pay) started before the restore and has no result; answered as in "
        "doubt instead of running it again"
    ]
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert tool.runs == 1
    result = model.last_request.transcript[-1].parts[0]
    assert isinstance(result, al.ToolResultPart)
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT


async def test_a_function_tools_reconciler_gets_the_structured_arguments() -> None:
    entered = anyio.Event()
    settled: list[tuple[str, int]] = []

    @al.tool
    async def pay(amount: int, ctx: al.ToolContext) -> str:
        """Pay a bill."""
        entered.set()
        await anyio.sleep_forever()
        return "unreachable"

    @pay.reconciler
    async def _(ctx: al.ToolContext, amount: int) -> str:
        settled.append((ctx.idempotency_key, amount))
        return f"paid {amount}"

    store = MemorySessionStore()
    model = al.testing.ScriptedModel([al.testing.tool_calls(al.testing.call("pay", {"amount": 5}))])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(pay))
        .store(store)
        .input([user("pay")])
        .build()
    )
    driver = await agent.start("s")
    with anyio.CancelScope() as scope:  # the crash, while the call runs
        async with anyio.create_task_group() as group:
            group.start_soon(driver.next)
            await entered.wait()
            scope.cancel()
    stored = await store.load("s")
    assert stored is not None
    (call_id,) = stored.started_calls
    after = al.testing.ScriptedModel(["ok"])
    resumed = await (
        al.Agent.builder().model(after).add_tool_source(al.ToolRegistry().with_tool(pay))
        .store(store).build().resume(session_id="s")
    )  # fmt: skip
    step = await resumed.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert settled == [(al.ToolContext("s", "turn-1", call_id).idempotency_key, 5)]
    assert after.last_request.transcript[-1].parts[0].output == "paid 5"


def test_the_reconciler_must_be_async() -> None:
    @al.tool
    def pay(amount: int) -> str:
        """Pay."""
        return "ok"

    def settle(ctx: al.ToolContext, amount: int) -> str:
        return "x"

    with pytest.raises(ValueError, match=r"@pay.reconciler expects an async function"):
        pay.reconciler(settle)  # type: ignore[arg-type]


@given(
    session=st.text(min_size=1, max_size=40),
    call_id=st.text(min_size=1, max_size=40),
    other=st.text(min_size=1, max_size=40),
)
def test_the_idempotency_key_depends_on_the_session_and_call_only(
    session: str, call_id: str, other: str
) -> None:
    key = al.ToolContext(session, "turn-1", call_id).idempotency_key
    assert key == al.ToolContext(session, "turn-9", call_id, metadata={"x": 1}).idempotency_key
    assert key.startswith("agentloop-")
    assert len(key) == len("agentloop-") + 32
    if other != call_id:
        assert key != al.ToolContext(session, "turn-1", other).idempotency_key
    if other != session:
        assert key != al.ToolContext(other, "turn-1", call_id).idempotency_key
    # no separator ambiguity: ("a", "b\x00c") and ("a\x00b", "c") differ
    assert (
        al.ToolContext("a", "t", "b\x00c").idempotency_key
        != al.ToolContext("a\x00b", "t", "c").idempotency_key
    )
