"""A real agent session SIGKILLed at random moments resumes without running a side effect twice."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from session_kill_runner import ROUNDS_PER_TURN, SESSION_ID, TURNS, build_agent, drive

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.store import MemorySessionStore, SqliteSessionStore
from agentloop.testing import Reply, call, format_transcript, tool_calls

pytestmark = pytest.mark.anyio

RUNNER = Path(__file__).resolve().parent / "session_kill_runner.py"


async def run_until_killed(database: Path, side_effects: Path, backend: str, delay: float) -> bool:
    """Run the session in a child; SIGKILL it ``delay`` s after its first step. False: it ended."""
    command = [sys.executable, str(RUNNER), str(database), str(side_effects), backend]
    with anyio.fail_after(60):  # never hang the suite if the child stalls
        async with await anyio.open_process(command, stderr=subprocess.STDOUT) as child:
            assert child.stdout is not None
            await BufferedByteReceiveStream(child.stdout).receive_until(b"\n", 100_000)
            with anyio.move_on_after(delay):
                assert await child.wait() == 0
                return False
            child.kill()
            assert await child.wait() == -signal.SIGKILL
    return True


def side_effect_lines(side_effects: Path) -> list[str]:
    return side_effects.read_text(encoding="utf-8").split() if side_effects.exists() else []


def results_of(items: list[al.Item] | tuple[al.Item, ...]) -> dict[str, al.ToolResultPart]:
    return {
        part.call_id: part
        for item in items
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    }


def answered_calls(checkpoint: dict[str, Any]) -> set[str]:
    """Calls with a result in the document: in its transcript or held by the active round."""
    transcript: list[al.Item] = al.structure(checkpoint["transcript"], list[al.Item])
    turn = checkpoint["turn"]
    held = [] if turn is None or turn["round"] is None else turn["round"]["results"]
    return set(results_of(transcript)) | {entry["result"]["call_id"] for entry in held}


async def test_a_killed_session_resumes_without_running_a_side_effect_twice(
    tmp_path: Path, anyio_backend: str
) -> None:
    database, side_effects = tmp_path / "sessions.db", tmp_path / "side-effects.txt"
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    in_doubt: set[str] = set()
    kills = 0
    while kills < 3 and await run_until_killed(
        database, side_effects, anyio_backend, rng.uniform(0.0, 0.4)
    ):
        kills += 1
        context = f"seed {seed}, kill {kills}"
        async with SqliteSessionStore(database) as store:
            stored = await store.load(SESSION_ID)
        assert stored is not None, context
        answered = answered_calls(stored.checkpoint)
        ran_without_result = set(side_effect_lines(side_effects)) - answered
        # Ran but no saved result: the store knows it started, so it is in doubt. (The
        # store reports calls its transcript does not answer; a round may hold their result.)
        assert ran_without_result <= stored.started_calls, context
        in_doubt |= stored.started_calls - answered

    async with SqliteSessionStore(database) as store:
        driver = await build_agent(store, side_effects).resume(session_id=SESSION_ID)
        await drive(driver)
    transcript = driver.snapshot().transcript
    context = f"seed {seed}, {kills} kills, in doubt {sorted(in_doubt)}\n" + format_transcript(
        transcript
    )
    al.transcript.validate_transcript(transcript)
    lines = side_effect_lines(side_effects)
    assert len(lines) == len(set(lines)), context  # no call id ran twice
    results = results_of(transcript)
    doubted = {
        call_id
        for call_id, result in results.items()
        if al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT
    }
    assert doubted == in_doubt, context
    appended = {
        call_id for call_id, result in results.items() if result.output == f"appended {call_id}"
    }
    assert appended <= set(lines), context
    assert set(lines) - appended <= in_doubt, context
    # Complete: every turn asked, every round answered, every turn closed by an answer.
    kinds = [item.kind for item in transcript]
    one_round = [al.ItemKind.ASSISTANT, al.ItemKind.TOOL, al.ItemKind.TOOL]  # a result per call
    one_turn = [al.ItemKind.USER, *one_round * ROUNDS_PER_TURN]
    assert kinds == [*one_turn, al.ItemKind.ASSISTANT] * TURNS, context
    assert transcript[-1].text_content == f"turn {TURNS} done", context
    assert len(results) == TURNS * ROUNDS_PER_TURN * 2, context
    assert driver.state is al.DriverState.IDLE


class Pay:
    """Not idempotent; the first run never returns (the process "dies" in it)."""

    spec = al.ToolSpec("pay", "Pay a bill.", {"type": "object"})

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.entered = anyio.Event()

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite("/bills")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs.append(request.call_id)
        self.entered.set()
        if len(self.runs) == 1:
            await anyio.sleep_forever()
        return "paid"


class AskBeforePaying:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("sensitive_path", request.summary)


def pay_once(request: al.model.TurnRequest) -> Reply | str:
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(call("pay", id="call-pay"))
    return "done"


def pay_agent(
    tool: Pay, store: MemorySessionStore, checker: al.permissions.PermissionChecker
) -> al.Agent:
    registry = al.ToolRegistry().with_tool(tool)
    builder = al.Agent.builder().model(al.testing.ScriptedModel(pay_once)).add_tool_source(registry)
    return builder.permissions(checker).store(store).build()


async def approve_all(driver: al.LoopDriver) -> None:
    while isinstance(step := await driver.run_until_blocked(), al.ApprovalRequest):
        step.approve()


async def crash_in_pay(
    tool: Pay, store: MemorySessionStore, checker: al.permissions.PermissionChecker
) -> al.LoopDriver:
    """Run until ``pay`` is executing, "kill" the step there, resume from the store."""
    driver = await pay_agent(tool, store, checker).start("s")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "pay it")])
    with anyio.CancelScope() as scope:  # the step never completes
        async with anyio.create_task_group() as group:
            group.start_soon(approve_all, driver)
            await tool.entered.wait()
            scope.cancel()
    stored = await store.load("s")
    assert stored is not None
    assert stored.started_calls == frozenset({"call-pay"})
    return await pay_agent(tool, store, checker).resume(session_id="s")


async def test_an_approved_call_that_started_is_answered_in_doubt() -> None:
    tool = Pay()
    resumed = await crash_in_pay(tool, MemorySessionStore(), AskBeforePaying())
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == ["call-pay"]
    result = results_of(resumed.snapshot().transcript)["call-pay"]
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT


async def test_a_call_started_in_the_step_that_asked_for_it_is_not_run_again() -> None:
    """The model's response is journaled before its calls start, so the call is in doubt."""
    tool = Pay()
    resumed = await crash_in_pay(tool, MemorySessionStore(), al.permissions.AllowAll())
    assert isinstance(await resumed.run_until_blocked(), al.Finished)
    assert tool.runs == ["call-pay"]
    result = results_of(resumed.snapshot().transcript)["call-pay"]
    assert al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT


async def test_a_restored_turn_with_an_in_doubt_result_is_not_idle() -> None:
    resumed = await crash_in_pay(Pay(), MemorySessionStore(), AskBeforePaying())
    assert resumed.state is al.DriverState.AFTER_TOOL_RESULT
