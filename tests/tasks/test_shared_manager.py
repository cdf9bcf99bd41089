"""One AsyncTaskManager shared by the sessions of one Agent: every driver sees only
its own tasks' results (same turn ids and call ids in every session), while the
handle sees every task with its session."""

from __future__ import annotations

import gc
import tracemalloc

import anyio
import pytest
from tasks_support import StepRunner, next_event, notifications, user

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio


class SessionGate:
    """Each call waits until ``release(session, call_id)``; answers ``session:call``."""

    spec = al.ToolSpec("gate", "Wait until released.", {"type": "object"})

    def __init__(self) -> None:
        self._entered: dict[tuple[str, str], anyio.Event] = {}
        self._gates: dict[tuple[str, str], anyio.Event] = {}
        self.cancelled: list[tuple[str, str]] = []

    def entered(self, session: str, call_id: str) -> anyio.Event:
        return self._entered.setdefault((session, call_id), anyio.Event())

    def release(self, session: str, call_id: str) -> None:
        self._gates.setdefault((session, call_id), anyio.Event()).set()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        key = (ctx.session_id, request.call_id)
        self.entered(*key).set()
        try:
            await self._gates.setdefault(key, anyio.Event()).wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(key)
            raise
        return f"{ctx.session_id}:{request.call_id}"


def shared_agent(
    manager: al.tasks.AsyncTaskManager, gate: SessionGate, replies: list[Reply | str]
) -> al.Agent:
    # One scripted model per session: ScriptedModel plays one script per start.
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(replies))
        .add_tool_source(al.ToolRegistry().with_tool(gate))
        .task_manager(manager)
        .build()
    )


def outputs(driver: al.LoopDriver) -> list[tuple[str, object]]:
    return [
        (result.call_id, result.output)
        for item in driver.snapshot().transcript
        for result in item.tool_results()
    ]


@pytest.mark.parametrize("calls", [1, 2])
@pytest.mark.parametrize("first_released", ["a", "b"])
async def test_each_session_gets_its_own_results_whatever_finishes_first(
    calls: int, first_released: str
) -> None:
    gate = SessionGate()
    reply = tool_calls(*(call("gate") for _ in range(calls)))
    async with al.tasks.AsyncTaskManager() as manager:
        drivers = {}
        for name in ("a", "b"):
            drivers[name] = await shared_agent(manager, gate, [reply, "done"]).start(name)
            drivers[name].submit_input([user("go")])
        async with anyio.create_task_group() as group:
            runners = {name: StepRunner(group, driver) for name, driver in drivers.items()}
            for name in ("a", "b"):
                for index in range(1, calls + 1):
                    await gate.entered(name, f"call-{index}").wait()
            order = [first_released, "b" if first_released == "a" else "a"]
            for name in order:
                for index in range(1, calls + 1):
                    gate.release(name, f"call-{index}")
                await anyio.sleep(0.01)
            steps = {name: await runner.result() for name, runner in runners.items()}
        for name, driver in drivers.items():
            assert isinstance(steps[name], al.AfterToolResult)
            assert outputs(driver) == [
                (f"call-{index}", f"{name}:call-{index}") for index in range(1, calls + 1)
            ]


async def test_a_background_result_reaches_only_its_own_session() -> None:
    gate = SessionGate()
    routing = al.tasks.RouteByName({"gate": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        a = await shared_agent(manager, gate, [tool_calls(call("gate")), "a saw it"]).start("a")
        b = await shared_agent(manager, gate, ["b answers", "b again"]).start("b")
        a.submit_input([user("go")])
        assert isinstance(await a.next(), al.AwaitingInput)
        await gate.entered("a", "call-1").wait()
        gate.release("a", "call-1")
        started = await handle.next_event()
        assert isinstance(started, al.tasks.TaskStarted)
        assert started.task.session_id == "a"
        finished = await handle.next_event()
        assert isinstance(finished, al.tasks.TaskSucceeded)
        b.submit_input([user("hello")])
        step = await b.next()
        assert isinstance(step, al.Finished)
        assert [item.kind for item in b.snapshot().transcript] == [
            al.ItemKind.USER,
            al.ItemKind.ASSISTANT,
        ]
        step = await a.next()  # a's result starts a's next turn
        assert isinstance(step, al.Finished)
        notes = [
            item.text_content
            for item in a.snapshot().transcript
            if item.kind is al.ItemKind.NOTIFICATION
        ]
        assert notes == ["Background tool call call-1 completed: a:call-1"]


async def test_interrupting_one_sessions_turn_leaves_the_others_tasks_running() -> None:
    gate = SessionGate()
    controller = al.CancellationController()
    async with al.tasks.AsyncTaskManager() as manager:
        handle = manager.handle()
        agent_a = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("gate"), call("gate")), "a done"]))
            .add_tool_source(al.ToolRegistry().with_tool(gate))
            .task_manager(manager)
            .cancellation(controller.handle())
            .build()
        )
        a = await agent_a.start("a")
        reply = tool_calls(call("gate"), call("gate"))
        b = await shared_agent(manager, gate, [reply, "b done"]).start("b")
        for driver in (a, b):
            driver.submit_input([user("go")])
        async with anyio.create_task_group() as group:
            run_a, run_b = StepRunner(group, a), StepRunner(group, b)
            for name in ("a", "b"):
                await gate.entered(name, "call-1").wait()
                await gate.entered(name, "call-2").wait()
            controller.interrupt()
            step_a = await run_a.result()
            assert isinstance(step_a, al.Finished)
            assert step_a.result.finish_reason is al.FinishReason.CANCELLED
            running = sorted((t.session_id, t.call_id) for t in await handle.list_running())
            assert running == [("b", "call-1"), ("b", "call-2")]
            gate.release("b", "call-1")
            gate.release("b", "call-2")
            step_b = await run_b.result()
        assert sorted(gate.cancelled) == [("a", "call-1"), ("a", "call-2")]
        assert isinstance(step_b, al.AfterToolResult)
        assert outputs(b) == [("call-1", "b:call-1"), ("call-2", "b:call-2")]


async def test_the_managers_own_take_returns_every_sessions_background_results() -> None:
    gate = SessionGate()
    routing = al.tasks.RouteByName({"gate": al.tasks.TaskKind.BACKGROUND})
    async with al.tasks.AsyncTaskManager(routing=routing) as manager:
        handle = manager.handle()
        drivers = []
        for name in ("a", "b"):
            driver = await shared_agent(manager, gate, [tool_calls(call("gate"))]).start(name)
            driver.submit_input([user("go")])
            assert isinstance(await driver.next(), al.AwaitingInput)
            drivers.append(driver)
        for name in ("a", "b"):
            await gate.entered(name, "call-1").wait()
            gate.release(name, "call-1")
        ended = [type(await handle.next_event()).__name__ for _ in range(4)]
        assert sorted(ended) == ["TaskStarted", "TaskStarted", "TaskSucceeded", "TaskSucceeded"]
        taken = manager.take_background_results()
    assert sorted(done.result.output for done in taken) == ["a:call-1", "b:call-1"]
    assert manager.take_background_results() == []


async def test_a_view_is_per_driver_and_shares_the_managers_handle() -> None:
    async with al.tasks.AsyncTaskManager() as manager:
        one, two = manager.for_session("s"), manager.for_session("s")
        assert one is not two
        assert one.session_id == "s"
        assert one.handle() is manager.handle()
        assert isinstance(one, al.tasks.TaskManager)


@pytest.mark.parametrize("calls", [1, 2])
async def test_a_long_lived_manager_keeps_nothing_of_finished_turns(calls: int) -> None:
    """A server's manager outlives its sessions: after each turn it holds no memory
    for it (every turn of every session used to leave an entry behind)."""

    class Echo:
        spec = al.ToolSpec("echo", "Echo.", {"type": "object"})

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            await anyio.lowlevel.checkpoint()
            return "ok"

    reply = tool_calls(*(call("echo") for _ in range(calls)))

    async def one_session(manager: al.tasks.AsyncTaskManager, name: str) -> None:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([reply, "done", reply, "done"]))
            .add_tool_source(al.ToolRegistry().with_tool(Echo()))
            .task_manager(manager)
            .build()
        )
        for turn in range(2):
            result = await al.run(agent, f"go {turn}", config=name)
            assert result.stop_reason == "finished"
            agent = result.continuation()

    manager_file = al.tasks.AsyncTaskManager.__init__.__code__.co_filename
    async with al.tasks.AsyncTaskManager() as manager:
        await one_session(manager, "warm-up")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for index in range(20):
                await one_session(manager, f"s{index}")
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    only_manager = [tracemalloc.Filter(True, manager_file)]
    growth = after.filter_traces(only_manager).compare_to(
        before.filter_traces(only_manager), "lineno"
    )
    # 20 sessions x 2 turns ran; a block or two may stay in CPython's free lists.
    assert [stat for stat in growth if stat.count_diff > 2] == []


@pytest.mark.parametrize("resume_first", ["a", "b"])
async def test_a_resumed_driver_receives_the_background_results_its_predecessor_left(
    resume_first: str,
) -> None:
    """A background result belongs to its session: the driver resumed from the
    session's checkpoint on the same manager takes it, and no other session does."""
    gate = SessionGate()
    replies: list[Reply | str] = [tool_calls(call("gate")), "started", "got it"]
    everything_background = al.tasks.AsyncTaskManager(
        routing=lambda request: al.tasks.TaskKind.BACKGROUND
    )
    async with everything_background as manager:
        handle = manager.handle()
        agents = {name: shared_agent(manager, gate, replies) for name in ("a", "b")}
        documents = {}
        for name, agent in agents.items():
            first = await agent.start(name)
            first.submit_input([user("go")])
            waiting = await first.next()
            assert isinstance(waiting, al.AwaitingInput)  # its only call runs in the background
            documents[name] = first.checkpoint()
        other = "b" if resume_first == "a" else "a"
        resumed = {name: await agents[name].resume(documents[name]) for name in ("a", "b")}
        gate.release(resume_first, "call-1")
        while not isinstance(await next_event(handle), al.tasks.TaskSucceeded):
            pass
        assert isinstance(await resumed[other].next(), al.AwaitingInput)  # nothing for it yet
        done = await resumed[resume_first].next()
        assert isinstance(done, al.Finished)
        assert done.result.items[0].text_content == "started"
        assert notifications(resumed[resume_first].snapshot().transcript) == [
            f"Background tool call call-1 completed: {resume_first}:call-1"
        ]
        gate.release(other, "call-1")
        while not isinstance(await next_event(handle), al.tasks.TaskSucceeded):
            pass
        assert notifications(resumed[other].snapshot().transcript) == []
        assert isinstance(await resumed[other].next(), al.Finished)
        assert notifications(resumed[other].snapshot().transcript) == [
            f"Background tool call call-1 completed: {other}:call-1"
        ]
        assert manager.take_background_results() == []
