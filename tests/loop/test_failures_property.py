"""Property: random model failures injected into random sessions never leave an unusable
driver. Every failed turn ends with ERROR and a valid transcript, the host's recovery
(retry, new input, restore then retry, continue_turn) works, and the session finishes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import ApproveFsReads, EchoTool, user

import agentloop as al
import agentloop.model
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, fail, tool_calls

pytestmark = pytest.mark.anyio

BEHAVIOURS = [
    "text",
    "tools",
    "two_tools",
    "duplicate_ids",
    "fail_retryable",
    "fail_overflow",
    "fail_mid_stream",
    "protocol",
    "empty",
]
RECOVERIES = ["retry", "new_input", "restore_retry", "continue"]
FAILING = {"fail_retryable", "fail_overflow", "fail_mid_stream", "protocol", "empty"}


def reply_for(behaviour: str, number: int) -> Reply | str:
    if behaviour == "text":
        return f"answer {number}"
    if behaviour == "tools":
        return tool_calls(call("echo", {"value": f"v{number}"}))
    if behaviour == "two_tools":
        return tool_calls(call("echo", {"value": "a"}), call("echo", {"value": "b"}))
    if behaviour == "duplicate_ids":
        return tool_calls(call("echo", id=f"dup-{number}"), call("echo", id=f"dup-{number}"))
    if behaviour == "fail_retryable":
        return fail(al.ProviderError("503", status=503, retryable=True))
    if behaviour == "fail_overflow":
        return fail(al.ProviderError("too long", kind=al.ProviderErrorKind.CONTEXT_OVERFLOW))
    if behaviour == "fail_mid_stream":
        return fail(
            al.ProviderError("cut", retryable=True),
            al.BeginPart("t", al.PartKind.TEXT),
            al.AppendText("t", "partial"),
        )
    if behaviour == "protocol":
        bad = al.model.ModelTurnResult(al.FinishReason.COMPLETED, (user("from the model"),))
        return Reply.raw([bad])
    assert behaviour == "empty"
    return ""


class Plan:
    """The model's behaviour per call, in order; plain answers once the plan is used up."""

    def __init__(self, behaviours: list[str]) -> None:
        self._behaviours: Iterator[str] = iter(behaviours)
        self.failures = 0

    def answer(self, request: al.model.TurnRequest) -> Reply | str:
        number = len(request.transcript)
        behaviour = next(self._behaviours, "text")
        if behaviour in FAILING:
            self.failures += 1
        return reply_for(behaviour, number)


def make_agent(model: al.testing.ScriptedModel, approvals: bool) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .input([user("start")])
    )
    if approvals:
        builder = builder.permissions(ApproveFsReads())
    return builder.build()


def check_usable(driver: al.LoopDriver) -> None:
    assert driver.state is not al.DriverState.FAILED
    if driver.state is al.DriverState.IDLE:
        al.transcript.validate_transcript(driver.snapshot().transcript)
    json.dumps(driver.checkpoint())  # checkpointable between any two steps


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[str], list[str], list[bool], bool]:
    behaviours = draw(st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=12))
    recoveries = draw(st.lists(st.sampled_from(RECOVERIES), min_size=1, max_size=6))
    answers = draw(st.lists(st.booleans(), min_size=1, max_size=4))
    approvals = draw(st.booleans())
    return behaviours, recoveries, answers, approvals


async def play(
    behaviours: list[str], recoveries: list[str], answers: list[bool], approvals: bool
) -> None:
    plan = Plan(behaviours)
    model = al.testing.ScriptedModel(plan.answer)
    agent = make_agent(model, approvals)
    driver = await agent.start("s")
    recovery = iter(recoveries * 20)
    approve = iter(answers * 50)
    errors = 0
    step: al.Step = await driver.next()
    with anyio.fail_after(20):
        for _ in range(80):
            check_usable(driver)
            if isinstance(step, al.ApprovalRequest):
                if next(approve):
                    step.approve()
                else:
                    step.deny("no")
                step = await driver.next()
            elif isinstance(step, al.AfterToolResult):
                step = await driver.next()
            elif isinstance(step, al.AwaitingInput):
                step.submit([user("more")])
                step = await driver.next()
            elif step.result.finish_reason is al.FinishReason.ERROR:
                errors += 1
                error = step.result.error
                assert isinstance(error, al.ProviderError)
                assert step.result.metadata["agentloop.error_kind"] == error.kind.value
                assert driver.retry_point is not None
                tail = driver.snapshot().transcript[-1].kind
                assert tail in (al.ItemKind.USER, al.ItemKind.TOOL)
                action = next(recovery)
                if action == "retry":
                    step = await driver.retry()
                elif action == "new_input":
                    driver.submit_input([user("try something else")])
                    step = await driver.next()
                elif action == "restore_retry":
                    document = json.loads(json.dumps(driver.checkpoint()))
                    driver = await make_agent(model, approvals).resume(document)
                    assert driver.retry_point is not None
                    assert driver.retry_point.error.kind is error.kind
                    step = await driver.retry()
                else:
                    step = await driver.continue_turn()
            else:
                assert step.result.finish_reason is al.FinishReason.COMPLETED
                break
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    assert errors == plan.failures
    check_usable(driver)
    model.assert_requests_valid()
    # The session stays usable for another turn.
    driver.submit_input([user("one more")])
    final = await driver.run_until_blocked()
    assert not isinstance(final, al.AwaitingInput)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(session=sessions())
async def test_random_failures_never_leave_an_unusable_driver(
    session: tuple[list[str], list[str], list[bool], bool],
) -> None:
    await play(*session)
