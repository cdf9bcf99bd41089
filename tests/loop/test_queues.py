"""Steering and follow-up queues, and the refusal to answer an assistant tail."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from loop_support import ApproveFsReads, BlockingTool, EchoTool, Recorder, tool_texts, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def agent_with(model: al.testing.ScriptedModel, *tools: Any, **options: Any) -> al.Agent:
    registry = al.ToolRegistry()
    for tool in tools:
        registry.add(tool)
    builder = al.Agent.builder().model(model).add_tool_source(registry)
    if (permissions := options.pop("permissions", None)) is not None:
        builder.permissions(permissions)
    if (observer := options.pop("observer", None)) is not None:
        builder.observer(observer)
    if (cancellation := options.pop("cancellation", None)) is not None:
        builder.cancellation(cancellation)
    assert not options
    return builder.build()


def texts(items: Any) -> list[str]:
    return [item.text_content for item in items if item.kind is al.ItemKind.USER]


async def test_steering_skips_the_calls_not_yet_started_and_reaches_the_model() -> None:
    blocking = BlockingTool()
    model = al.testing.ScriptedModel(
        [tool_calls(call("block", {}), call("echo", {}), call("echo", {})), "steered answer"]
    )
    echo = EchoTool()
    driver = await agent_with(model, blocking, echo).start("s")
    driver.submit_input([user("go")])
    async with anyio.create_task_group() as group:

        async def first_step() -> None:
            step = await driver.next()
            assert isinstance(step, al.AfterToolResult)

        group.start_soon(first_step)
        await blocking.entered.wait()
        driver.steer([user("stop, do something else")], label="the operator")
        assert [m.label for m in driver.queued_steering] == ["the operator"]
        blocking.release.set()
    assert echo.inputs == []  # never started
    assert tool_texts(driver.snapshot().transcript) == [
        ("call-1", "released", False),
        ("call-2", "skipped: the operator sent a new message", True),
        ("call-3", "skipped: the operator sent a new message", True),
    ]
    finished = await driver.next()
    assert isinstance(finished, al.Finished)
    assert finished.result.final_items[0].text_content == "steered answer"
    assert driver.queued_steering == ()
    request = model.last_request.transcript
    assert request[-1].text_content == "stop, do something else"
    al.transcript.validate_transcript(driver.snapshot().transcript)
    outcome = al.tools.result_outcome(driver.snapshot().transcript[3].parts[0])  # type: ignore[arg-type]
    assert outcome is al.tools.ResultOutcome.SKIPPED


async def test_steering_while_an_approval_waits_skips_the_question() -> None:
    model = al.testing.ScriptedModel(
        [tool_calls(call("echo", {"value": "x"})), "ok, changed plans"]
    )
    echo = EchoTool()
    driver = await agent_with(model, echo, permissions=ApproveFsReads()).start("s")
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    driver.steer([user("never mind")])
    finished = await driver.next()
    assert isinstance(finished, al.Finished)
    assert echo.inputs == []
    assert tool_texts(driver.snapshot().transcript) == [
        ("call-1", "skipped: the user sent a new message", True)
    ]
    assert texts(model.last_request.transcript) == ["go", "never mind"]


async def test_steering_during_a_text_answer_continues_the_same_turn() -> None:
    gate = anyio.Event()

    async def answer(request: al.model.TurnRequest) -> str:
        if len(request.transcript) == 1:
            await gate.wait()
            return "first answer"
        return "answer to the steering"

    model = al.testing.ScriptedModel(answer)
    recorder = Recorder()
    driver = await agent_with(model, observer=recorder).start("s")
    driver.submit_input([user("go")])
    async with anyio.create_task_group() as group:
        results: list[al.Step] = []

        async def step() -> None:
            results.append(await driver.next())

        group.start_soon(step)
        await anyio.wait_all_tasks_blocked()
        driver.steer([user("also this")])
        gate.set()
    assert isinstance(results[0], al.Finished)
    assert results[0].result.final_items[0].text_content == "answer to the steering"
    assert len(recorder.of(al.observe.TurnStarted)) == 1
    assert [item.text_content for item in driver.snapshot().transcript] == [
        "go",
        "first answer",
        "also this",
        "answer to the steering",
    ]


@pytest.mark.parametrize(
    ("mode", "turn_inputs"),
    [("one-at-a-time", [["a"], ["b"]]), ("all", [["a", "b"]])],
)
async def test_follow_ups_start_new_turns_by_mode(mode: str, turn_inputs: list[list[str]]) -> None:
    model = al.testing.ScriptedModel(["first", "second", "third"])
    agent = agent_with(model)
    driver = await agent.start(al.SessionConfig("s", follow_up_mode=mode))
    driver.submit_input([user("go")])
    driver.follow_up([user("a")])
    driver.follow_up([user("b")])
    seen: list[list[str]] = []
    for _ in turn_inputs:
        assert isinstance(await driver.next(), al.Finished)
    assert isinstance(await driver.next(), al.Finished)
    assert isinstance(await driver.next(), al.AwaitingInput)
    for transcript in model.transcripts()[1:]:
        last_turn: list[str] = []
        for item in reversed(transcript):
            if item.kind is not al.ItemKind.USER:
                break
            last_turn.insert(0, item.text_content)
        seen.append(last_turn)
    assert seen == turn_inputs


@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
async def test_steering_mode_decides_how_many_messages_one_boundary_takes(mode: str) -> None:
    model = al.testing.ScriptedModel([tool_calls(call("echo", {})), "one", "two"])
    driver = await agent_with(model, EchoTool()).start(al.SessionConfig("s", steering_mode=mode))
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.AfterToolResult)
    driver.steer([user("a")])
    driver.steer([user("b")])
    step = await driver.next()
    assert isinstance(step, al.Finished)
    if mode == "all":
        assert step.result.final_items[0].text_content == "one"
        assert texts(model.last_request.transcript)[-2:] == ["a", "b"]
    else:
        # "a" went with the continuation; "b" arrived at the next boundary, so the
        # turn went on with a second call instead of finishing.
        assert step.result.final_items[0].text_content == "two"
        assert texts(model.transcripts()[1])[-1] == "a"
        assert texts(model.transcripts()[2])[-1] == "b"


async def test_queued_messages_survive_a_cancelled_turn() -> None:
    controller = al.CancellationController()
    model = al.testing.ScriptedModel([tool_calls(call("echo", {})), "after", "follow"])
    driver = await agent_with(
        model, EchoTool(), permissions=ApproveFsReads(), cancellation=controller.handle()
    ).start("s")
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    driver.follow_up([user("later")])
    controller.interrupt()
    driver.steer([user("steer")])
    cancelled = await driver.next()
    assert isinstance(cancelled, al.Finished)
    assert cancelled.result.finish_reason is al.FinishReason.CANCELLED
    assert [m.items[0].text_content for m in driver.queued_steering] == ["steer"]
    assert [m.items[0].text_content for m in driver.queued_follow_ups] == ["later"]
    assert isinstance(await driver.next(), al.AwaitingInput)  # nothing starts by itself
    driver.submit_input([user("again")])
    assert isinstance(await driver.next(), al.Finished)
    assert texts(model.last_request.transcript)[-2:] == ["again", "steer"]
    assert driver.queued_steering == ()
    assert isinstance(await driver.next(), al.Finished)  # the follow-up's turn
    assert texts(model.last_request.transcript)[-1] == "later"
    al.transcript.validate_transcript(driver.snapshot().transcript)


async def test_queues_are_checkpointed_and_restored() -> None:
    model = al.testing.ScriptedModel([tool_calls(call("echo", {})), "one", "two"])
    driver = await agent_with(model, EchoTool()).start("s")
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.AfterToolResult)
    driver.steer([user("s1")], label="ops")
    driver.follow_up([user("f1")])
    restored = await agent_with(al.testing.ScriptedModel(["one", "two"]), EchoTool()).resume(
        driver.checkpoint()
    )
    assert [(m.label, m.items[0].text_content) for m in restored.queued_steering] == [("ops", "s1")]
    assert [m.items[0].text_content for m in restored.queued_follow_ups] == ["f1"]
    assert restored.clear_queues() == (*driver.queued_steering, *driver.queued_follow_ups)
    assert restored.queued_steering == restored.queued_follow_ups == ()


async def test_bad_queue_input_is_refused_and_nothing_is_queued() -> None:
    driver = await agent_with(al.testing.ScriptedModel([])).start("s")
    tool_item = al.Item(al.ItemKind.TOOL, (al.ToolResultPart("c", "x"),))
    cases: list[tuple[Any, dict[str, Any], str]] = [
        ([], {}, "steer expects at least one Item, got none"),
        (user("x"), {}, "steer expects a sequence of Items, got a single Item"),
        (["text"], {}, "steer expects Items; element 0 is str"),
        ([tool_item], {}, "steer: element 0 holds a tool_call or tool_result part"),
        ([user("x")], {"label": ""}, "steer: label must be a non-empty str"),
    ]
    for items, options, message in cases:
        with pytest.raises(al.InvalidInputError, match=message):
            driver.steer(items, **options)
    with pytest.raises(al.InvalidInputError, match="follow_up expects at least one Item"):
        driver.follow_up([])
    assert driver.queued_steering == driver.queued_follow_ups == ()

    failing = al.testing.ScriptedModel([al.testing.fail(RuntimeError("boom"))])
    broken = await agent_with(failing).start("s")
    broken.submit_input([user("go")])
    with pytest.raises(RuntimeError):
        await broken.next()
    with pytest.raises(al.InvalidStateError, match="cannot steer in state FAILED"):
        broken.steer([user("x")])


async def test_an_assistant_tail_is_never_sent_to_the_model() -> None:
    model = al.testing.ScriptedModel([])
    recorder = Recorder()
    driver = await agent_with(model, observer=recorder).start("s")
    driver.submit_input([al.Item.text(al.ItemKind.ASSISTANT, "I already said this")])
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    reason = (
        "the transcript ends with an item of kind 'assistant', so there is nothing for the model "
        "to answer; submit input first"
    )
    assert step.result.metadata == {"agentloop.no_model_call": reason}
    assert [w.message for w in recorder.of(al.observe.LoopWarning)] == [
        f"turn-1: no model call: {reason}"
    ]
    assert model.requests == []
