"""An agent as a tool of another: approvals surface at the top with a path, usage rolls up,
cancellation closes every transcript."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from agents_support import (
    EchoTool,
    assert_answered_once,
    child_agent,
    echo_then,
    results,
    user,
)
from structlog.testing import capture_logs

import agentloop as al
import agentloop.agents
import agentloop.tasks
import agentloop.testing
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def tree(
    child_script: list[Any],
    parent_script: list[Any] | None = None,
    *,
    grandchild_script: list[Any] | None = None,
    limits: al.LoopLimits | None = None,
    cancellation: al.CancellationHandle | None = None,
) -> AsyncIterator[tuple[al.LoopDriver, list[al.agents.ChildRun], EchoTool]]:
    """A parent whose ``helper`` tool runs a child (whose ``inner`` tool runs a grandchild)."""
    runs: list[al.agents.ChildRun] = []
    echo = EchoTool()
    async with al.tasks.AsyncTaskManager() as manager:
        tools: list[Any] = [echo]
        if grandchild_script is not None:
            grandchild = child_agent(grandchild_script, echo, manager=manager)
            tools.append(grandchild.as_tool("inner", "An inner helper.", on_run=runs.append))
        child = child_agent(child_script, *tools, manager=manager)
        helper = child.as_tool("helper", "A helper agent.", on_run=runs.append)
        script = parent_script or [
            tool_calls(call("helper", {"input": "do it"}, id="p-1")),
            "parent done",
        ]
        builder = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(script))
            .add_tool_source(al.ToolRegistry().with_tool(helper))
            .task_manager(manager)
            .input([user("go")])
        )
        if cancellation is not None:
            builder = builder.cancellation(cancellation)
        config = al.SessionConfig("top", limits=limits) if limits else al.SessionConfig("top")
        yield await builder.build().start(config), runs, echo


async def test_a_child_approval_surfaces_at_the_top_with_its_path() -> None:
    async with tree(echo_then("child done")) as (driver, runs, echo):
        step = await driver.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        assert isinstance(step, al.ApprovalRequest)
        assert (step.path, step.call_id, step.tool_name, step.input) == (
            ("helper:p-1",),
            "c-1",
            "echo",
            {"value": "x"},
        )
        assert (step.request_kind, step.summary, step.turn_id) == (
            "filesystem.read",
            "Read /tmp/echo",
            "turn-1",
        )
        assert step.is_blocking
        assert driver.state is al.DriverState.AWAITING_ANSWER
        again = await driver.next()  # not answered: shown again, equal
        assert again == step
        again.approve()
        finished = await driver.run_until_blocked()
        assert isinstance(finished, al.Finished)
    assert echo.inputs == [{"value": "x"}]
    assert results(driver.snapshot().transcript) == [("p-1", "child done", False)]
    [run] = runs
    assert (run.call_id, run.session_id) == ("p-1", "top/p-1")
    assert results(run.transcript) == [("c-1", "x", False)]
    assert run.result is not None
    assert run.result.finish_reason is al.FinishReason.COMPLETED
    assert_answered_once(run.transcript)


@pytest.mark.parametrize(
    ("answer", "child_result", "inputs"),
    [
        (lambda step: step.approve_with({"value": "edited"}), ("c-1", "edited", False),
         [{"value": "edited"}]),
        (lambda step: step.deny("not today"), ("c-1", "not today", True), []),
        (lambda step: step.deny(), ("c-1", "approval denied", True), []),
    ],
)  # fmt: skip
async def test_edit_and_deny_reach_the_child(
    answer: Any, child_result: tuple[str, str, bool], inputs: list[Any]
) -> None:
    async with tree(echo_then("child done")) as (driver, runs, echo):
        step = await driver.next()
        answer(step)
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert echo.inputs == inputs
    assert results(runs[0].transcript) == [child_result]


async def test_the_driver_answers_a_child_approval_by_its_call_id() -> None:
    async with tree(echo_then("child done")) as (driver, runs, _echo):
        step = await driver.next()
        with pytest.raises(al.InvalidStateError, match="AWAITING_ANSWER"):
            driver.answer_approval_for("p-1", al.ApprovalAnswer.approve())  # the parent's call
        assert driver.state is al.DriverState.AWAITING_ANSWER
        driver.answer_approval_for(step.call_id, al.ApprovalAnswer.deny("by id"))
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert results(runs[0].transcript) == [("c-1", "by id", True)]


async def test_a_grandchild_approval_names_both_calls() -> None:
    child_script = [tool_calls(call("inner", {"input": "deeper"}, id="c-1")), "child done"]
    async with tree(child_script, grandchild_script=echo_then("grand done", "g-1")) as (
        driver,
        runs,
        echo,
    ):
        step = await driver.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        assert (step.path, step.call_id, step.tool_name) == (
            ("helper:p-1", "inner:c-1"),
            "g-1",
            "echo",
        )
        step.approve_with({"value": "deep edit"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert echo.inputs == [{"value": "deep edit"}]
    grand, child = runs
    assert (grand.session_id, child.session_id) == ("top/p-1/c-1", "top/p-1")
    assert results(grand.transcript) == [("g-1", "deep edit", False)]
    assert results(child.transcript) == [("c-1", "grand done", False)]
    for run in runs:
        assert_answered_once(run.transcript)


async def test_parallel_children_each_surface_their_approval() -> None:
    parent_script = [
        tool_calls(
            call("helper", {"input": "one"}, id="p-1"), call("helper", {"input": "two"}, id="p-2")
        ),
        "parent done",
    ]

    def child_script(request: al.model.TurnRequest) -> Any:
        asked = request.transcript[0].text_content
        if len(request.transcript) == 1:
            return tool_calls(call("echo", {"value": asked}, id="c-1"))
        return f"child {asked} done"

    async with tree(child_script, parent_script) as (driver, runs, _echo):  # type: ignore[arg-type]
        seen = []
        while not isinstance(step := await driver.next(), al.Finished):
            if isinstance(step, al.agents.ChildApprovalRequest):
                seen.append((step.path, step.input))
                step.approve()
        assert sorted(seen) == [
            (("helper:p-1",), {"value": "one"}),
            (("helper:p-2",), {"value": "two"}),
        ]
    assert results(driver.snapshot().transcript) == [
        ("p-1", "child one done", False),
        ("p-2", "child two done", False),
    ]
    assert sorted(run.session_id for run in runs) == ["top/p-1", "top/p-2"]


async def test_run_answers_child_approvals_through_its_approver() -> None:
    asked: list[tuple[str, ...]] = []

    def approve(request: al.ApprovalRequest) -> bool:
        asked.append(request.path)
        return True

    async with al.tasks.AsyncTaskManager() as manager:
        child = child_agent(echo_then("child done"), manager=manager)
        parent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(
                [tool_calls(call("helper", {"input": "go"}, id="p-1")), "parent done"]))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .build()
        )  # fmt: skip
        result = await al.run(parent, "start", approve=approve)
    assert asked == [("helper:p-1",)]
    assert result.stop_reason is al.RunStopReason.FINISHED
    assert result.final_text == "parent done"


async def test_usage_rolls_up_and_counts_against_the_parents_limits() -> None:
    child_script = [
        tool_calls(call("echo", {"value": "x"}, id="c-1"), usage=al.Usage(10, 5)),
        al.testing.text("child done", usage=al.Usage(20, 5, cost=0.5)),
    ]
    parent_script = [
        tool_calls(call("helper", {"input": "go"}, id="p-1"), usage=al.Usage(1, 1)),
        "never asked",
    ]
    limits = al.LoopLimits(max_total_tokens_per_turn=30)
    async with tree(child_script, parent_script, limits=limits) as (driver, runs, _echo):
        step = await driver.next()
        step.approve()
        finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert finished.result.finish_reason is al.FinishReason.LIMIT_REACHED
    assert finished.result.metadata["agentloop.limit"] == "max_total_tokens_per_turn"
    assert runs[0].usage == al.Usage(30, 10, cost=0.5)
    assert driver.usage == al.Usage(31, 11, cost=0.5)
    [result] = [p for item in driver.snapshot().transcript for p in item.tool_results()]
    assert result.metadata == {
        "agent.session_id": "top/p-1",
        "agent.usage": {
            "input_tokens": 30, "output_tokens": 10, "reasoning_tokens": 0,
            "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.5,
        },
    }  # fmt: skip


async def test_cancelling_the_parent_closes_the_waiting_child() -> None:
    controller = al.CancellationController()
    async with tree(echo_then("never"), cancellation=controller.handle()) as (
        driver,
        runs,
        echo,
    ):
        step = await driver.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        controller.interrupt()
        finished = await driver.next()
        assert isinstance(finished, al.Finished)
        assert finished.result.finish_reason is al.FinishReason.CANCELLED
        with anyio.fail_after(5):
            while not runs:
                await anyio.lowlevel.checkpoint()
    assert echo.inputs == []
    assert_answered_once(driver.snapshot().transcript)
    [run] = runs
    assert_answered_once(run.transcript)
    assert [(c, e) for c, _, e in results(run.transcript)] == [("c-1", True)]
    assert run.result is not None
    assert run.result.finish_reason is al.FinishReason.CANCELLED


async def test_cancelling_the_host_task_closes_a_running_child() -> None:
    gate = anyio.Event()

    async def slow(request: al.model.TurnRequest) -> Any:
        gate.set()
        await anyio.sleep_forever()

    async with tree(slow) as (driver, runs, _echo):  # type: ignore[arg-type]
        async with anyio.create_task_group() as group:
            group.start_soon(driver.next)
            await gate.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(5):
            while not runs:
                await anyio.lowlevel.checkpoint()
    assert_answered_once(driver.snapshot().transcript)
    assert results(driver.snapshot().transcript)[0][2] is True
    assert_answered_once(runs[0].transcript)


async def test_without_a_task_manager_the_childs_approval_is_denied_saying_why() -> None:
    runs: list[al.agents.ChildRun] = []
    child = child_agent(echo_then("child done"))
    parent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(
            [tool_calls(call("helper", {"input": "go"}, id="p-1")), "parent done"]))
        .add_tool_source(
            al.ToolRegistry().with_tool(child.as_tool("helper", "H", on_run=runs.append)))
        .build()
    )  # fmt: skip
    result = await al.run(parent, "start")
    assert result.final_text == "parent done"
    [(call_id, output, is_error)] = results(runs[0].transcript)
    assert (call_id, is_error) == ("c-1", True)
    assert output.startswith("no host can answer this approval: cannot ask the host from call p-1")
    assert "AsyncTaskManager" in output


async def test_a_wrong_answer_is_refused_and_changes_nothing() -> None:
    async with tree(echo_then("child done")) as (driver, runs, _echo):
        step = await driver.next()
        with pytest.raises(al.InvalidInputError, match="does not match the question's schema"):
            driver.answer_question_for(step.question_id, al.QuestionAnswer.accept({"kind": "x"}))
        assert driver.state is al.DriverState.AWAITING_ANSWER
        assert await driver.next() == step
        step.approve()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert results(runs[0].transcript) == [("c-1", "x", False)]


async def test_a_child_question_surfaces_with_its_path() -> None:
    class Ask:
        spec = al.ToolSpec("ask", "Ask the user.", {"type": "object"})
        asks_host = True

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
            answer = await ctx.ask(al.tools.Question("elicitation", "A number?", schema))
            return f"got {answer.content['n']}"

    async with al.tasks.AsyncTaskManager() as manager:
        child = child_agent([tool_calls(call("ask", {}, id="c-1")), "child done"], Ask(),
                            manager=manager)  # fmt: skip
        parent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(
                [tool_calls(call("helper", {"input": "go"}, id="p-1")), "parent done"]))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .input([user("go")])
            .build()
        )  # fmt: skip
        driver = await parent.start("top")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert (step.path, step.call_id, step.tool_name, step.question.message) == (
            ("helper:p-1",),
            "c-1",
            "ask",
            "A number?",
        )
        with pytest.raises(al.InvalidInputError, match="schema"):
            step.answer({"n": "seven"})
        step.answer({"n": 7})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert results(driver.snapshot().transcript) == [("p-1", "child done", False)]


async def test_a_failed_child_is_an_error_result() -> None:
    child_script = [
        al.testing.fail(al.ProviderError("boom", kind=al.ProviderErrorKind.INVALID_REQUEST))
    ]
    async with tree(child_script) as (driver, runs, _echo):
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    [(call_id, output, is_error)] = results(driver.snapshot().transcript)
    assert (call_id, is_error) == ("p-1", True)
    assert output.startswith("agent helper ended (error): ")
    assert_answered_once(runs[0].transcript)


async def test_as_tool_refuses_bad_limits() -> None:
    child = child_agent(["x"])
    with pytest.raises(al.InvalidInputError, match="limits must be a LoopLimits or None, got 3"):
        child.as_tool("helper", "Helps.", limits=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reported", "usage"),
    [
        ({"input_tokens": 5, "output_tokens": 2, "cost": 1}, al.Usage(5, 2, cost=1.0)),
        ({"input_tokens": 3}, al.Usage(3, 0)),
        ({"input_tokens": -1}, None),
        ({"input_tokens": True}, None),
        ({"input_tokens": 1, "cost": "free"}, None),
        ("many", None),
    ],
)
async def test_any_result_reporting_usage_counts_and_bad_reports_are_ignored(
    reported: Any, usage: al.Usage | None
) -> None:
    class Reporter:
        spec = al.ToolSpec("report", "Reports usage.", {"type": "object"})

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> al.ToolOutput:
            return al.ToolOutput("ok", metadata={al.agents.CHILD_USAGE_KEY: reported})

    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([tool_calls(call("report", {}, id="r")), "done"]))
        .add_tool_source(al.ToolRegistry().with_tool(Reporter()))
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert driver.usage == usage
    assert finished.result.usage == usage


async def test_a_child_question_withdrawn_while_the_parents_host_holds_it() -> None:
    stopped = anyio.Event()
    scopes: list[anyio.CancelScope] = []

    class GiveUp:
        spec = al.ToolSpec("ask", "Ask the user.", {"type": "object"})
        asks_host = True

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await ctx.ask(al.tools.Question("elicitation", "A number?"))
                return "answered"
            stopped.set()
            return "gave up"

    async with al.tasks.AsyncTaskManager() as manager:
        child = child_agent([tool_calls(call("ask", {}, id="c-1")), "child done"], GiveUp(),
                            manager=manager)  # fmt: skip
        parent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(
                [tool_calls(call("helper", {"input": "go"}, id="p-1")), "parent done"]))
            .add_tool_source(al.ToolRegistry().with_tool(child.as_tool("helper", "Helps.")))
            .task_manager(manager)
            .input([user("go")])
            .build()
        )  # fmt: skip
        driver = await parent.start("top")
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert (step.path, step.call_id) == (("helper:p-1",), "c-1")
        scopes[0].cancel()
        await stopped.wait()
        with capture_logs() as logs:
            step.answer()  # the parent's call still waits: it takes the answer
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert [e["event"] for e in logs if e["event"].startswith("answer not handed")] == [
        "answer not handed over: the question was withdrawn"
    ]
    assert results(driver.snapshot().transcript) == [("p-1", "child done", False)]
