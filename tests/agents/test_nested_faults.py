"""What the fault model over trees (``test_nested_crash.py``) found, one test each.

- The host's answer to a child's approval reached the child before the parent's save
  recorded that the call no longer waits: a process dying in that save had run the
  child's approved call, and the restore asked again and ran it a second time.
- A child restored with two approvals pending shows the one not yet shown first: the
  answer given for the other was applied to it (a call ran that nobody approved).
- Question ids restarted at 1 in each process: a child's second approval after a
  restore got the first one's id, and a worker answered it with the answer the store
  held for the first (again a call nobody approved).
- A child asking while other calls of its round still ran asked without a checkpoint,
  so a restore answered the parent's whole call in doubt; it now asks with one (the
  running calls restored as started: in doubt if not idempotent, never run twice).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from agents_support import EchoTool, assert_answered_once, child_agent, results, user

import agentloop as al
import agentloop.agents
import agentloop.host
import agentloop.model
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SqliteSessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def rounds(*replies: Any) -> Any:
    """A model that gives ``replies`` in turn, one per tool round the transcript holds."""

    def reply(request: al.model.TurnRequest) -> Any:
        return replies[sum(1 for item in request.transcript if any(item.tool_calls()))]

    return reply


def calls_helper(request: al.model.TurnRequest) -> Any:
    if any(item.kind is al.ItemKind.TOOL for item in request.transcript):
        return "parent done"
    return tool_calls(call("helper", {"input": "go"}, id="p-1"))


def parent(store: Any, manager: Any, child: al.Agent, runs: list[Any] | None = None) -> al.Agent:
    helper = child.as_tool("helper", "Helps.", on_run=None if runs is None else runs.append)
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(calls_helper))
        .add_tool_source(al.ToolRegistry().with_tool(helper))
        .task_manager(manager)
        .store(store)
        .input([user("go")])
        .build()
    )


class SlowSaves(MemorySessionStore):
    """Each save lets every other task run first (a store answering slowly), noting what
    the echo tool had done by then."""

    def __init__(self, echo: EchoTool) -> None:
        super().__init__()
        self.echo = echo
        self.seen: list[tuple[str, int]] = []

    async def save_checkpoint(
        self, session_id: str, checkpoint: Mapping[str, Any], **options: Any
    ) -> int:
        await anyio.wait_all_tasks_blocked()
        self.seen.append((checkpoint["state"], len(self.echo.inputs)))
        return await super().save_checkpoint(session_id, checkpoint, **options)


async def test_a_childs_approved_call_runs_only_after_a_save_says_it_no_longer_waits() -> None:
    echo = EchoTool()
    store = SlowSaves(echo)
    async with al.tasks.AsyncTaskManager() as manager:
        child = child_agent(rounds(tool_calls(call("echo", {"value": "x"}, id="c-1")), "ok"),
                            echo, manager=manager)  # fmt: skip
        driver = await parent(store, manager, child).start("top")
        step = await driver.next()
        assert isinstance(step, al.agents.ChildApprovalRequest)
        asked = len(store.seen)
        step.approve()
        finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    # The first save after the answer: the call no longer waits, and the echo has not run.
    assert store.seen[asked] == ("AFTER_TOOL_RESULT", 0)
    assert echo.inputs == [{"value": "x"}]


async def test_a_restored_child_applies_the_answer_to_the_call_it_was_given_for() -> None:
    store, echo, runs = MemorySessionStore(), EchoTool(), []

    def build(manager: Any) -> al.Agent:
        both = tool_calls(call("echo", {"value": "a"}, id="c-1"),
                          call("echo", {"value": "b"}, id="c-2"))  # fmt: skip
        return parent(store, manager, child_agent(rounds(both, "ok"), echo, manager=manager), runs)

    async with al.tasks.AsyncTaskManager() as manager:
        first = await (await build(manager).start("top")).next()
        assert isinstance(first, al.agents.ChildApprovalRequest)
        assert first.call_id == "c-1"
    async with al.tasks.AsyncTaskManager() as manager:  # a new process
        driver = await build(manager).resume(session_id="top")
        again = await driver.next()
        assert isinstance(again, al.agents.ChildApprovalRequest)
        assert (again.call_id, again.question_id) == ("c-1", first.question_id)
        again.approve_with({"value": "edited a"})
        second = await driver.next()
        assert isinstance(second, al.agents.ChildApprovalRequest)
        assert second.call_id == "c-2"
        second.deny("not b")
        finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert echo.inputs == [{"value": "edited a"}]
    child_run = runs[-1]  # the first process's run ended cancelled as that process did
    assert child_run.result is not None
    assert child_run.result.finish_reason is al.FinishReason.COMPLETED
    assert results(child_run.transcript)[0] == ("c-1", "edited a", False)
    assert results(child_run.transcript)[1][0] == "c-2"
    assert results(child_run.transcript)[1][2] is True
    assert_answered_once(child_run.transcript)


async def test_a_childs_next_approval_after_a_restore_gets_a_new_question_id(
    tmp_path: Path,
) -> None:
    echo = EchoTool()

    def build(store: Any, manager: Any) -> al.Agent:
        script = rounds(tool_calls(call("echo", {"value": "a"}, id="c-1")),
                        tool_calls(call("echo", {"value": "b"}, id="c-2")), "ok")  # fmt: skip
        return parent(store, manager, child_agent(script, echo, manager=manager))

    async with SqliteSessionStore(tmp_path / "s.db") as store:
        async with al.tasks.AsyncTaskManager() as manager:
            first = await (await build(store, manager).start("top")).next()
        assert isinstance(first, al.agents.ChildApprovalRequest)
        assert (first.call_id, first.question_id) == ("c-1", "question:p-1:1")
        recorded = await store.record_answer(
            "top", first.question_id, action="accept", content={"kind": "approve"}
        )
        assert recorded.newly_recorded
        async with al.tasks.AsyncTaskManager() as manager:
            worker = al.host.SessionWorker(store=store, agent=build(store, manager), owner="w1")
            advanced = await worker.advance("top")
        # The worker answered c-1 from the store; c-2's approval is a new question it holds
        # no answer for: the session rests on it.
        step = advanced.step
        assert isinstance(step, al.agents.ChildApprovalRequest)
        assert (step.call_id, step.question_id) == ("c-2", "question:p-1:2")
        assert echo.inputs == [{"value": "a"}]
        stored = await store.load("top")
        assert stored is not None
        assert sorted(stored.answers) == ["question:p-1:1"]


class Slow:
    """Idempotent or not; runs until ``release`` is set, counting its runs."""

    def __init__(self, name: str, *, idempotent: bool) -> None:
        annotations = al.ToolAnnotations(idempotent=idempotent)
        self.spec = al.ToolSpec(name, "Slow.", {"type": "object"}, annotations=annotations)
        self.runs = 0
        self.release = anyio.Event()

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs += 1
        await self.release.wait()
        return f"{self.spec.name} ran"


@pytest.mark.parametrize("ask_in_doubt", [False, True])
async def test_a_child_asking_beside_running_calls_resumes_after_a_restore(
    ask_in_doubt: bool,
) -> None:
    """(A child built with ``ask_in_doubt()`` answers its calls in doubt all the same: the
    parent's call running it cannot ask its host about them.)"""
    store, echo, runs = MemorySessionStore(), EchoTool(), []
    pay, read = Slow("pay", idempotent=False), Slow("read", idempotent=True)

    def build(manager: Any) -> al.Agent:
        three = tool_calls(call("pay", {}, id="c-pay"), call("read", {}, id="c-read"),
                           call("echo", {"value": "x"}, id="c-echo"))  # fmt: skip
        child = child_agent(rounds(three, "ok"), echo, pay, read, manager=manager)
        return parent(store, manager, attrs.evolve(child, ask_in_doubt=ask_in_doubt), runs)

    async with al.tasks.AsyncTaskManager() as manager:
        first = await (await build(manager).start("top")).next()
        assert isinstance(first, al.agents.ChildApprovalRequest)
        assert (pay.runs, read.runs) == (1, 1)  # both run while the approval waits
    # The process dies with pay and read still running.
    [summary] = await store.sessions_awaiting_answer()
    [waiting] = summary.unanswered_questions
    assert (waiting.question_id, waiting.resumable) == (first.question_id, True)
    pay.release.set()
    read.release.set()
    async with al.tasks.AsyncTaskManager() as manager:
        driver = await build(manager).resume(session_id="top")
        again = await driver.next()
        assert isinstance(again, al.agents.ChildApprovalRequest)
        assert (again.call_id, again.question_id) == ("c-echo", first.question_id)
        again.approve()
        finished = await driver.run_until_blocked()
    assert isinstance(finished, al.Finished)
    assert results(driver.snapshot().transcript) == [("p-1", "ok", False)]
    assert (pay.runs, read.runs, echo.inputs) == (1, 2, [{"value": "x"}])
    child_run = runs[-1]  # the first process's run ended cancelled as that process did
    assert child_run.result is not None
    assert child_run.result.finish_reason is al.FinishReason.COMPLETED
    found = {call_id: (output, error) for call_id, output, error in results(child_run.transcript)}
    assert found["c-echo"] == ("x", False)
    assert found["c-read"] == ("read ran", False)  # idempotent: run again
    assert found["c-pay"][1] is True
    assert str(found["c-pay"][0]).startswith("in doubt")  # not idempotent: never run twice
    assert_answered_once(child_run.transcript)
