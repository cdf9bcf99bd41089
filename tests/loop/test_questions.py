"""A running call asks the host: ``CallQuestion`` steps, answers, refusals, checkpoints."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import BlockingTool, user

import agentloop as al
import agentloop.host
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.store import SessionStatus
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
    "additionalProperties": False,
}


class AskingTool:
    """Asks for a name, then answers with what it was told."""

    spec = al.ToolSpec("ask_name", "Ask the user for a name.", {"type": "object"})
    asks_host = True

    def __init__(self) -> None:
        self.answers: list[al.QuestionAnswer] = []
        self.cancelled = False

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        question = al.tools.Question("elicitation", "Your name?", NAME_SCHEMA, {"mode": "form"})
        try:
            answer = await ctx.ask(question)
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        self.answers.append(answer)
        if answer.accepted:
            return f"hello {answer.content['name']}"
        return f"no name ({answer.action.value})"


@asynccontextmanager
async def asking_driver(
    *tools: Any, replies: list[Any] | None = None, calls: int = 1
) -> AsyncIterator[tuple[al.LoopDriver, al.testing.ScriptedModel]]:
    script = replies or [
        tool_calls(*(call(tool.spec.name, {}, id=f"call-{n}") for n, tool in enumerate(tools))),
        "done",
    ]
    model = al.testing.ScriptedModel(script)
    async with al.tasks.AsyncTaskManager() as manager:
        registry = al.ToolRegistry()
        for tool in tools:
            registry = registry.with_tool(tool)
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(registry)
            .task_manager(manager)
            .input([user("go")])
            .build()
        )
        yield await agent.start("s"), model


def tool_results(driver: al.LoopDriver) -> list[tuple[str, Any]]:
    return [
        (part.call_id, part.output)
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]


async def test_a_question_surfaces_and_its_answer_reaches_the_call() -> None:
    tool = AskingTool()
    async with asking_driver(tool) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert (step.call_id, step.tool_name, step.turn_id, step.path) == (
            "call-0",
            "ask_name",
            "turn-1",
            (),
        )
        assert step.question == al.tools.Question(
            "elicitation", "Your name?", NAME_SCHEMA, {"mode": "form"}
        )
        assert step.is_blocking
        assert driver.state is al.DriverState.AWAITING_ANSWER
        step.answer({"name": "Ada", "age": 36})
        assert tool.answers == []  # handed over; the call runs on when it is scheduled
        finished = await driver.run_until_blocked()
        assert isinstance(finished, al.Finished)
    assert tool.answers == [al.QuestionAnswer.accept({"name": "Ada", "age": 36})]
    assert tool_results(driver) == [("call-0", "hello Ada")]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (lambda step: step.decline(), "no name (decline)"),
        (lambda step: step.cancel(), "no name (cancel)"),
    ],
)
async def test_declined_and_cancelled_questions(answer: Any, expected: str) -> None:
    tool = AskingTool()
    async with asking_driver(tool) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        answer(step)
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool_results(driver) == [("call-0", expected)]


async def test_next_without_an_answer_asks_again() -> None:
    tool = AskingTool()
    async with asking_driver(tool) as (driver, _model):
        first = await driver.next()
        again = await driver.next()
        assert again == first
        assert driver.state is al.DriverState.AWAITING_ANSWER
        again.answer({"name": "Bo"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool_results(driver) == [("call-0", "hello Bo")]


async def test_illegal_answers_raise_and_change_nothing() -> None:
    tool = AskingTool()
    async with asking_driver(tool) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        before = driver.checkpoint()
        cases: list[tuple[Any, type[Exception], str]] = [
            (
                lambda: step.answer({"age": 3}),
                al.InvalidInputError,
                f"answer_question_for({step.id!r}): the content does not match the question's "
                "schema ((content): 'name' is a required property); answer with content that "
                "matches question.schema, or decline()",
            ),
            (
                lambda: step.answer({"name": "x", "age": -1}),
                al.InvalidInputError,
                f"answer_question_for({step.id!r}): the content does not match the question's "
                "schema (age: -1 is less than the minimum of 0); answer with content that "
                "matches question.schema, or decline()",
            ),
            (
                lambda: driver.answer_question_for(step.id, "yes"),
                al.InvalidInputError,
                f"answer_question_for({step.id!r}) expects a QuestionAnswer, got str; use "
                "QuestionAnswer.accept(content), .decline() or .cancel()",
            ),
            (
                lambda: driver.answer_question_for(step.id, al.QuestionAnswer("decline", 1)),
                al.InvalidInputError,
                f"answer_question_for({step.id!r}): a decline answer carries no content, got 1",
            ),
            (
                lambda: driver.answer_question_for("question:other:9", al.QuestionAnswer.cancel()),
                al.InvalidStateError,
                "cannot answer_question_for('question:other:9'): that question is not pending "
                f"(pending: {step.id!r}, asked by call call-0)",
            ),
            (
                lambda: driver.submit_input("hi"),
                al.InvalidStateError,
                "cannot submit input in state AWAITING_ANSWER: a running tool call waits for "
                "the answer to its question; answer(), decline() or cancel() the CallQuestion, "
                "then call next()",
            ),
        ]
        for attempt, error, message in cases:
            with pytest.raises(error) as raised:
                attempt()
            assert str(raised.value) == message
            assert driver.checkpoint() == before
            assert driver.state is al.DriverState.AWAITING_ANSWER
        step.answer({"name": "Cy"})
        with pytest.raises(al.InvalidStateError) as twice:
            step.answer({"name": "Di"})
        assert str(twice.value) == (
            f"cannot answer_question_for({step.id!r}): the pending question was already "
            "answered; call next() to continue"
        )
        assert isinstance(await driver.run_until_blocked(), al.Finished)
        with pytest.raises(al.InvalidStateError) as late:
            step.answer({"name": "Ed"})
        assert str(late.value) == (
            f"cannot answer_question_for({step.id!r}) in state IDLE: no question of a running "
            "call is pending; answer a CallQuestion step returned by next()"
        )
    assert tool_results(driver) == [("call-0", "hello Cy")]
    assert tool.answers == [al.QuestionAnswer.accept({"name": "Cy"})]


async def test_the_rounds_other_calls_run_on_while_a_question_waits() -> None:
    asking, blocking = AskingTool(), BlockingTool()
    async with asking_driver(asking, blocking) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        await blocking.entered.wait()
        blocking.release.set()
        step.answer({"name": "Al"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool_results(driver) == [("call-0", "hello Al"), ("call-1", "released")]


async def test_an_interrupt_while_a_question_waits_answers_every_call_once() -> None:
    asking, blocking = AskingTool(), BlockingTool()
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(
        [tool_calls(call("ask_name", {}, id="a"), call("block", {}, id="b"))]
    )
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(al.ToolRegistry().with_tool(asking).with_tool(blocking))
            .task_manager(manager)
            .cancellation(controller.handle())
            .input([user("go")])
            .build()
        )
        driver = await agent.start("s")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        controller.interrupt()
        finished = await driver.next()
    assert isinstance(finished, al.Finished)
    assert finished.result.finish_reason is al.FinishReason.CANCELLED
    assert finished.result.metadata["agentloop.interrupt_stage"] == "question"
    assert [call_id for call_id, _ in tool_results(driver)] == ["a", "b"]
    assert asking.cancelled
    assert blocking.cancelled
    assert al.transcript.find_violation(driver.snapshot().transcript) is None


@pytest.mark.parametrize("declared", [True, False])
async def test_a_call_that_cannot_be_watched_cannot_ask(declared: bool) -> None:
    class Asker(AskingTool):
        asks_host = declared

    tool = Asker()
    model = al.testing.ScriptedModel([tool_calls(call("ask_name", {}, id="a")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        builder = al.Agent.builder().model(model)
        builder = builder.add_tool_source(al.ToolRegistry().with_tool(tool))
        if not declared:  # runs in a task of its own, but nothing watches for its question
            builder = builder.task_manager(manager)
        driver = await builder.input([user("go")]).build().start("s")  # declared: inline
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [(call_id, output)] = tool_results(driver)
    assert call_id == "a"
    expected = (
        "cannot ask the host from call a: it runs inline in the driver's step, so next() "
        "cannot return the question while it runs; build the agent with "
        ".task_manager(AsyncTaskManager()) entered around the driver"
        if declared
        else "cannot ask the host from call a: its tool does not declare that it asks (the "
        "driver would not watch for its question); set asks_host = True on the tool "
        "(@tool(asks_host=True))"
    )
    assert expected in str(output)


async def test_run_answers_questions_with_its_callback_or_stops() -> None:
    for answer, stop, text in [
        (lambda q: al.QuestionAnswer.accept({"name": "Flo"}), "finished", "hello Flo"),
        (None, "question_pending", None),
    ]:
        tool = AskingTool()
        model = al.testing.ScriptedModel([tool_calls(call("ask_name", {}, id="a")), "done"])
        async with al.tasks.AsyncTaskManager() as manager:
            agent = (
                al.Agent.builder()
                .model(model)
                .add_tool_source(al.ToolRegistry().with_tool(tool))
                .task_manager(manager)
                .build()
            )
            result = await al.run(agent, "go", answer=answer)
            assert result.stop_reason.value == stop
            if text is None:
                assert result.pending_question is not None
                assert result.pending_question.call_id == "a"
                assert result.is_paused
                result.pending_question.decline()
                resumed = await al.continue_from(result)
                assert resumed.stop_reason is al.RunStopReason.FINISHED
                assert tool.answers == [al.QuestionAnswer.decline()]
            else:
                assert tool.answers == [al.QuestionAnswer.accept({"name": text[6:]})]


async def test_a_checkpoint_records_the_question_and_a_restore_answers_the_call_in_doubt() -> None:
    tool = AskingTool()
    async with asking_driver(tool) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        document = json.loads(json.dumps(driver.checkpoint()))
        assert document["state"] == "AWAITING_ANSWER"
        [saved] = document["turn"]["round"]["calls"]
        assert saved["status"] == "unstarted"
        assert saved["question"] == {
            "type": "call_question",
            "id": step.id,
            "call_id": "call-0",
            "tool_name": "ask_name",
            "turn_id": "turn-1",
            "question": {
                "kind": "elicitation",
                "message": "Your name?",
                "schema": NAME_SCHEMA,
                "data": {"mode": "form"},
                "resume": None,
                "model_prompt": None,
            },
            "path": [],
        }
        step.cancel()
    model = al.testing.ScriptedModel(["the call is in doubt"])
    agent = (
        al.Agent.builder().model(model).add_tool_source(al.ToolRegistry().with_tool(tool)).build()
    )
    restored = await agent.resume(document)
    assert restored.state is al.DriverState.AFTER_TOOL_RESULT
    assert isinstance(await restored.run_until_blocked(), al.Finished)
    [(call_id, _output)] = tool_results(restored)
    results = [
        part
        for item in restored.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
    assert call_id == "call-0"
    assert al.tools.result_outcome(results[0]) is al.tools.ResultOutcome.IN_DOUBT


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=_json)
async def test_any_answer_payload_is_either_delivered_exactly_or_refused_unchanged(
    content: Any,
) -> None:
    tool = AskingTool()
    fits = (
        isinstance(content, dict)
        and isinstance(content.get("name"), str)
        and set(content) <= {"name", "age"}
        and ("age" not in content or (type(content["age"]) is int and content["age"] >= 0))
    )
    async with asking_driver(tool) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        before = driver.checkpoint()
        if fits:
            step.answer(content)
        else:
            with pytest.raises(al.InvalidInputError):
                step.answer(content)
            assert driver.checkpoint() == before
            step.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    expected = al.QuestionAnswer.accept(content) if fits else al.QuestionAnswer.decline()
    assert tool.answers == [expected]


_questions = st.builds(
    al.tools.Question,
    kind=st.text(min_size=1, max_size=8),
    message=st.text(max_size=12),
    schema=st.sampled_from([None, {"type": "string"}, NAME_SCHEMA, {"type": "array"}]),
    data=_json,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(question=_questions)
async def test_a_checkpoint_holding_any_question_reads_back_equal(
    question: al.tools.Question,
) -> None:
    from agentloop.loop._checkpoint import parse

    class Asker(AskingTool):
        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            answer = await ctx.ask(question)
            return answer.action.value

    async with asking_driver(Asker()) as (driver, _model):
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert step.question == question
        document = json.loads(json.dumps(driver.checkpoint()))
        restored = parse(document)
        assert restored.state is al.DriverState.AWAITING_ANSWER
        assert restored.turn is not None
        assert restored.turn.round is not None
        assert restored.turn.round.calls[0].question == step
        step.cancel()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool_results(driver) == [("call-0", "cancel")]


class ResumableAsker:
    """Asks with resume data; run again after a restart, goes on from ``ctx.resumed``."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    def __init__(self, block_rerun: bool = False) -> None:
        self.runs: list[Any] = []
        self.block_rerun = block_rerun
        self.rerunning = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        resumed = ctx.resumed
        self.runs.append(None if resumed is None else (resumed.question.resume, resumed.answer))
        if resumed is None:
            question = al.tools.Question(
                "seat", "Which seat?", {"type": "string"}, resume={"hold": 7}
            )
            answer = await ctx.ask(question)
        else:
            if self.block_rerun:
                self.rerunning.set()
                await anyio.sleep_forever()
            answer = resumed.answer
        return f"booked {answer.content} (hold {7 if resumed else 'live'})"


async def test_a_resumable_question_is_asked_again_after_a_restore_and_the_call_goes_on() -> None:
    from agentloop.store import MemorySessionStore

    store = MemorySessionStore()
    tool = ResumableAsker()

    def agent(manager: al.tasks.AsyncTaskManager, script: list[Any]) -> al.Agent:
        return (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .store(store)
            .input([user("go")])
            .build()
        )

    async with al.tasks.AsyncTaskManager() as manager:
        driver = await agent(manager, [tool_calls(call("book", {}, id="a"))]).start("s")
        asked = await driver.next()
        assert isinstance(asked, al.CallQuestion)
    saved = await store.load("s")
    assert saved is not None
    # Stored as awaiting an answer (an inbox can answer it: see tests/store).
    assert saved.status is SessionStatus.AWAITING_ANSWER
    assert saved.checkpoint["state"] == "AWAITING_ANSWER"
    assert al.store.session_problems(saved) == ()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await agent(manager, ["done"]).resume(session_id="s")
        assert driver.state is al.DriverState.AWAITING_ANSWER
        again = await driver.next()
        assert isinstance(again, al.CallQuestion)
        assert again == asked
        with pytest.raises(al.InvalidInputError):
            again.answer(12)  # the schema holds after the restore too
        again.answer("12C")
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == [None, ({"hold": 7}, al.QuestionAnswer.accept("12C"))]
    assert tool_results(driver) == [("a", "booked 12C (hold 7)")]
    stored = await store.load("s")
    assert stored is not None
    # The call's own claim is settled by its result; the rerun's claim is kept by its key.
    assert stored.started_calls == frozenset({f"a#{asked.id}"})


async def test_a_rerun_cut_short_by_a_second_restart_is_answered_in_doubt() -> None:
    from agentloop.store import MemorySessionStore

    store = MemorySessionStore()
    tool = ResumableAsker(block_rerun=True)

    def agent(manager: al.tasks.AsyncTaskManager, script: list[Any]) -> al.Agent:
        return (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .store(store)
            .input([user("go")])
            .build()
        )

    async with al.tasks.AsyncTaskManager() as manager:
        driver = await agent(manager, [tool_calls(call("book", {}, id="a"))]).start("s")
        assert isinstance(await driver.next(), al.CallQuestion)
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await agent(manager, []).resume(session_id="s")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        step.answer("3A")
        with anyio.CancelScope() as scope:  # the second "kill", while the rerun runs
            async with anyio.create_task_group() as group:
                group.start_soon(driver.next)
                await tool.rerunning.wait()
                scope.cancel()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await agent(manager, ["in doubt"]).resume(session_id="s")
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert len(tool.runs) == 2  # never a third time
    [result] = [
        part
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    ]
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT


class Summarizer:
    """Asks the agent's own model to summarize (a question with a model prompt)."""

    spec = al.ToolSpec("summarize", "Summarize a text.", {"type": "object"})
    asks_host = True

    def __init__(self) -> None:
        self.answers: list[al.QuestionAnswer] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        prompt = (al.Item.text(al.ItemKind.USER, "Summarize: a long story"),)
        question = al.tools.Question("sampling", "summarize", None, model_prompt=prompt)
        answer = await ctx.ask(question)
        self.answers.append(answer)
        return answer.content["text"] if answer.accepted else f"no summary ({answer.action})"


@pytest.mark.parametrize("limited", [False, True])
async def test_the_agents_own_model_answers_a_question_within_the_turns_limits(
    limited: bool,
) -> None:
    from agentloop.testing import text

    tool = Summarizer()
    first = tool_calls(call("summarize", {}, id="s"), usage=al.Usage(input_tokens=10))
    script = [first, text("A story.", usage=al.Usage(input_tokens=7)), text("ok")]
    if limited:
        script = [first, text("ok")]  # the sampling call is never made
    model = al.testing.ScriptedModel(script)
    limits = al.LoopLimits(max_input_tokens_per_turn=10 if limited else None)
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .input([user("go")])
            .build()
        )
        driver = await agent.start(al.SessionConfig("s", limits=limits))
        finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    if limited:
        assert tool.answers == [al.QuestionAnswer.decline()]
        assert tool_results(driver) == [("s", "no summary (decline)")]
        assert finished.result.finish_reason is al.FinishReason.LIMIT_REACHED
    else:
        assert tool.answers == [
            al.QuestionAnswer.accept({"text": "A story.", "model": "scripted-model"})
        ]
        assert tool_results(driver) == [("s", "A story.")]
        assert finished.result.usage == al.Usage(input_tokens=17)  # the sampling call counts
        sampled = model.requests[1]
        assert [item.text_content for item in sampled.transcript] == ["Summarize: a long story"]
        assert sampled.available_tools == ()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    asks=st.lists(st.booleans(), min_size=1, max_size=3),
    replies=st.lists(
        st.sampled_from(["answer", "decline", "cancel", "again", "interrupt"]), max_size=4
    ),
)
async def test_any_mix_of_questions_and_answers_leaves_every_call_answered_once(
    asks: list[bool], replies: list[str]
) -> None:
    class MaybeAsker:
        asks_host = True

        def __init__(self, name: str, asks: bool) -> None:
            self.spec = al.ToolSpec(name, "maybe ask", {"type": "object"})
            self.asks = asks

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            if not self.asks:
                return "quiet"
            answer = await ctx.ask(al.tools.Question("k", "?", {"type": "string"}))
            return f"{answer.action.value}:{answer.content}"

    tools = [MaybeAsker(f"t{n}", ask) for n, ask in enumerate(asks)]
    controller = al.CancellationController()
    script = [tool_calls(*(call(t.spec.name, {}, id=f"c{n}") for n, t in enumerate(tools))), "done"]
    registry = al.ToolRegistry()
    for tool in tools:
        registry = registry.with_tool(tool)
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(registry)
            .task_manager(manager)
            .cancellation(controller.handle())
            .input([user("go")])
            .build()
        )
        driver = await agent.start("s")
        pending = list(replies)
        step = await driver.next()
        for _ in range(20):
            if isinstance(step, al.Finished):
                break
            if isinstance(step, al.AfterToolResult):
                step = await driver.next()
                continue
            assert isinstance(step, al.CallQuestion)
            reply = pending.pop(0) if pending else "answer"
            if reply == "answer":
                step.answer("yes")
            elif reply == "decline":
                step.decline()
            elif reply == "cancel":
                step.cancel()
            elif reply == "interrupt":
                controller.interrupt()
            step = await driver.next()
    assert isinstance(step, al.Finished)
    transcript = driver.snapshot().transcript
    assert al.transcript.find_violation(transcript) is None
    answered = [call_id for call_id, _ in tool_results(driver)]
    assert sorted(answered) == [f"c{n}" for n in range(len(tools))]


async def test_a_worker_rests_on_a_question_and_leaves_the_session_alone() -> None:
    from agentloop.store import MemorySessionStore

    store = MemorySessionStore()
    tool = ResumableAsker()
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("book", {}, id="a")), "booked"]))
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .store(store)
            .build()
        )
        driver = await agent.start("s")
        driver.submit_input("book me")
        await driver.save()
        worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
        advanced = await worker.run_once()
        assert advanced is not None
        assert isinstance(advanced.step, al.CallQuestion)
        assert advanced.problems == ()
        assert await worker.run_once() is None  # resting on the question: not ready
        # The host holding a driver of its own answers (the question can resume).
        mine = await agent.resume(session_id="s")
        step = await mine.next()
        assert isinstance(step, al.CallQuestion)
        step.answer("7F")
        assert isinstance(await mine.run_until_blocked(), al.Finished)
    assert tool_results(mine) == [("a", "booked 7F (hold 7)")]


async def test_an_approval_and_a_question_in_one_round_are_answered_one_at_a_time() -> None:
    from loop_support import ApproveFsReads, EchoTool

    asking, echo = AskingTool(), EchoTool()
    script = [tool_calls(call("ask_name", {}, id="q"), call("echo", {}, id="e")), "done"]
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(al.ToolRegistry().with_tool(asking).with_tool(echo))
            .permissions(al.permissions.PolicyChain(ApproveFsReads()))
            .task_manager(manager)
            .input([user("go")])
            .build()
        )
        driver = await agent.start("s")
        approval = await driver.next()
        assert isinstance(approval, al.ApprovalRequest)
        assert approval.call_id == "e"
        with pytest.raises(al.InvalidStateError) as raised:
            driver.answer_question_for("question:q:1", al.QuestionAnswer.accept({"name": "x"}))
        assert str(raised.value) == (
            "cannot answer_question_for('question:q:1') in state AWAITING_APPROVAL: no "
            "question of a running call is pending; answer a CallQuestion step returned by "
            "next()"
        )
        assert driver.state is al.DriverState.AWAITING_APPROVAL
        approval.approve()
        question = await driver.next()
        assert isinstance(question, al.CallQuestion)
        assert question.id == "question:q:1"
        question.answer({"name": "Zed"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool_results(driver) == [("q", "hello Zed"), ("e", "pong")]
