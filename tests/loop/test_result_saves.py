"""When a claimed call's result is saved: with the step, or before the step waits for more.

A round's result is saved by the step's own save when nothing is waited for
in between (one commit per round instead of two), and before the step waits
for anything else: another call, the calls still running, the model. A step
that raises, or is cancelled as its save starts, still saves the results it
has. A hypothesis test draws plans of rounds (claimed, idempotent and
approved calls, in place or in parallel) and checks that neither the model
nor a call run after another ever acts on a claimed result the store does
not hold. Every test drives real drivers through the public API against the
memory and SQLite stores (``store`` fixture), on both anyio backends.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import SessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class Pay:
    """Not idempotent (each run is claimed first); counts its runs."""

    spec = al.ToolSpec("pay", "Pay a bill.", {"type": "object"})

    def __init__(self) -> None:
        self.runs = 0

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs += 1
        return "paid"


class Slow:
    """Not idempotent; answers once ``release`` is set."""

    spec = al.ToolSpec("slow", "Wait, then answer.", {"type": "object"})

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.started = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.started.set()
        await self.release.wait()
        return "slow done"


def answered(document: Mapping[str, Any]) -> set[str]:
    """The call ids a saved document has a result for (transcript or the active round)."""
    found = {
        part["call_id"]
        for item in document["transcript"]
        for part in item["parts"]
        if part.get("type") == "tool_result"
    }
    turn = document["turn"]
    if turn is not None and turn["round"] is not None:
        found |= {entry["result"]["call_id"] for entry in turn["round"]["results"]}
    return found


Hook = Callable[[int, Mapping[str, Any]], Awaitable[None]]


def record_saves(store: SessionStore, before: Hook | None = None) -> list[set[str]]:
    """The answered calls of each document ``store`` saves from now on, in order.

    ``before(number, document)`` runs before each save is passed on (numbered from 0).
    """
    saves: list[set[str]] = []
    save = store.save_checkpoint

    async def recording(session_id: str, checkpoint: Mapping[str, Any], **options: Any) -> int:
        if before is not None:
            await before(len(saves), checkpoint)
        version = await save(session_id, checkpoint, **options)
        saves.append(answered(checkpoint))
        return version

    store.save_checkpoint = recording  # type: ignore[method-assign]
    return saves


def agent(
    store: SessionStore,
    script: Any,
    *tools: Any,
    manager: al.tasks.AsyncTaskManager | None = None,
    permissions: Any = None,
    observer: Any = None,
    transcript_observer: Any = None,
    cancellation: al.CancellationHandle | None = None,
) -> al.Agent:
    registry = al.ToolRegistry()
    for tool in tools:
        registry = registry.with_tool(tool)
    builder = al.Agent.builder().model(al.testing.ScriptedModel(script)).add_tool_source(registry)
    builder = builder.store(store)
    if manager is not None:
        builder = builder.task_manager(manager)
    if permissions is not None:
        builder = builder.permissions(permissions)
    if observer is not None:
        builder = builder.observer(observer)
    if transcript_observer is not None:
        builder = builder.transcript_observer(transcript_observer)
    if cancellation is not None:
        builder = builder.cancellation(cancellation)
    return builder.build()


def pay_once(request: al.model.TurnRequest) -> Any:
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(call("pay", {}, id="call-pay"))
    return "done"


async def stored_answers(store: SessionStore, session_id: str = "s") -> set[str]:
    """The calls a session has a result for in the store (none before its first save)."""
    stored = await store.load(session_id)
    return set() if stored is None else answered(stored.checkpoint)


def pay_and_slow(request: al.model.TurnRequest) -> Any:
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(call("pay", {}, id="call-pay"), call("slow", {}, id="call-slow"))
    return "done"


async def step_seeing_pay_stored_while_slow_runs(
    driver: al.LoopDriver, store: SessionStore, slow: Slow
) -> al.Step:
    """``driver.next()``, checking that pay's result is in the store before slow answers."""
    steps: list[al.Step] = []
    async with anyio.create_task_group() as group:

        async def step() -> None:
            steps.append(await driver.next())

        group.start_soon(step)
        try:
            with anyio.fail_after(10):
                await slow.started.wait()
                while "call-pay" not in await stored_answers(store):  # noqa: ASYNC110
                    await anyio.sleep(0.005)  # the store has no change notification
            assert steps == []  # the step still waits for slow
            assert await stored_answers(store) == {"call-pay"}
        finally:
            slow.release.set()  # a failure above must not leave slow waiting forever
    [stepped] = steps
    return stepped


async def test_a_rounds_only_call_is_saved_with_the_step(store: SessionStore) -> None:
    tool = Pay()
    saves = record_saves(store)
    driver = await agent(store, pay_once, tool).start("s")
    driver.submit_input([user("pay")])
    assert isinstance(await driver.next(), al.AfterToolResult)
    # The input, the model's response (before the call starts), and the step,
    # which holds the result: no save of the result alone.
    assert saves == [set(), set(), {"call-pay"}]
    assert tool.runs == 1
    assert isinstance(await driver.next(), al.Finished)
    assert saves[3:] == [{"call-pay"}]
    assert await stored_answers(store) == {"call-pay"}


async def test_a_finished_result_is_saved_before_the_round_waits_for_another_call(
    store: SessionStore,
) -> None:
    pay, slow = Pay(), Slow()

    saves = record_saves(store)
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await agent(store, pay_and_slow, pay, slow, manager=manager).start("s")
        driver.submit_input([user("pay, and wait")])
        stepped = await step_seeing_pay_stored_while_slow_runs(driver, store, slow)
    assert isinstance(stepped, al.AfterToolResult)
    assert saves == [set(), set(), {"call-pay"}, {"call-pay", "call-slow"}]
    assert await stored_answers(store) == {"call-pay", "call-slow"}


async def test_a_result_is_saved_before_the_model_is_called_again_in_the_same_step(
    store: SessionStore,
) -> None:
    tool = Pay()
    saves: list[set[str]] = []

    async def check_before_model(request: al.model.TurnRequest) -> Any:
        # The host answered the approval: the step calls the model again at
        # once. The result is saved before that call.
        if request.transcript[-1].kind is al.ItemKind.USER:
            return tool_calls(call("pay", {}, id="call-pay"))
        saves.append(await stored_answers(store))
        return "done"

    class AskFirst:
        def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
            return al.permissions.AskApproval("confirm", request.summary)

    driver = await agent(store, check_before_model, tool, permissions=AskFirst()).start("s")
    driver.submit_input([user("pay")])
    asked = await driver.next()
    assert isinstance(asked, al.ApprovalRequest)
    asked.approve()
    assert isinstance(await driver.next(), al.Finished)
    assert tool.runs == 1
    assert saves == [{"call-pay"}]


class Boom(BaseException):
    """What a hook raises past the observers' guard (it catches ``Exception`` only)."""


class RaiseAtToolFinished:
    def handle_event(self, event: al.observe.AgentEvent) -> None:
        if isinstance(event, al.observe.ToolExecutionFinished):
            raise Boom


class RaiseOnResultItem:
    def on_item_appended(self, item: al.Item) -> None:
        if item.kind is al.ItemKind.TOOL:
            raise Boom


def outputs(driver: al.LoopDriver) -> list[Any]:
    return [
        part.output
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


async def test_a_step_that_raises_after_a_result_still_saves_it(store: SessionStore) -> None:
    tool = Pay()
    saves = record_saves(store)
    driver = await agent(store, pay_once, tool, observer=RaiseAtToolFinished()).start("s")
    driver.submit_input([user("pay")])
    with pytest.raises(Boom):
        await driver.next()
    assert tool.runs == 1
    assert saves == [set(), set(), {"call-pay"}]
    # A restore keeps the result: the call is neither answered in doubt nor run again.
    resumed = await agent(store, pay_once, tool).resume(session_id="s")
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == 1
    assert outputs(resumed) == ["paid"]


async def test_a_step_that_raises_while_appending_a_result_saves_no_half_state(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    tool = Pay()
    saves = record_saves(store)
    driver = await agent(store, pay_once, tool, transcript_observer=RaiseOnResultItem()).start("s")
    driver.submit_input([user("pay")])
    with pytest.raises(Boom):
        await driver.next()
    assert tool.runs == 1
    # The result was half appended (in the transcript and still in the round): a
    # restore would refuse that state, so it is not saved.
    assert saves == [set(), set()]
    assert "its result is not saved" in caplog.text
    resumed = await agent(store, pay_once, tool).resume(session_id="s")
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == 1  # in doubt: never run twice
    [output] = outputs(resumed)
    assert output.startswith("in doubt: pay started before the session was restored")


async def test_a_step_cancelled_as_its_save_starts_still_saves_its_results(
    store: SessionStore,
) -> None:
    tool = Pay()
    with anyio.CancelScope() as scope:

        async def cancel_the_step_save(number: int, document: Mapping[str, Any]) -> None:
            if number == 2:  # input, response, then the step's own save
                scope.cancel()
                await anyio.lowlevel.checkpoint()

        saves = record_saves(store, cancel_the_step_save)
        driver = await agent(store, pay_once, tool).start("s")
        driver.submit_input([user("pay")])
        await driver.next()
    assert scope.cancelled_caught
    assert tool.runs == 1
    assert saves == [set(), set(), {"call-pay"}]  # the third: the results, saved shielded
    assert await stored_answers(store) == {"call-pay"}


class SlowToStop(Slow):
    """Like ``Slow``, but once cancelled it takes until ``release`` to stop."""

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        try:
            return await super().invoke(request, ctx)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self.release.wait()
            raise


async def test_a_turn_interrupted_as_a_result_is_saved_saves_it_before_waiting_for_the_rest(
    store: SessionStore,
) -> None:
    pay, slow = Pay(), SlowToStop()
    controller = al.CancellationController()

    attempts = 0

    async def interrupt_at_the_result_save(number: int, document: Mapping[str, Any]) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 3:  # input, response, then pay's result: the turn is interrupted
            controller.interrupt()
            await anyio.lowlevel.checkpoint()  # and this save never starts

    saves = record_saves(store, interrupt_at_the_result_save)
    async with al.tasks.AsyncTaskManager() as manager:
        handle = controller.handle()
        built = agent(store, pay_and_slow, pay, slow, manager=manager, cancellation=handle)
        driver = await built.start("s")
        driver.submit_input([user("pay, and wait")])
        # pay's result is durable while the interrupted turn waits for slow to stop.
        finished = await step_seeing_pay_stored_while_slow_runs(driver, store, slow)
    assert isinstance(finished, al.Finished)
    assert finished.result.finish_reason is al.FinishReason.CANCELLED
    assert pay.runs == 1
    assert saves == [set(), set(), {"call-pay"}, {"call-pay", "call-slow"}]


class PlanTool:
    """A tool of the property test: claimed unless ``idempotent``; yields ``pauses`` times.

    ``on_start`` runs first (the test checks the store there).
    """

    def __init__(
        self, name: str, idempotent: bool, on_start: Callable[[], Awaitable[None]]
    ) -> None:
        self.spec = al.ToolSpec(
            name,
            "One step.",
            {"type": "object"},
            annotations=al.ToolAnnotations(idempotent=idempotent),
        )
        self.idempotent = idempotent
        self.on_start = on_start
        self.runs: list[str] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await self.on_start()
        for _ in range(request.input.get("pauses", 0)):
            await anyio.lowlevel.checkpoint()
        self.runs.append(request.call_id)
        return f"done {request.call_id}"


class AskFor:
    """Asks the host to approve the calls of the tools named ``asked``."""

    def __init__(self, asked: frozenset[str]) -> None:
        self.asked = asked

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if isinstance(request, al.permissions.ToolInvocation) and request.tool_name in self.asked:
            return al.permissions.AskApproval("confirm", request.summary)
        return al.permissions.Allow()


CALL = st.tuples(
    st.sampled_from(["claimed", "free", "asked"]),  # which tool
    st.integers(0, 2),  # how often it yields before it answers
)
PLANS = st.lists(st.lists(CALL, min_size=1, max_size=3), min_size=1, max_size=3)
SESSIONS = itertools.count()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=PLANS, parallel=st.booleans())
async def test_no_claimed_result_is_acted_on_before_the_store_holds_it(
    store: SessionStore, plan: list[list[tuple[str, int]]], parallel: bool
) -> None:
    session_id = f"plan-{next(SESSIONS)}"
    claimed = {"claimed", "asked"}
    unsaved_seen: list[set[str]] = []  # by the model, or by a call run after them in turn

    async def check_earlier_calls() -> None:
        # Run one after another (no AsyncTaskManager): every claimed call that
        # answered before this one started has its result in the store.
        if not parallel:
            finished = {c for name in claimed for c in tools[name].runs}
            missing = finished - await stored_answers(store, session_id)
            if missing:
                unsaved_seen.append(missing)

    tools = {
        "claimed": PlanTool("claimed", False, check_earlier_calls),
        "free": PlanTool("free", True, check_earlier_calls),
        "asked": PlanTool("asked", False, check_earlier_calls),  # claimed once approved
    }
    calls = 0

    async def model(request: al.model.TurnRequest) -> Any:
        nonlocal calls
        # Every claimed call's result the model is about to see is in the store.
        shown = {
            part.call_id
            for item in request.transcript
            for part in item.parts
            if isinstance(part, al.ToolResultPart) and part.call_id.split("-")[0] in claimed
        }
        missing = shown - await stored_answers(store, session_id)
        if missing:
            unsaved_seen.append(missing)
        calls += 1
        if calls > len(plan):
            return "done"
        return tool_calls(
            *(
                call(name, {"pauses": pauses}, id=f"{name}-{calls}-{index}")
                for index, (name, pauses) in enumerate(plan[calls - 1])
            )
        )

    async with al.tasks.AsyncTaskManager() as manager:
        built = agent(
            store,
            model,
            *tools.values(),
            manager=manager if parallel else None,
            permissions=AskFor(frozenset({"asked"})),
        )
        limits = al.LoopLimits(max_model_calls_per_turn=10)
        driver = await built.start(al.SessionConfig(session_id, limits=limits))
        driver.submit_input([user("go")])
        step = await driver.next()
        while not isinstance(step, al.Finished):
            if isinstance(step, al.ApprovalRequest):
                step.approve()
            step = await driver.next()
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    assert unsaved_seen == []
    every_call = {
        f"{name}-{n + 1}-{i}" for n, r in enumerate(plan) for i, (name, _) in enumerate(r)
    }
    assert {c for tool in tools.values() for c in tool.runs} == every_call  # each ran once
    assert sum(len(tool.runs) for tool in tools.values()) == len(every_call)
    # The store holds the session as the driver has it.
    assert await stored_answers(store, session_id) == every_call
