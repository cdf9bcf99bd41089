"""``run_sync()``, ``submit_input("text")`` and ``EventStream.text_deltas()``."""

from __future__ import annotations

import pytest
from host_support import Add

import agentloop as al
import agentloop.host
import agentloop.model
import agentloop.testing
import agentloop.tools
from agentloop.testing import Reply, call, chunked, tool_calls

pytestmark = pytest.mark.anyio


def _agent(*replies: Reply | str) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(list(replies)))
        .add_tool_source(al.ToolRegistry().with_tool(Add()))
        .build()
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_sync_runs_a_turn_to_its_end(backend: str) -> None:
    agent = _agent(tool_calls(call("add", {"a": 2, "b": 40})), "2 + 40 = 42")
    result = al.run_sync(agent, "What is 2 + 40?", backend=backend)
    assert result.stop_reason is al.RunStopReason.FINISHED
    assert result.final_text == "2 + 40 = 42"
    assert [item.kind for item in result.transcript] == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        al.ItemKind.TOOL,
        al.ItemKind.ASSISTANT,
    ]
    assert result.transcript[2].parts[0].output == "42"  # type: ignore[union-attr]


async def test_run_sync_refuses_inside_a_running_event_loop() -> None:
    agent = _agent("never used")
    with pytest.raises(al.InvalidStateError) as caught:
        al.run_sync(agent, "Hi")
    assert str(caught.value).startswith("run_sync: cannot start an event loop inside the running ")
    assert str(caught.value).endswith(
        " loop; in async code (a notebook cell, an async function) call "
        "`await agentloop.run(agent, prompt)` instead"
    )
    assert agent.model.requests == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ("not an agent", "Hi"),
            "run_sync: expected an Agent as the first argument, got str "
            "(build one with Agent.builder()...build())",
        ),
        (
            (None, "Hi"),
            "run_sync: expected an Agent as the first argument, got NoneType "
            "(build one with Agent.builder()...build())",
        ),
        (
            ("agent", ""),
            "run_sync: the prompt is an empty string; give some text or a list of Items",
        ),
        (("agent", [1]), "run_sync: prompt element 0 is int, not an Item"),
        (("agent", []), "run_sync: the prompt is an empty list; give at least one Item"),
    ],
)
def test_run_sync_refuses_bad_arguments(arguments: tuple[object, object], message: str) -> None:
    agent = _agent("never used")
    first = agent if arguments[0] == "agent" else arguments[0]
    with pytest.raises(al.InvalidInputError) as caught:
        al.run_sync(first, arguments[1])  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert agent.model.requests == []  # type: ignore[attr-defined]


def test_run_sync_refuses_an_unknown_backend() -> None:
    with pytest.raises(al.InvalidInputError) as caught:
        al.run_sync(_agent("x"), "Hi", backend="curio")
    assert str(caught.value) == "run_sync: backend must be 'asyncio' or 'trio', got 'curio'"


async def test_submit_input_takes_a_string_as_one_user_message() -> None:
    driver = await _agent("Hello!").start(al.SessionConfig("s"))
    driver.submit_input("Hi there")
    assert driver.snapshot().pending_input == (al.Item.text(al.ItemKind.USER, "Hi there"),)
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert [(item.kind, item.text_content) for item in driver.snapshot().transcript] == [
        (al.ItemKind.USER, "Hi there"),
        (al.ItemKind.ASSISTANT, "Hello!"),
    ]


async def test_awaiting_input_submit_takes_a_string() -> None:
    driver = await _agent("Hello!").start(al.SessionConfig("s"))
    step = await driver.next()
    assert isinstance(step, al.AwaitingInput)
    step.submit("Hi")
    assert driver.snapshot().pending_input == (al.Item.text(al.ItemKind.USER, "Hi"),)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "submit_input: the message is an empty string; give some text or a list of Items"),
        (42, "submit_input expects a str (one user message) or a sequence of Items, got int"),
        (
            None,
            "submit_input expects a str (one user message) or a sequence of Items, got NoneType",
        ),
        (b"hi", "submit_input expects a str (one user message) or a sequence of Items, got bytes"),
        (["hi"], "submit_input expects Items; element 0 is str"),
        (
            al.Item.text(al.ItemKind.USER, "hi"),
            "submit_input expects a sequence of Items, got a single Item; wrap it in a list",
        ),
    ],
)
async def test_submit_input_refuses_what_is_not_a_message(value: object, message: str) -> None:
    driver = await _agent("Hello!").start(al.SessionConfig("s"))
    with pytest.raises(al.InvalidInputError) as caught:
        driver.submit_input(value)  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert driver.snapshot().pending_input == ()
    assert driver.state is al.DriverState.IDLE


def _reasoned_answer() -> Reply:
    text = al.TextPart("It is 42.")
    thought = al.ReasoningPart("add them")
    return Reply.raw(
        [
            al.BeginPart("r-0", al.PartKind.REASONING),
            al.AppendText("r-0", "add them"),
            al.CommitPart("r-0", thought),
            al.BeginPart("t-0", al.PartKind.TEXT),
            al.AppendText("t-0", "It is "),
            al.AppendText("t-0", "42."),
            al.CommitPart("t-0", text),
            al.model.ModelTurnResult(
                al.FinishReason.COMPLETED, (al.Item(al.ItemKind.ASSISTANT, (thought, text)),)
            ),
        ]
    )


def _call_with_streamed_arguments() -> Reply:
    part = al.ToolCallPart("call-1", "add", {"a": 2, "b": 40})
    return Reply.raw(
        [
            al.BeginPart("c-0", al.PartKind.TOOL_CALL),
            al.AppendText("c-0", '{"a": 2, "b": 40}'),
            al.CommitPart("c-0", part),
            part,
            al.model.ModelTurnResult(
                al.FinishReason.TOOL_CALL, (al.Item(al.ItemKind.ASSISTANT, (part,)),)
            ),
        ]
    )


async def test_text_deltas_yield_only_the_answers_text() -> None:
    agent = _agent(_call_with_streamed_arguments(), _reasoned_answer())
    async with al.stream(agent, "What is 2 + 40?") as events:
        texts = [text async for text in events.text_deltas()]
        result = await events.result()
    assert texts == ["It is ", "42."]
    assert result.final_text == "It is 42."
    assert result.stop_reason is al.RunStopReason.FINISHED


async def test_text_deltas_across_tool_rounds_in_order() -> None:
    agent = _agent(
        tool_calls(call("add", {"a": 1, "b": 1}), text="Let me add. "),
        chunked("1 + 1 ", "= 2"),
    )
    async with al.stream(agent, "1 + 1?") as events:
        texts = [text async for text in events.text_deltas()]
    assert texts == ["1 + 1 ", "= 2"]  # tool_calls' text is not streamed, only committed


def test_run_sync_is_exported_from_both_namespaces() -> None:
    assert agentloop.host.run_sync is al.run_sync
    assert "run_sync" in al.__all__
    assert "run_sync" in agentloop.host.__all__
