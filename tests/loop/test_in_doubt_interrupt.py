"""Calls in doubt the host resolves (``CallInDoubt``, opt-in with ``ask_in_doubt()``).

The crash is the one of ``test_checkpoint``: the process dies while a claimed,
non-idempotent call runs. Resumed by an agent that asks, ``next()`` returns a
``CallInDoubt`` that the host settles, fails or runs again; without the opt-in
the call is answered in doubt as before.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import ApproveFsReads
from test_checkpoint import Journalled, crash_while_running

import agentloop as al
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore
from agentloop.tools._tool import idempotency_key

pytestmark = pytest.mark.anyio


class Pay(Journalled):
    """``pay``: blocks while ``block`` (the crash), else answers at once."""

    def __init__(self, *, reconcile: str | None = None) -> None:
        super().__init__(idempotent=False)
        self.block = True
        self.settle_with = reconcile
        self.reconciles = 0

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if self.block:
            return await super().invoke(request, ctx)
        self.runs += 1
        return f"paid again ({ctx.idempotency_key})"


class Reconciling(Pay):
    async def reconcile(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        self.reconciles += 1
        return self.settle_with


def agent_for(tool: Pay, store: Any, model: Any, *, ask: bool = True) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(ApproveFsReads())
        .store(store)
    )
    return builder.ask_in_doubt(ask).build()


async def in_doubt(tool: Pay, store: Any, model: Any) -> tuple[al.LoopDriver, al.CallInDoubt]:
    await crash_while_running(tool, store)
    driver = await agent_for(tool, store, model).resume(session_id="s")
    step = await driver.next()
    assert isinstance(step, al.CallInDoubt)
    return driver, step


def last_result(model: al.testing.ScriptedModel) -> al.ToolResultPart:
    part = model.last_request.transcript[-1].parts[0]
    assert isinstance(part, al.ToolResultPart)
    return part


async def test_the_step_names_the_call_and_its_key() -> None:
    tool = Pay()
    driver, step = await in_doubt(tool, MemorySessionStore(), al.testing.ScriptedModel(["ok"]))
    assert (step.id, step.call_id, step.tool_name, step.input, step.reruns) == (
        "in_doubt:call-pay",
        "call-pay",
        "pay",
        {},
        0,
    )
    assert step.idempotency_key == idempotency_key("s", "call-pay")
    assert driver.state is al.DriverState.AWAITING_RESOLUTION
    again = await driver.next()  # not resolved: asked again, nothing runs
    assert again == step
    assert tool.runs == 1


async def test_settle_gives_the_model_the_hosts_result() -> None:
    tool, model = Pay(), al.testing.ScriptedModel(["ok"])
    driver, step = await in_doubt(tool, MemorySessionStore(), model)
    step.settle("paid: receipt-9")
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert tool.runs == 1
    result = last_result(model)
    assert (result.call_id, result.output, result.is_error) == (
        "call-pay",
        "paid: receipt-9",
        False,
    )


async def test_fail_gives_the_model_an_error_with_the_reason() -> None:
    tool, model = Pay(), al.testing.ScriptedModel(["ok"])
    driver, step = await in_doubt(tool, MemorySessionStore(), model)
    step.fail("the bank has no record of it")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == 1
    result = last_result(model)
    assert (result.output, result.is_error) == ("failed: the bank has no record of it", True)
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.FAILED


async def test_run_again_runs_it_once_more_under_a_new_claim() -> None:
    tool, model, store = Pay(), al.testing.ScriptedModel(["ok"]), MemorySessionStore()
    driver, step = await in_doubt(tool, store, model)
    tool.block = False
    step.run_again()
    approval = await driver.next()  # its permission is checked again for the new run
    assert isinstance(approval, al.ApprovalRequest)
    assert tool.runs == 1
    approval.approve()
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == 2
    key = idempotency_key("s", "call-pay")
    assert last_result(model).output == f"paid again ({key})"  # the same idempotency key
    stored = await store.load("s")
    assert stored is not None
    # The call's own claim is settled by its result; the rerun's is kept by its key (as
    # a question's rerun's), and a restore does not find the answered call in doubt.
    assert stored.started_calls == frozenset({"call-pay#again-1"})
    again = await agent_for(tool, store, al.testing.ScriptedModel(["x"])).resume(session_id="s")
    assert isinstance(await again.next(), al.AwaitingInput)  # not in doubt again
    assert tool.runs == 2


async def test_without_the_opt_in_the_call_is_answered_in_doubt() -> None:
    tool, model, store = Pay(), al.testing.ScriptedModel(["ok"]), MemorySessionStore()
    await crash_while_running(tool, store)
    driver = await agent_for(tool, store, model, ask=False).resume(session_id="s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == 1
    assert al.tools.result_outcome(last_result(model)) is al.tools.ResultOutcome.IN_DOUBT


async def test_a_reconcile_returning_none_falls_through_to_the_host() -> None:
    tool = Reconciling(reconcile=None)
    _, step = await in_doubt(tool, MemorySessionStore(), al.testing.ScriptedModel(["ok"]))
    assert tool.reconciles == 1
    assert step.call_id == "call-pay"


async def test_a_reconcile_that_knows_settles_without_asking() -> None:
    tool, model, store = (
        Reconciling(reconcile="paid: r1"),
        al.testing.ScriptedModel(["ok"]),
        (MemorySessionStore()),
    )
    await crash_while_running(tool, store)
    driver = await agent_for(tool, store, model).resume(session_id="s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert last_result(model).output == "paid: r1"


async def test_a_restore_while_it_waits_asks_again_and_resolving_is_single_use() -> None:
    tool, store = Pay(), MemorySessionStore()
    driver, step = await in_doubt(tool, store, al.testing.ScriptedModel(["ok"]))
    document = driver.checkpoint()
    assert document["state"] == "AWAITING_RESOLUTION"
    model = al.testing.ScriptedModel(["ok"])
    resumed = await agent_for(tool, store, model).resume(session_id="s")  # the "kill"
    assert resumed.state is al.DriverState.AWAITING_RESOLUTION
    step2 = await resumed.next()
    assert step2 == step
    # From the checkpoint alone (no store record of the claim), it is asked again too.
    alone = await agent_for(tool, MemorySessionStore(), model).resume(document)
    assert await alone.next() == step
    step2.fail("no")
    with pytest.raises(al.InvalidStateError, match="it was resolved already") as raised:
        step2.settle("paid")
    assert "call-pay" in str(raised.value)
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == 1
    assert last_result(model).output == "failed: no"


async def test_a_kill_during_the_rerun_leaves_it_in_doubt_again_never_run_unasked() -> None:
    tool, store = Pay(), MemorySessionStore()
    driver, step = await in_doubt(tool, store, al.testing.ScriptedModel(["ok"]))
    tool.entered = anyio.Event()
    step.run_again()
    approval = await driver.next()
    assert isinstance(approval, al.ApprovalRequest)
    approval.approve()
    with anyio.CancelScope() as scope:  # killed while the rerun blocks
        async with anyio.create_task_group() as group:
            group.start_soon(driver.next)
            await tool.entered.wait()
            scope.cancel()
    assert tool.runs == 2
    model = al.testing.ScriptedModel(["ok"])
    resumed = await agent_for(tool, store, model).resume(session_id="s")
    again = await resumed.next()
    assert isinstance(again, al.CallInDoubt)
    assert again.reruns == 1
    again.settle("paid once")
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == 2
    assert last_result(model).output == "paid once"


async def test_resolving_outside_awaiting_resolution_is_refused() -> None:
    tool, model = Pay(), al.testing.ScriptedModel(["ok"])
    driver, step = await in_doubt(tool, MemorySessionStore(), model)
    step.settle("paid")
    await driver.run_until_blocked()
    with pytest.raises(al.InvalidStateError, match="no call in doubt waits for the host"):
        driver.resolve_in_doubt_for("call-pay", "fail", "late")


BAD = [
    ("settle", None, "settle\\(\\) needs the call's result"),
    ("settle", object(), "is not a tool result"),
    ("settle", {"a": object()}, "is not a tool result"),
    ("settle", al.ToolOutput("x", metadata={"agentloop.x": 1}), "reserved for agentloop"),
    ("settle", al.ToolOutput("x", is_error="yes"), "is_error must be a bool"),
    ("fail", "", "needs a reason"),
    ("fail", "   ", "needs a reason"),
    ("fail", 3, "needs a reason"),
    ("fail", None, "needs a reason"),
    ("undo", None, "is not a resolution"),
]


@pytest.mark.parametrize(("how", "value", "message"), BAD)
async def test_bad_resolutions_are_refused_and_change_nothing(
    how: str, value: Any, message: str
) -> None:
    tool, model = Pay(), al.testing.ScriptedModel(["ok"])
    driver, step = await in_doubt(tool, MemorySessionStore(), model)
    before = driver.checkpoint()
    with pytest.raises(al.InvalidInputError, match=message):
        driver.resolve_in_doubt_for("call-pay", how, value)
    assert driver.checkpoint() == before
    assert await driver.next() == step


async def test_resolving_a_call_not_in_doubt_is_refused() -> None:
    driver, step = await in_doubt(Pay(), MemorySessionStore(), al.testing.ScriptedModel(["ok"]))
    before = driver.checkpoint()
    with pytest.raises(al.InvalidStateError, match="it is not in this round"):
        driver.resolve_in_doubt_for("call-other", "settle", "x")
    assert driver.checkpoint() == before
    assert await driver.next() == step


_NO_JSON = st.builds(object)
BAD_RESOLUTIONS = st.one_of(
    st.tuples(
        st.just("settle"),
        st.one_of(
            st.none(),
            _NO_JSON,
            st.dictionaries(st.text(max_size=3), _NO_JSON, min_size=1, max_size=2),
            st.lists(_NO_JSON, min_size=1, max_size=2),
        ),
    ),
    st.tuples(
        st.just("fail"),
        st.one_of(st.none(), st.integers(), st.text(alphabet=" \t\n", max_size=4), st.binary()),
    ),
    st.tuples(
        st.text(max_size=8).filter(lambda how: how not in ("settle", "fail", "run_again")),
        st.none(),
    ),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad=BAD_RESOLUTIONS, first=st.sampled_from([None, "settle", "fail", "run_again"]))
def test_bad_resolutions_never_change_the_session(
    anyio_backend: str, bad: tuple[str, Any], first: str | None
) -> None:
    """A bad value, or any resolution after the call was resolved, is refused and the
    driver is as it was (the step, or the resolution made, stands)."""
    how, value = bad

    async def check() -> None:
        driver, step = await in_doubt(Pay(), MemorySessionStore(), al.testing.ScriptedModel(["o"]))
        if first is not None:
            driver.resolve_in_doubt_for("call-pay", first, None if first == "run_again" else "x")
            good = (first, "again")  # resolved already: even a good resolution is refused
        else:
            good = (how, value)
        before = driver.checkpoint()
        for attempt in (good, (how, value)):
            with pytest.raises((al.InvalidInputError, al.InvalidStateError)):
                driver.resolve_in_doubt_for("call-pay", *attempt)
        assert driver.checkpoint() == before
        if first is None:
            assert await driver.next() == step

    anyio.run(check, backend=anyio_backend)


async def test_a_builder_option_must_be_a_bool() -> None:
    with pytest.raises(al.InvalidInputError, match="ask_in_doubt expects a bool"):
        al.Agent.builder().ask_in_doubt("yes")  # type: ignore[arg-type]


async def test_a_session_worker_rests_at_a_call_in_doubt_and_a_host_resolves_it() -> None:
    tool, store = Pay(), MemorySessionStore()
    await crash_while_running(tool, store)
    agent = agent_for(tool, store, al.testing.ScriptedModel(["ok"]))
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
    advanced = await worker.advance("s")
    assert isinstance(advanced.step, al.CallInDoubt)
    assert advanced.step.call_id == "call-pay"
    assert tool.runs == 1
    stored = await store.load("s")
    assert stored is not None
    assert stored.checkpoint["state"] == "AWAITING_RESOLUTION"
    model = al.testing.ScriptedModel(["ok"])
    driver = await agent_for(tool, store, model).resume(session_id="s")
    step = await driver.next()
    assert isinstance(step, al.CallInDoubt)
    step.settle("paid")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert (tool.runs, last_result(model).output) == (1, "paid")


class Both:
    """``pay`` whose runs all block until the process dies (counted per call)."""

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


def both_agent(tool: Both, store: Any, model: Any, manager: Any) -> al.Agent:
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


async def test_parallel_calls_in_doubt_are_each_resolved_before_the_model_sees_the_round() -> None:
    tool, store = Both(), MemorySessionStore()
    calls = al.testing.tool_calls(
        al.testing.call("pay", {}, id="a"), al.testing.call("pay", {}, id="b")
    )
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await both_agent(tool, store, al.testing.ScriptedModel([calls]), manager).start(
            "s"
        )
        with anyio.CancelScope() as scope:  # the crash, once both calls run
            async with anyio.create_task_group() as group:
                group.start_soon(driver.next)
                while len(tool.runs) < 2:
                    await anyio.lowlevel.checkpoint()
                scope.cancel()
    assert sorted(tool.runs) == ["a", "b"]
    tool.block = False
    model = al.testing.ScriptedModel(["ok"])
    async with al.tasks.AsyncTaskManager() as manager:
        resumed = await both_agent(tool, store, model, manager).resume(session_id="s")
        first = await resumed.next()
        assert isinstance(first, al.CallInDoubt)
        assert first.call_id == "a"
        first.settle("paid a (checked)")
        second = await resumed.next()  # the round waits for b: the model is not called
        assert isinstance(second, al.CallInDoubt)
        assert second.call_id == "b"
        assert model.requests == []
        second.run_again()
        assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert sorted(tool.runs) == ["a", "b", "b"]
    results = [
        (part.call_id, part.output)
        for item in model.last_request.transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
    assert results == [("a", "paid a (checked)"), ("b", "paid b")]


async def test_an_interrupt_while_it_waits_answers_the_call_in_doubt_not_cancelled() -> None:
    tool, store = Pay(), MemorySessionStore()
    await crash_while_running(tool, store)
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(["ok"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(ApproveFsReads())
        .cancellation(controller.handle())
        .store(store)
        .ask_in_doubt()
        .build()
    )
    driver = await agent.resume(session_id="s")
    assert isinstance(await driver.next(), al.CallInDoubt)
    controller.interrupt()
    finished = await driver.next()
    assert isinstance(finished, al.Finished)
    assert finished.result.finish_reason is al.FinishReason.CANCELLED
    assert finished.result.metadata["agentloop.interrupt_reason"] == (
        "interrupted while a call in doubt waited for the host"
    )
    [result] = [c.result for c in finished.result.tool_calls]
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT
    assert tool.runs == 1
    assert driver.state is al.DriverState.IDLE
