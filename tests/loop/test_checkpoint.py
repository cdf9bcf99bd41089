"""Checkpoint and resume: exact continuation, refusals, fail-closed parsing, in-doubt calls."""

from __future__ import annotations

import copy
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import ApproveFsReads, BlockingTool, EchoTool, Recorder, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.store import MemorySessionStore
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio


def planned_model(rounds: int, calls_per_round: int = 2) -> al.testing.ScriptedModel:
    """Decides from the transcript alone, so a restored run sees the same replies."""

    def answer(request: al.model.TurnRequest) -> Reply | str:
        items = list(request.transcript)
        done = sum(1 for item in items if item.tool_calls())
        turn = sum(1 for item in items if item.kind is al.ItemKind.USER)
        if items[-1].kind is al.ItemKind.USER or (
            items[-1].kind is al.ItemKind.TOOL and done % rounds != 0
        ):
            base = len(items)
            return tool_calls(
                *(
                    call("echo", {"value": f"t{turn}r{done}c{n}"}, id=f"call-{base}-{n}")
                    for n in range(calls_per_round)
                )
            )
        return f"turn {turn} done after {done} rounds"

    return al.testing.ScriptedModel(answer)


def make_agent(model: al.testing.ScriptedModel, **extra: Any) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(extra.pop("permissions", ApproveFsReads()))
    )
    for observer in extra.pop("observers", ()):
        builder.observer(observer)
    if (store := extra.pop("store", None)) is not None:
        builder.store(store)
    assert not extra
    return builder.build()


def host_action(step: al.Step, position: int) -> None:
    """A deterministic host: approve, deny every third, answer input twice."""
    if isinstance(step, al.ApprovalRequest):
        if position % 3 == 2:
            step.deny(f"no {position}")
        else:
            step.approve()
    elif isinstance(step, al.AwaitingInput) and position < 40:
        step.submit([user(f"ask {position}")])


def comparable(value: Any) -> Any:
    """A step or transcript as JSON, without wall-clock stamps."""
    if isinstance(value, list | tuple):
        return [comparable(item) for item in value]
    data = al.unstructure(value)
    return _strip_times(data)


_TIMES = frozenset({"created_at", "started_at", "finished_at", "duration"})


def _strip_times(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip_times(v) for k, v in data.items() if k not in _TIMES}
    if isinstance(data, list):
        return [_strip_times(v) for v in data]
    return data


async def drive(driver: al.LoopDriver, start: int, limit: int) -> list[Any]:
    steps: list[Any] = []
    for position in range(start, limit):
        step = await driver.next()
        steps.append(comparable(step))
        if isinstance(step, al.AwaitingInput) and position >= 40:
            break
        host_action(step, position)
    return steps


async def run_with_restore(rounds: int, stop_at: int, limit: int = 30) -> None:
    reference_driver = await make_agent(planned_model(rounds)).start("s")
    reference_driver.submit_input([user("first")])
    reference = await drive(reference_driver, 0, limit)

    driver = await make_agent(planned_model(rounds)).start("s")
    driver.submit_input([user("first")])
    before = await drive(driver, 0, stop_at)
    document = json.loads(json.dumps(driver.checkpoint()))  # through real JSON
    restored = await make_agent(planned_model(rounds)).resume(document)
    assert restored.state is driver.state
    after = await drive(restored, stop_at, limit)

    assert before + after == reference
    assert comparable(restored.snapshot().transcript) == comparable(
        reference_driver.snapshot().transcript
    )
    if restored.state is not al.DriverState.AWAITING_APPROVAL:
        al.transcript.validate_transcript(restored.snapshot().transcript)


@pytest.mark.parametrize("stop_at", range(0, 12))
async def test_a_restored_driver_continues_exactly_like_the_original(stop_at: int) -> None:
    await run_with_restore(rounds=2, stop_at=stop_at, limit=14)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=st.integers(1, 3), stop_at=st.integers(0, 20))
async def test_restoring_at_any_step_changes_nothing(rounds: int, stop_at: int) -> None:
    await run_with_restore(rounds=rounds, stop_at=stop_at, limit=22)


async def test_the_document_is_versioned_json_holding_the_whole_state() -> None:
    driver = await make_agent(planned_model(1)).start(al.SessionConfig("s"))
    driver.submit_input([user("go")])
    approval = await driver.next()
    assert isinstance(approval, al.ApprovalRequest)
    document = driver.checkpoint()
    assert json.loads(json.dumps(document)) == document
    assert document["format"] == "agentloop.checkpoint"
    assert document["version"] == 2
    assert document["session_id"] == "s"
    assert document["state"] == "AWAITING_APPROVAL"
    assert document["turn_counter"] == 1
    calls = document["turn"]["round"]["calls"]
    assert [(c["call"]["id"], c["status"], c["surfaced"]) for c in calls] == [
        ("call-1-0", "awaiting_approval", True),
        ("call-1-1", "awaiting_approval", False),
    ]


async def test_a_checkpoint_is_refused_while_a_step_runs_and_after_a_failure() -> None:
    blocking = BlockingTool()
    model = al.testing.ScriptedModel([tool_calls(call("block")), "done"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(blocking))
        .build()
    )
    driver = await agent.start("s")
    driver.submit_input([user("go")])
    async with anyio.create_task_group() as group:
        group.start_soon(driver.next)
        await blocking.entered.wait()
        with pytest.raises(al.InvalidStateError, match="cannot checkpoint in state STEPPING"):
            driver.checkpoint()
        blocking.release.set()

    failing = al.testing.ScriptedModel([al.testing.fail(RuntimeError("boom"))])
    broken = await al.Agent.builder().model(failing).input([user("go")]).build().start("s")
    with pytest.raises(RuntimeError):
        await broken.next()
    with pytest.raises(al.InvalidStateError, match="FAILED: an earlier step raised RuntimeError"):
        broken.checkpoint()


async def approval_document() -> dict[str, Any]:
    driver = await make_agent(planned_model(1)).start("s")
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    return driver.checkpoint()


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: d.update(version=3), "version 3: this agentloop reads versions up to 2"),
        (lambda d: d.update(format="other"), "format is 'other'"),
        (lambda d: d.pop("turn_counter"), "missing field 'turn_counter'"),
        (lambda d: d["transcript"][0].update(kind="nonsense"), "the document is malformed"),
        (
            lambda d: d["turn"]["round"]["calls"][0]["approval"].update(call_id="call-x"),
            "pending approval of call call-1-0 does not match it",
        ),
        (
            lambda d: d["turn"]["round"]["calls"].pop(),
            "calls call-1-1 have no result and are not in the active round",
        ),
        (lambda d: d.update(turn=None), "have no result and no active round owns them"),
        (lambda d: d["turn"]["round"]["calls"][0].update(status="running"), "marked running"),
        (lambda d: d.update(session_id="other"), "does not match its config's 's'"),
    ],
)
async def test_a_corrupted_document_is_rejected_and_nothing_restores(
    corrupt: Any, message: str
) -> None:
    document = await approval_document()
    corrupt(document)
    model = planned_model(1)
    with pytest.raises(al.CheckpointError, match=message):
        await make_agent(model).resume(document)
    assert model.requests == []


async def test_two_drivers_restored_from_one_checkpoint_are_independent() -> None:
    document = await approval_document()
    first = await make_agent(planned_model(1)).resume(copy.deepcopy(document))
    second = await make_agent(planned_model(1)).resume(copy.deepcopy(document))
    step = await first.next()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    assert second.state is al.DriverState.AWAITING_APPROVAL
    again = await second.next()
    assert isinstance(again, al.ApprovalRequest)
    assert again.call_id == step.call_id
    with pytest.raises(al.InvalidStateError, match="already answered"):
        first.answer_approval_for(step.call_id, al.ApprovalAnswer.approve())
    second.answer_approval_for(step.call_id, al.ApprovalAnswer.deny("no"))  # its own decision


async def test_resume_needs_exactly_one_source_and_a_store_for_ids() -> None:
    agent = make_agent(planned_model(1))
    with pytest.raises(al.InvalidInputError, match="got neither"):
        await agent.resume()
    with pytest.raises(al.InvalidStateError, match="this agent has no store"):
        await agent.resume(session_id="s")
    stored = make_agent(planned_model(1), store=MemorySessionStore())
    with pytest.raises(al.CheckpointError, match="the store has no checkpoint for it"):
        await stored.resume(session_id="s")


class Journalled:
    """A tool whose side effect is counted; blocks until released."""

    def __init__(self, idempotent: bool) -> None:
        self.spec = al.ToolSpec(
            "pay",
            "Pay a bill.",
            {"type": "object"},
            annotations=al.ToolAnnotations(idempotent=idempotent),
        )
        self.runs = 0
        self.entered = anyio.Event()

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead("/bills")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs += 1
        self.entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def crash_while_running(tool: Journalled, store: MemorySessionStore) -> None:
    model = al.testing.ScriptedModel([tool_calls(call("pay", {}, id="call-pay"))])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(ApproveFsReads())
        .store(store)
        .input([user("pay it")])
        .build()
    )
    driver = await agent.start("s")
    approval = await driver.next()
    assert isinstance(approval, al.ApprovalRequest)
    approval.approve()
    with anyio.CancelScope() as scope:  # the "crash": the step never completes
        async with anyio.create_task_group() as group:
            group.start_soon(driver.next)
            await tool.entered.wait()
            scope.cancel()


async def test_a_started_call_without_result_is_answered_in_doubt_not_rerun() -> None:
    store = MemorySessionStore()
    tool = Journalled(idempotent=False)
    await crash_while_running(tool, store)
    stored = await store.load("s")
    assert stored is not None
    assert stored.started_calls == frozenset({"call-pay"})

    recorder = Recorder()
    model = al.testing.ScriptedModel(["I could not confirm the payment"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(ApproveFsReads())
        .observer(recorder)
        .store(store)
        .build()
    )
    driver = await agent.resume(session_id="s")
    assert [w.message for w in recorder.of(al.observe.LoopWarning)] == [
        "call call-pay (pay) started before the restore and has no result; answered as in "
        "doubt instead of running it again"
    ]
    assert driver.state is al.DriverState.AFTER_TOOL_RESULT  # the turn goes on
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    assert tool.runs == 1
    result = model.last_request.transcript[-1].parts[0]
    assert isinstance(result, al.ToolResultPart)
    assert result.is_error
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT
    assert result.output.startswith("in doubt: pay started before the session was restored")


async def test_an_idempotent_call_is_run_again_after_a_restore() -> None:
    store = MemorySessionStore()
    tool = Journalled(idempotent=True)
    await crash_while_running(tool, store)
    stored = await store.load("s")
    assert stored is not None
    assert stored.started_calls == frozenset()
    assert stored.approvals["call-pay"].approved  # recorded when the host approved
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([]))
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(ApproveFsReads())
        .store(store)
        .build()
    )
    driver = await agent.resume(session_id="s")
    assert driver.state is al.DriverState.AWAITING_APPROVAL
    with anyio.CancelScope() as scope:  # the recorded approval holds: it runs again at once
        async with anyio.create_task_group() as group:
            group.start_soon(driver.next)
            with anyio.fail_after(10):
                while tool.runs < 2:  # noqa: ASYNC110 - the tool counts, it has no event per run
                    await anyio.sleep(0.01)
            scope.cancel()
    assert tool.runs == 2


async def test_every_step_is_saved_to_the_store() -> None:
    store = MemorySessionStore()
    driver = await make_agent(planned_model(1), store=store).start("s")
    driver.submit_input([user("go")])
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    stored = await store.load("s")
    assert stored is not None
    assert stored.checkpoint == driver.checkpoint()
    step.approve()
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)
    step.approve()
    assert isinstance(await driver.next(), al.Finished)  # approvals lead straight to the model
    stored = await store.load("s")
    assert stored is not None
    assert stored.checkpoint == driver.checkpoint()
    assert stored.checkpoint["state"] == "IDLE"
    assert len(stored.checkpoint["transcript"]) == 5


async def test_a_cancelled_turn_survives_the_checkpoint() -> None:
    controller = al.CancellationController()
    model = planned_model(1)
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
        .cancellation(controller.handle())
        .build()
    )
    driver = await agent.start("s")
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    controller.interrupt()
    document = driver.checkpoint()
    assert document["turn"]["interrupted"] is True
    restored = await make_agent(planned_model(1)).resume(document)
    step = await restored.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    al.transcript.validate_transcript(restored.snapshot().transcript)


class Payments:
    """Pays at once, except for the calls listed in ``block`` (they never finish)."""

    spec = al.ToolSpec("pay", "Pay a bill.", {"type": "object"})

    def __init__(self, block: set[str]) -> None:
        self.block = block
        self.runs: list[str] = []
        self.blocked = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs.append(request.call_id)
        if request.call_id in self.block:
            self.blocked.set()
            await anyio.sleep_forever()
        return f"paid {request.call_id}"


@pytest.mark.parametrize("parallel", [False, True])
async def test_a_result_that_landed_before_a_crash_is_kept(parallel: bool) -> None:
    store = MemorySessionStore()
    tool = Payments(block={"call-b"})
    script = [tool_calls(call("pay", {}, id="call-a"), call("pay", {}, id="call-b"))]

    async def crash(manager: Any) -> None:
        builder = al.Agent.builder().model(al.testing.ScriptedModel(script))
        builder.add_tool_source(al.ToolRegistry().with_tool(tool)).store(store)
        if manager is not None:
            builder.task_manager(manager)
        driver = await builder.input([user("pay both")]).build().start("s")
        with anyio.CancelScope() as scope:  # the "kill" while call-b runs
            async with anyio.create_task_group() as group:
                group.start_soon(driver.next)
                await tool.blocked.wait()
                await anyio.wait_all_tasks_blocked()
                scope.cancel()

    if parallel:
        async with al.tasks.AsyncTaskManager() as manager:
            await crash(manager)
    else:
        await crash(None)
    stored = await store.load("s")
    assert stored is not None
    saved_round = stored.checkpoint["turn"]["round"]
    assert [(c["call"]["id"], c["status"]) for c in saved_round["calls"]] == [
        ("call-a", "done"),  # its result was saved when it landed
        ("call-b", "unstarted"),  # running at the crash: saved as not started
    ]
    assert stored.started_calls == frozenset({"call-a", "call-b"})  # the round owns call-a's

    model = al.testing.ScriptedModel(["call-a went through; call-b is unclear"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .store(store)
        .build()
    )
    driver = await agent.resume(session_id="s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == ["call-a", "call-b"]  # nothing ran twice
    results = {
        part.call_id: part
        for item in model.last_request.transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    }
    assert results["call-a"].output == "paid call-a"
    assert al.tools.result_outcome(results["call-a"]) is None
    assert al.tools.result_outcome(results["call-b"]) is al.tools.ResultOutcome.IN_DOUBT
