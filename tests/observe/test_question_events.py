"""Observer events for running calls' questions: ``QuestionAsked`` when a ``CallQuestion``
surfaces, ``QuestionAnswered`` (accept / decline / cancel) when the host answers, the same
through ``stream``'s event tags, and OpenTelemetry span events on the asking call's span."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from otel_support import pipeline

import agentloop as al
import agentloop.observe
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.loop._converter import unstructure
from agentloop.observe import OtelObserver, QuestionAnswered, QuestionAsked
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class AskName:
    spec = al.ToolSpec("ask_name", "Ask for a name.", {"type": "object"})
    asks_host = True

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        answer = await ctx.ask(al.tools.Question("elicitation", "Your name?", SCHEMA))
        return answer.action.value


class Recorder:
    def __init__(self) -> None:
        self.events: list[al.observe.AgentEvent] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events.append(event)


async def ask_and_answer(observer: Any, respond: Callable[[al.CallQuestion], None]) -> None:
    model = al.testing.ScriptedModel([tool_calls(call("ask_name", {}, id="c1")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        builder = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(al.ToolRegistry().with_tool(AskName()))
            .task_manager(manager)
            .observer(observer)
        )
        if hasattr(observer, "on_item_appended"):  # OtelObserver sees the transcript too
            builder = builder.transcript_observer(observer)
        agent = builder.build()
        driver = await agent.start("s1")
        driver.submit_input("go")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        respond(step)
        assert isinstance(await driver.run_until_blocked(), al.Finished)


@pytest.mark.parametrize(
    ("respond", "action"),
    [
        (lambda step: step.answer({"name": "Ada"}), "accept"),
        (lambda step: step.decline(), "decline"),
        (lambda step: step.cancel(), "cancel"),
    ],
)
async def test_asked_and_answered_events(
    respond: Callable[[al.CallQuestion], None], action: str
) -> None:
    recorder = Recorder()
    await ask_and_answer(recorder, respond)
    found = [e for e in recorder.events if isinstance(e, QuestionAsked | QuestionAnswered)]
    assert found == [
        QuestionAsked("c1", "ask_name", "question:c1:1", "elicitation", "Your name?"),
        QuestionAnswered("c1", "question:c1:1", action),
    ]
    names = [type(e).__name__ for e in recorder.events]
    # Asked after the call started, answered before its result.
    assert names.index("ToolExecutionStarted") < names.index("QuestionAsked")
    assert names.index("QuestionAnswered") < names.index("ToolResultReceived")
    assert [unstructure(e)["type"] for e in found] == ["question_asked", "question_answered"]


async def test_a_wrong_answer_emits_nothing() -> None:
    recorder = Recorder()

    def respond(step: al.CallQuestion) -> None:
        with pytest.raises(al.InvalidInputError):
            step.answer({"name": 3})
        assert not any(isinstance(e, QuestionAnswered) for e in recorder.events)
        step.decline()

    await ask_and_answer(recorder, respond)
    answered = [e for e in recorder.events if isinstance(e, QuestionAnswered)]
    assert answered == [QuestionAnswered("c1", "question:c1:1", "decline")]


@pytest.mark.parametrize("capture", [False, True])
async def test_span_events_on_the_asking_calls_span(capture: bool) -> None:
    provider, exporter = pipeline()
    observer = OtelObserver(provider, agent_name="helper", capture_content=capture)
    await ask_and_answer(observer, lambda step: step.answer({"name": "Ada"}))
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool ask_name"]
    asked: dict[str, Any] = {
        "agentloop.question.id": "question:c1:1",
        "agentloop.question.kind": "elicitation",
    }
    if capture:
        asked["agentloop.question.message"] = "Your name?"
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert [e for e in events if e[0].startswith("agentloop.question")] == [
        ("agentloop.question.asked", asked),
        (
            "agentloop.question.answered",
            {"agentloop.question.id": "question:c1:1", "agentloop.question.action": "accept"},
        ),
    ]


async def test_a_withdrawn_question_is_a_span_event_on_the_calls_span() -> None:
    stopped = anyio.Event()
    scopes: list[anyio.CancelScope] = []

    class GiveUp:
        spec = al.ToolSpec("give_up", "Asks, then stops waiting.", {"type": "object"})
        asks_host = True

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await ctx.ask(al.tools.Question("elicitation", "Your name?", SCHEMA))
            stopped.set()
            return "gave up"

    provider, exporter = pipeline()
    observer = OtelObserver(provider, agent_name="helper")
    recorder = Recorder()
    model = al.testing.ScriptedModel([tool_calls(call("give_up", {}, id="c1")), "done"])
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(al.ToolRegistry().with_tool(GiveUp()))
            .task_manager(manager)
            .observer(observer)
            .observer(recorder)
            .transcript_observer(observer)
            .build()
        )
        driver = await agent.start("s1")
        driver.submit_input("go")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        scopes[0].cancel()
        await stopped.wait()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    found = [e for e in recorder.events if isinstance(e, QuestionAsked | QuestionAnswered)]
    assert found == [
        QuestionAsked("c1", "give_up", "question:c1:1", "elicitation", "Your name?"),
        QuestionAnswered("c1", "question:c1:1", "withdrawn"),
    ]
    names = [type(e).__name__ for e in recorder.events]
    assert names.index("QuestionAnswered") < names.index("ToolResultReceived")
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool give_up"]
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert [e for e in events if e[0] == "agentloop.question.answered"] == [
        (
            "agentloop.question.answered",
            {"agentloop.question.id": "question:c1:1", "agentloop.question.action": "withdrawn"},
        )
    ]
