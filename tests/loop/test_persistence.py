"""The driver with a store: versions, leases, claims, recorded decisions, failed saves.

Every test drives real ``LoopDriver``s through the public API against the
memory and SQLite stores (``store`` fixture), on both anyio backends.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from loop_support import Recorder, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.store import (
    ClaimError,
    LeaseLostError,
    SessionStore,
    StaleSessionError,
    input_digest,
)
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class Pay:
    """Not idempotent; asks for approval; counts its runs by input."""

    spec = al.ToolSpec("pay", "Pay a bill.", {"type": "object"})

    def __init__(self) -> None:
        self.runs: list[Any] = []

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite("/bills")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs.append(request.input)
        return "paid"


class AskToPay:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("sensitive_path", request.summary)


def pay_once(request: al.model.TurnRequest) -> Any:
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(call("pay", {"amount": 5}, id="call-pay"))
    return "done"


def make_agent(store: SessionStore, tool: Pay, *, ask: bool = True, **extra: Any) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(pay_once))
        .add_tool_source(al.ToolRegistry().with_tool(tool))
        .permissions(AskToPay() if ask else al.permissions.AllowAll())
        .store(store)
    )
    for observer in extra.get("observers", ()):
        builder = builder.observer(observer)
    return builder.build()


async def waiting_for_approval(store: SessionStore, tool: Pay, session_id: str = "s") -> None:
    driver = await make_agent(store, tool).start(session_id)
    driver.submit_input([user("pay the bill")])
    assert isinstance(await driver.next(), al.ApprovalRequest)


def results(driver: al.LoopDriver) -> dict[str, al.ToolResultPart]:
    return {
        part.call_id: part
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    }


# -- versions -------------------------------------------------------------------------


async def test_two_drivers_on_one_session_the_later_save_is_refused(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    first = await make_agent(store, tool).resume(session_id="s")
    second = await make_agent(store, tool).resume(session_id="s")
    first.answer_approval_for("call-pay", al.ApprovalAnswer.approve())
    assert isinstance(await first.next(), al.Finished)
    saved = await store.load("s")
    assert saved is not None

    second.answer_approval_for("call-pay", al.ApprovalAnswer.approve())
    with pytest.raises(StaleSessionError) as caught:
        await second.next()
    # Its claim lost (the first ran the call); the save of its in-doubt answer is stale.
    assert (caught.value.expected, caught.value.found) == (saved.version - 2, saved.version)
    assert "load the session again and redo the step" in str(caught.value)
    after = await store.load("s")
    assert after is not None
    assert (after.version, after.checkpoint) == (saved.version, saved.checkpoint)
    assert tool.runs == [{"amount": 5}]  # once, whichever driver held the approval
    reloaded = await make_agent(store, tool).resume(session_id="s")
    assert reloaded.snapshot().transcript == first.snapshot().transcript


async def test_a_started_driver_bases_later_saves_on_its_own(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    driver = await make_agent(store, tool, ask=False).start("s")  # starts the session anew
    driver.submit_input([user("pay it")])
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == [{"amount": 5}]
    other = await make_agent(store, tool).resume(session_id="s")
    other.submit_input([user("hello")])
    await other.save()  # another writer moves the session on
    before = await store.load("s")
    driver.submit_input([user("again")])
    with pytest.raises(StaleSessionError, match="based on version"):
        await driver.next()
    assert driver.state is al.DriverState.IDLE  # nothing happened: the input is still queued
    assert driver.snapshot().pending_input == (user("again"),)
    after = await store.load("s")
    assert after is not None
    assert before is not None
    assert (after.version, after.checkpoint) == (before.version, before.checkpoint)


# -- claims -------------------------------------------------------------------------------


async def test_a_call_claimed_by_another_driver_is_answered_in_doubt(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    stored = await store.load("s")
    assert stored is not None
    # Two copies of one document: the store's claim keeps the call single-use.
    first = await make_agent(store, tool).resume(stored.checkpoint)
    second = await make_agent(store, tool).resume(stored.checkpoint)
    recorder = Recorder()
    for driver in (first, second):
        driver.answer_approval_for("call-pay", al.ApprovalAnswer.approve())
    assert isinstance(await first.next(), al.Finished)
    assert isinstance(await second.run_until_blocked(), al.Finished)
    assert tool.runs == [{"amount": 5}]
    doubted = results(second)["call-pay"]
    assert al.tools.result_outcome(doubted) is al.tools.ResultOutcome.IN_DOUBT
    assert doubted.output == (
        "in doubt: pay was claimed by another driver or worker of this session, which may "
        "have run it; it was not run again. Check its effects before retrying."
    )
    assert recorder.of(al.observe.LoopWarning) == []


async def test_a_crash_between_claim_and_result_is_in_doubt_never_rerun(
    store: SessionStore,
) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    stored = await store.load("s")
    assert stored is not None
    # A worker claimed the call and died before its result was saved.
    await store.claim(
        "s", "call-pay", tool_name="pay", input_digest=input_digest("pay", {"amount": 5})
    )
    resumed = await make_agent(store, tool).resume(session_id="s")
    assert resumed.state is al.DriverState.AFTER_TOOL_RESULT
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == []
    result = results(resumed)["call-pay"]
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT
    assert result.output.startswith("in doubt: pay started before the session was restored")
    again = await make_agent(store, tool).resume(session_id="s")
    assert again.snapshot().transcript == resumed.snapshot().transcript


# -- decisions recorded elsewhere -----------------------------------------------------------


async def test_a_denial_recorded_by_another_process_is_honoured(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    digest = input_digest("pay", {"amount": 5})
    await store.record_approval("s", "call-pay", input_digest=digest, approved=False)  # the UI
    driver = await make_agent(store, tool).resume(session_id="s")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == []
    result = results(driver)["call-pay"]
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.DENIED
    assert result.output == "approval denied by a decision recorded in the store"


async def test_an_approval_recorded_by_another_process_is_honoured(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    digest = input_digest("pay", {"amount": 5})
    await store.record_approval("s", "call-pay", input_digest=digest, approved=True)
    driver = await make_agent(store, tool).resume(session_id="s")
    assert isinstance(await driver.next(), al.Finished)  # runs without asking again
    assert tool.runs == [{"amount": 5}]
    assert results(driver)["call-pay"].output == "paid"


async def test_a_decision_that_conflicts_with_a_recorded_one_is_refused(
    store: SessionStore,
) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    driver = await make_agent(store, tool).resume(session_id="s")
    digest = input_digest("pay", {"amount": 5})
    await store.record_approval("s", "call-pay", input_digest=digest, approved=False)
    before = await store.load("s")
    driver.answer_approval_for("call-pay", al.ApprovalAnswer.approve())
    with pytest.raises(ClaimError) as caught:
        await driver.next()
    assert caught.value.reason == "decided"
    message = str(caught.value)
    assert message.startswith("cannot apply the decision approve on call call-pay of session 's'")
    assert message.endswith(
        "another process decided this call already: resume the session from the store "
        "(Agent.resume(session_id=...)) to continue with the recorded decision"
    )
    assert tool.runs == []
    after = await store.load("s")
    assert after is not None
    assert before is not None
    assert (after.version, after.checkpoint) == (before.version, before.checkpoint)


async def test_an_edited_approval_is_bound_to_the_edited_input(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    driver = await make_agent(store, tool).resume(session_id="s")
    driver.answer_approval_for("call-pay", al.ApprovalAnswer.approve_with({"amount": 3}))
    assert isinstance(await driver.next(), al.Finished)
    assert tool.runs == [{"amount": 3}]
    stored = await store.load("s")
    assert stored is not None
    recorded = stored.approvals["call-pay"]
    assert (recorded.approved, recorded.input_digest) == (True, input_digest("pay", {"amount": 3}))
    with pytest.raises(ClaimError, match="claimed"):  # single use, whatever it is asked with
        await store.claim(
            "s", "call-pay", tool_name="pay", input_digest=input_digest("pay", {"amount": 3})
        )


# -- leases ---------------------------------------------------------------------------------


async def test_a_lease_taken_over_refuses_the_old_drivers_claim_and_save(
    store: SessionStore,
) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    old_lease = await store.acquire("s", "worker-a", ttl=0.2)
    old = await make_agent(store, tool).resume(session_id="s", lease=old_lease)
    await anyio.sleep(0.3)  # worker A stalls past its lease; worker B takes the session
    new_lease = await store.acquire("s", "worker-b", ttl=30)
    assert new_lease.token > old_lease.token
    before = await store.load("s")

    old.answer_approval_for("call-pay", al.ApprovalAnswer.approve())
    with pytest.raises(LeaseLostError, match="stop driving this session"):
        await old.next()  # the claim is refused: the call does not run
    assert tool.runs == []
    assert old.state is al.DriverState.FAILED

    after = await store.load("s")
    assert after is not None
    assert before is not None
    assert after.version == before.version
    new = await make_agent(store, tool).resume(session_id="s", lease=new_lease)
    assert isinstance(await new.next(), al.Finished)  # the approval recorded by A holds
    assert tool.runs == [{"amount": 5}]


async def test_a_lease_lost_before_a_save_refuses_the_save(store: SessionStore) -> None:
    tool = Pay()
    lease = await store.acquire("s", "worker-a", ttl=30)
    driver = await make_agent(store, tool, ask=False).start("s", lease=lease)
    driver.submit_input([user("hello")])
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert tool.runs == [{"amount": 5}]
    await store.release(lease)  # e.g. an operator took the session away
    driver.submit_input([user("again")])
    with pytest.raises(LeaseLostError, match="the lease was released"):
        await driver.next()
    assert driver.state is al.DriverState.IDLE  # the input save came first: nothing ran
    assert tool.runs == [{"amount": 5}]


async def test_a_lease_of_another_session_is_refused(store: SessionStore) -> None:
    lease = await store.acquire("other", "worker-a", ttl=30)
    with pytest.raises(al.InvalidInputError, match="under the lease of session 'other'"):
        await make_agent(store, Pay()).start("s", lease=lease)


# -- failed saves (issue 13) --------------------------------------------------------------


class FailingWrites:
    """A real store whose next ``failures`` writes raise ``error`` (nothing written)."""

    def __init__(self, inner: SessionStore, error: BaseException, failures: int) -> None:
        self.inner = inner
        self.error = error
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save_checkpoint(
        self, session_id: str, checkpoint: Mapping[str, Any], **kw: Any
    ) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        return await self.inner.save_checkpoint(session_id, checkpoint, **kw)


FAULTS = [
    OSError(28, "No space left on device"),
    sqlite3.OperationalError("database is locked"),
    al.CheckpointError("the document holds a value JSON cannot represent"),
]


@pytest.mark.parametrize("fault", FAULTS, ids=["disk-full", "locked", "unserializable"])
async def test_a_failed_input_save_raises_and_changes_nothing(
    store: SessionStore, fault: Exception
) -> None:
    failing = FailingWrites(store, fault, failures=1)
    tool = Pay()
    agent = make_agent(failing, tool)  # type: ignore[arg-type]
    driver = await agent.start("s")
    driver.submit_input([user("pay the bill")])
    with pytest.raises(al.SaveError) as caught:
        await driver.next()
    assert caught.value.__cause__ is fault
    assert caught.value.step is None
    assert str(caught.value).startswith("cannot save session 's' in state IDLE: ")
    assert driver.state is al.DriverState.IDLE
    assert driver.snapshot().pending_input == (user("pay the bill"),)
    assert await store.load("s") is None
    assert isinstance(await driver.next(), al.ApprovalRequest)  # the retry works
    stored = await store.load("s")
    assert stored is not None
    assert stored.checkpoint == driver.checkpoint()


@pytest.mark.parametrize("fault", FAULTS, ids=["disk-full", "locked", "unserializable"])
async def test_a_failed_step_save_carries_the_step_and_can_be_retried(
    store: SessionStore, fault: Exception
) -> None:
    failing = FailingWrites(store, fault, failures=0)
    recorder = Recorder()
    tool = Pay()
    driver = await make_agent(failing, tool, observers=[recorder]).start("s")  # type: ignore[arg-type]
    driver.submit_input([user("pay the bill")])
    approval = await driver.next()
    assert isinstance(approval, al.ApprovalRequest)
    approval.approve()
    # The claim succeeds and the call runs; then every save of the step fails, three times.
    failing.failures = 3
    with pytest.raises(al.SaveError) as caught:
        await driver.next()
    assert caught.value.__cause__ is fault
    assert isinstance(caught.value.step, al.Finished)
    assert caught.value.step.result.items[-1].text_content == "done"
    assert driver.state is al.DriverState.IDLE  # the step stands in memory
    assert tool.runs == [{"amount": 5}]
    # The response save inside the step failed too; it was reported, then retried.
    assert [w.message.split(": ")[0] for w in recorder.of(al.observe.LoopWarning)] == [
        "cannot save session 's' in state AFTER_TOOL_RESULT"
    ]
    with pytest.raises(al.SaveError):
        await driver.save()  # the third failure
    await driver.save()
    stored = await store.load("s")
    assert stored is not None
    assert stored.checkpoint == driver.checkpoint()
    resumed = await make_agent(store, tool).resume(session_id="s")
    assert resumed.snapshot().transcript == driver.snapshot().transcript
    assert tool.runs == [{"amount": 5}]


class Broken:
    """A mutator that raises: a bug, so the driver goes FAILED (a failed model call
    would only end the turn)."""

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        raise RuntimeError("mutator bug")


async def test_save_is_refused_without_a_store_or_inside_a_failed_driver(
    store: SessionStore,
) -> None:
    plain = await al.Agent.builder().model(al.testing.ScriptedModel(["hi"])).build().start("s")
    with pytest.raises(al.InvalidStateError, match="this agent has no store"):
        await plain.save()
    builder = (
        al.Agent.builder().model(al.testing.ScriptedModel(["hi"])).store(store).mutator(Broken())
    )
    broken = await builder.build().start("broken")
    broken.submit_input([user("go")])
    with pytest.raises(al.MutatorError, match="mutator bug"):
        await broken.next()
    with pytest.raises(al.InvalidStateError, match="in state FAILED: an earlier step raised"):
        await broken.save()


async def test_input_is_durable_before_the_model_is_called(store: SessionStore) -> None:
    builder = (
        al.Agent.builder().model(al.testing.ScriptedModel(["hi"])).store(store).mutator(Broken())
    )
    broken = await builder.build().start("s")
    broken.submit_input([user("remember me")])
    with pytest.raises(al.MutatorError, match="mutator bug"):
        await broken.next()  # the step failed before the model was called: nothing saved after
    agent = al.Agent.builder().model(al.testing.ScriptedModel(["got it"])).store(store).build()
    resumed = await agent.resume(session_id="s")
    assert resumed.snapshot().pending_input == (user("remember me"),)
    finished = await resumed.next()
    assert isinstance(finished, al.Finished)
    assert [item.text_content for item in resumed.snapshot().transcript] == [
        "remember me",
        "got it",
    ]


async def test_a_failed_model_call_keeps_the_input_and_retries_after_a_resume(
    store: SessionStore,
) -> None:
    failing = (
        await al.Agent.builder().model(al.testing.ScriptedModel([])).store(store).build().start("s")
    )
    failing.submit_input([user("remember me")])
    failed = await failing.next()
    assert isinstance(failed, al.Finished)
    assert failed.result.finish_reason is al.FinishReason.ERROR
    agent = al.Agent.builder().model(al.testing.ScriptedModel(["got it"])).store(store).build()
    resumed = await agent.resume(session_id="s")
    assert [item.text_content for item in resumed.snapshot().transcript] == ["remember me"]
    finished = await resumed.retry()
    assert isinstance(finished, al.Finished)
    assert [item.text_content for item in resumed.snapshot().transcript] == [
        "remember me",
        "got it",
    ]


async def test_an_approval_recorded_for_other_input_is_not_replayed(store: SessionStore) -> None:
    tool = Pay()
    await waiting_for_approval(store, tool)
    edited = input_digest("pay", {"amount": 1})  # the UI approved an edit it cannot pass on
    await store.record_approval("s", "call-pay", input_digest=edited, approved=True)
    driver = await make_agent(store, tool).resume(session_id="s")
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest)  # still pending: the edit is not in the store
    assert step.call_id == "call-pay"
    step.approve()  # the model's own input: not what was approved
    with pytest.raises(ClaimError, match="another process decided this call already"):
        await driver.next()
    assert tool.runs == []
    again = await make_agent(store, tool).resume(session_id="s")
    approval = await again.next()
    assert isinstance(approval, al.ApprovalRequest)
    approval.approve_with({"amount": 1})  # the same edit: the same decision
    assert isinstance(await again.next(), al.Finished)
    assert tool.runs == [{"amount": 1}]
