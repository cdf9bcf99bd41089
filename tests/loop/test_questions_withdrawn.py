"""A question whose call stops waiting for it is withdrawn: ``next()`` goes on to the
call's result, a late answer raises ``QuestionWithdrawnError`` and changes nothing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import BlockingTool, user
from structlog.testing import capture_logs

import agentloop as al
import agentloop.host
import agentloop.observe
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class GivingUp:
    """Asks; the test makes it stop waiting (``give_up``), or its ``limit`` fires."""

    spec = al.ToolSpec("pick", "Ask the user to pick.", {"type": "object"})
    asks_host = True

    def __init__(self, how: str = "return", *, again: bool = False) -> None:
        self.how = how
        self.again = again
        self.scope: anyio.CancelScope | None = None
        self.asked = anyio.Event()
        self.ended = anyio.Event()
        self.stopped = anyio.Event()  # it stopped waiting for its first question
        self.answers: list[al.QuestionAnswer] = []

    def give_up(self) -> None:
        assert self.scope is not None
        self.scope.cancel()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        try:
            with anyio.CancelScope() as self.scope:
                self.asked.set()
                self.answers.append(await ctx.ask(al.tools.Question("pick", "Which one?")))
                return "picked"
            self.stopped.set()
            if self.how == "raise":
                raise RuntimeError("the server cancelled the request")
            if self.again:  # still running: it asks a second question
                answer = await ctx.ask(al.tools.Question("pick", "Which one, then?"))
                return f"second: {answer.action.value}"
            return "gave up waiting"
        finally:
            self.ended.set()


def _agent(manager: al.tasks.AsyncTaskManager, *tools: Any, **more: Any) -> al.Agent:
    registry = al.ToolRegistry()
    for tool in tools:
        registry = registry.with_tool(tool)
    calls = [call(tool.spec.name, {}, id=f"c{n}") for n, tool in enumerate(tools)]
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([tool_calls(*calls), "done"]))
        .add_tool_source(registry)
        .task_manager(manager)
        .input([user("go")])
    )
    if "store" in more:
        builder = builder.store(more["store"])
    if "observer" in more:
        builder = builder.observer(more["observer"])
    return builder.build()


def _results(driver: al.LoopDriver) -> list[tuple[str, Any]]:
    return [
        (part.call_id, part.output)
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


WITHDRAWN = (
    "cannot answer_question_for('question:c0:1'): the question was withdrawn: call c0 "
    "(pick) stopped waiting for it before an answer (it ended, was cancelled or timed "
    "out); nothing was recorded; call next() to go on with the call's result"
)


@pytest.mark.parametrize(
    ("how", "result"),
    [
        ("return", "gave up waiting"),
        ("raise", "tool 'pick' failed: RuntimeError: the server cancelled the request"),
    ],
)
async def test_next_goes_on_to_the_result_of_a_call_that_stopped_waiting(
    how: str, result: str
) -> None:
    tool = GivingUp(how)
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, tool).start("s")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.id == "question:c0:1"
        tool.give_up()
        await tool.ended.wait()
        assert driver.state is al.DriverState.AWAITING_ANSWER
        with pytest.raises(al.QuestionWithdrawnError) as raised:
            step.answer()
        assert str(raised.value) == WITHDRAWN
        assert (raised.value.question_id, raised.value.call_id) == ("question:c0:1", "c0")
        assert isinstance(raised.value, al.InvalidStateError)
        after = await driver.next()
        assert isinstance(after, al.AfterToolResult)
        with pytest.raises(al.QuestionWithdrawnError) as late:
            step.decline()  # still named after the driver moved on
        assert str(late.value) == WITHDRAWN
        assert isinstance(await driver.next(), al.Finished)
    assert tool.answers == []
    assert _results(driver) == [("c0", result)]
    al.testing.assert_transcript_valid(list(driver.snapshot().transcript))


async def test_the_rounds_other_question_surfaces_after_a_withdrawal() -> None:
    first, second = GivingUp(), GivingUp()
    second.spec = al.ToolSpec("pick2", "Ask again.", {"type": "object"})
    tools = {"c0": first, "c1": second}
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, first, second).start("s")
        one = await driver.next()
        assert isinstance(one, al.CallQuestion)
        assert one.id == f"question:{one.call_id}:1"
        other_id = "c1" if one.call_id == "c0" else "c0"
        tools[one.call_id].give_up()
        await tools[one.call_id].ended.wait()
        two = await driver.next()  # the other call's question, not the withdrawn one
        assert isinstance(two, al.CallQuestion)
        assert (two.id, two.call_id) == (f"question:{other_id}:2", other_id)
        two.answer()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert dict(_results(driver)) == {one.call_id: "gave up waiting", other_id: "picked"}
    assert tools[other_id].answers == [al.QuestionAnswer.accept(None)]
    assert tools[one.call_id].answers == []


async def test_a_call_that_stops_waiting_and_asks_again_shows_its_new_question() -> None:
    tool = GivingUp(again=True)
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, tool).start("s")
        first = await driver.next()
        assert isinstance(first, al.CallQuestion)
        tool.give_up()
        await tool.stopped.wait()
        with anyio.fail_after(10):
            second = await driver.next()
        assert isinstance(second, al.CallQuestion)
        assert (second.id, second.question.message) == ("question:c0:2", "Which one, then?")
        with pytest.raises(al.QuestionWithdrawnError):
            first.answer()
        second.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert _results(driver) == [("c0", "second: decline")]


async def test_the_round_waits_for_other_running_calls_after_a_withdrawal() -> None:
    tool, blocking = GivingUp(), BlockingTool()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, tool, blocking).start("s")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        tool.give_up()
        await tool.ended.wait()
        async with anyio.create_task_group() as group:
            group.start_soon(driver.run_until_blocked)
            await blocking.entered.wait()
            blocking.release.set()
    assert _results(driver) == [("c0", "gave up waiting"), ("c1", "released")]


async def test_observers_see_the_withdrawal_once() -> None:
    events: list[Any] = []

    class Recorder:
        def handle_event(self, event: Any) -> None:
            if isinstance(event, al.observe.QuestionAsked | al.observe.QuestionAnswered):
                events.append(event)

    tool = GivingUp()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, tool, observer=Recorder()).start("s")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        tool.give_up()
        await tool.ended.wait()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [type(event).__name__ for event in events] == ["QuestionAsked", "QuestionAnswered"]
    assert events[1] == al.observe.QuestionAnswered("c0", "question:c0:1", "withdrawn")


async def test_a_stored_session_no_longer_waits_on_a_withdrawn_question() -> None:
    store = MemorySessionStore()
    tool = GivingUp()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, tool, store=store).start("s")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        stored = await store.load("s")
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_ANSWER
        assert [
            q.question_id
            for s in await store.sessions_awaiting_answer()
            for q in s.unanswered_questions
        ] == [step.id]
        tool.give_up()
        await tool.ended.wait()
        after = await driver.next()
        assert isinstance(after, al.AfterToolResult)
        stored = await store.load("s")
        assert stored is not None
        assert stored.status is not SessionStatus.AWAITING_ANSWER
        assert list(await store.sessions_awaiting_answer()) == []
        assert isinstance(await driver.next(), al.Finished)
    assert _results(driver) == [("c0", "gave up waiting")]


class RacingStore(MemorySessionStore):
    """A real memory store; while the session waits on a question, the first load records
    the inbox's answer and then lets the call stop waiting (the race a worker meets)."""

    def __init__(self, tool: GivingUp) -> None:
        super().__init__()
        self.tool = tool
        self.raced = False

    async def load(self, session_id: str) -> Any:
        stored = await super().load(session_id)
        if stored is not None and stored.status is SessionStatus.AWAITING_ANSWER and not self.raced:
            self.raced = True
            await self.record_answer(session_id, "question:c0:1", action="decline")
            self.tool.give_up()
            await self.tool.ended.wait()
            stored = await super().load(session_id)
        return stored


async def test_a_worker_holding_a_recorded_answer_to_a_withdrawn_question_goes_on() -> None:
    tool = GivingUp()
    store = RacingStore(tool)
    async with al.tasks.AsyncTaskManager() as manager:
        agent = _agent(manager, tool, store=store)
        driver = await agent.start("s")
        await driver.save()
        worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
        with capture_logs() as logs:
            advanced = await worker.run_once()
        assert advanced is not None
        assert isinstance(advanced.step, al.Finished)
        assert store.raced
    stored = await store.load("s")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_INPUT
    assert [e for e in logs if e["event"].startswith("answer not handed")] == [
        {
            "event": "answer not handed over: the question was withdrawn",
            "log_level": "info",
            "session_id": "s",
            "question_id": "question:c0:1",
            "action": "decline",
        }
    ]
    assert tool.answers == []
    transcript = await store.transcript("s")
    assert transcript is not None
    results = [
        (part.call_id, part.output)
        for item in transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
    assert results == [("c0", "gave up waiting")]


MOVES = ["answer", "stop_then_answer", "stop_then_next", "answer_then_stop", "next"]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(min_value=1, max_value=3),
    moves=st.lists(st.sampled_from(MOVES), max_size=8),
)
async def test_any_interleaving_of_answers_and_withdrawals_answers_every_call_once(
    count: int, moves: list[str]
) -> None:
    events: list[Any] = []

    class Recorder:
        def handle_event(self, event: Any) -> None:
            if isinstance(event, al.observe.QuestionAsked | al.observe.QuestionAnswered):
                events.append(event)

    tools = []
    for n in range(count):
        tool = GivingUp()
        tool.spec = al.ToolSpec(f"pick{n}", "Ask.", {"type": "object"})
        tools.append(tool)
    by_call = {f"c{n}": tool for n, tool in enumerate(tools)}
    expected: dict[str, set[str]] = {}
    pending = list(moves)
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await _agent(manager, *tools, observer=Recorder()).start("s")
        step = await driver.next()
        for _ in range(40):
            if isinstance(step, al.Finished):
                break
            if isinstance(step, al.CallQuestion):
                tool, move = by_call[step.call_id], pending.pop(0) if pending else "answer"
                if move in ("answer", "answer_then_stop"):
                    step.answer()
                    expected[step.call_id] = {"picked"}
                if move == "answer_then_stop":  # the answer may or may not reach it first
                    tool.give_up()
                    expected[step.call_id] = {"picked", "gave up waiting"}
                if move.startswith("stop_then"):
                    tool.give_up()
                    await tool.ended.wait()
                    expected[step.call_id] = {"gave up waiting"}
                if move == "stop_then_answer":
                    with pytest.raises(al.QuestionWithdrawnError):
                        step.answer()
            else:
                assert isinstance(step, al.AfterToolResult)
            step = await driver.next()
    assert isinstance(step, al.Finished)
    transcript = list(driver.snapshot().transcript)
    al.testing.assert_transcript_valid(transcript)
    results = _results(driver)
    assert sorted(call_id for call_id, _ in results) == sorted(by_call)
    for call_id, output in results:
        assert output in expected[call_id]
    asked = [e.question_id for e in events if isinstance(e, al.observe.QuestionAsked)]
    answered = [e.question_id for e in events if isinstance(e, al.observe.QuestionAnswered)]
    assert sorted(asked) == sorted(answered)  # each shown question ends once
    assert len(set(asked)) == len(asked) == count


async def test_an_interrupt_after_a_withdrawal_names_the_running_call_not_an_approval() -> None:
    tool = GivingUp()
    controller = al.CancellationController()
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("pick", {}, id="c0")), "done"]))
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .cancellation(controller.handle())
            .input([user("go")])
            .build()
        )
        driver = await agent.start("s")
        assert isinstance(await driver.next(), al.CallQuestion)
        tool.give_up()
        await tool.ended.wait()  # its result is not taken yet
        with pytest.raises(al.InvalidStateError) as refused:
            driver.checkpoint()
        assert str(refused.value) == (
            "cannot checkpoint in state AWAITING_ANSWER: calls c0 are still executing or "
            "their results are not taken yet; call next() until they are, then checkpoint"
        )
        controller.interrupt()
        step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.metadata["agentloop.interrupt_reason"] == (
        "interrupted while tool calls were running"
    )
    al.testing.assert_transcript_valid(list(driver.snapshot().transcript))
