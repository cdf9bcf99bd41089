"""Crash tests with real worker processes: SIGKILL, restart with the same executor id.

Each worker (``dbos_worker.py``) serves the DBOS queue ``sessions``; this
process enqueues runs, answers approvals and reads results through a
``DBOSClient``. Model requests and charges are counted on disk by the
workers (``durable_kit``), so the counts survive the kills.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from dbos import DBOSClient
from durable_kit import IN_DOUBT_PREFIX, final_text, lines, user

import agentloop as al
import agentloop.tools
import agentloop.transcript
from agentloop.durable.dbos import (
    ApprovalStatus,
    approve,
    enqueue_input,
    pending_approval,
    wait_result,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: the workers run DBOS's own asyncio loop whatever this process uses,
    and the client calls made here run on both backends in test_dbos_workflow.py."""
    return "asyncio"


WORKER = Path(__file__).with_name("dbos_worker.py")
QUEUE = "sessions"
VERSION = "durable-test-1"
WAIT = 90.0  # bound on every wait; a healthy step takes well under a second


class Fleet:
    """Worker processes on one DBOS system database; all stopped at the end."""

    def __init__(self, workdir: Path, url: str, claims: str) -> None:
        self.workdir = workdir
        self.url = url
        self.claims = claims
        self.processes: list[subprocess.Popen[bytes]] = []
        self.client = DBOSClient(system_database_url=url)

    def start(self, executor_id: str) -> subprocess.Popen[bytes]:
        ready = self.workdir / f"ready-{executor_id}"
        ready.unlink(missing_ok=True)
        log = (self.workdir / f"{executor_id}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, str(WORKER), self.url, executor_id, str(self.workdir), self.claims],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        self.processes.append(process)
        self.wait_for(ready, process)
        return process

    def wait_for(self, path: Path, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + WAIT
        while not path.exists():
            if process.poll() is not None:
                pytest.fail(f"worker exited {process.returncode}: {self.logs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {path.name} after {WAIT} s: {self.logs()}")
            time.sleep(0.05)

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(WAIT)

    def logs(self) -> str:
        return "\n".join(path.read_text()[-3000:] for path in self.workdir.glob("*.log"))

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
        self.client.destroy()

    def requests(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in lines(self.workdir / "requests.log")]

    def charges(self) -> list[str]:
        return lines(self.workdir / "charges.log")

    async def enqueue(self, session_id: str, text: str, agent: str = "charges") -> str:
        return await enqueue_input(
            self.client,
            queue_name=QUEUE,
            agent_name=agent,
            session_id=session_id,
            input=user(text),
            application_version=VERSION,
        )


@pytest.fixture
def fleet(workdir: Path, databases: tuple[str, str]) -> Iterator[Fleet]:
    running = Fleet(workdir, *databases)
    try:
        yield running
    finally:
        running.stop()


def _first_request_count(fleet: Fleet) -> int:
    return sum(1 for request in fleet.requests() if request["items"] == 1)


def _request(turn: str, items: int, *users: str) -> dict[str, object]:
    return {"turn": turn, "items": items, "users": list(users)}


async def test_a_worker_killed_inside_a_tool_recovers_with_the_call_in_doubt(
    fleet: Fleet,
) -> None:
    (fleet.workdir / "hang_tool").touch()
    worker = fleet.start("worker-a")
    workflow_id = await fleet.enqueue("s-tool", "charge 5")
    fleet.wait_for(fleet.workdir / "tool_started", worker)
    fleet.kill(worker)
    (fleet.workdir / "hang_tool").unlink()

    fleet.start("worker-a")  # the same executor id recovers its workflow
    result = await wait_result(fleet.client, workflow_id, within=WAIT)

    tool_result = result.transcript[-2].parts[0]
    assert isinstance(tool_result, al.ToolResultPart)
    assert tool_result.is_error
    assert al.tools.result_outcome(tool_result) is al.tools.ResultOutcome.IN_DOUBT
    assert final_text(result.transcript).startswith(f"done: {IN_DOUBT_PREFIX}")
    assert fleet.charges() == ["turn-1-charge 5"]  # the side effect ran once
    assert _first_request_count(fleet) == 1  # the recorded response was not asked again
    al.transcript.validate_transcript(result.transcript)


async def test_a_worker_killed_between_steps_replays_the_recorded_ones(fleet: Fleet) -> None:
    (fleet.workdir / "hang_model_2").touch()
    worker = fleet.start("worker-a")
    workflow_id = await fleet.enqueue("s-model", "charge 7")
    fleet.wait_for(fleet.workdir / "model_2_started", worker)
    fleet.kill(worker)  # model call 1 and the tool call are recorded; call 2 is not
    (fleet.workdir / "hang_model_2").unlink()

    fleet.start("worker-a")
    result = await wait_result(fleet.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == "done: charged 7"
    assert fleet.charges() == ["turn-1-charge 7"]
    assert fleet.requests() == [
        _request("turn-1", 1, "charge 7"),
        _request("turn-1", 3, "charge 7"),  # the unrecorded call, cut by the kill
        _request("turn-1", 3, "charge 7"),
    ]
    al.transcript.validate_transcript(result.transcript)


async def test_an_approval_survives_a_killed_worker_and_is_answered_later(
    fleet: Fleet,
) -> None:
    worker = fleet.start("worker-a")
    workflow_id = await fleet.enqueue("s-approve", "charge 500")
    pending = await pending_approval(fleet.client, workflow_id, within=WAIT)
    assert pending is not None
    fleet.kill(worker)

    fleet.start("worker-a")
    await approve(fleet.client, workflow_id, pending.call_id, al.ApprovalAnswer.approve())
    result = await wait_result(fleet.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == "done: charged 500"
    [outcome] = result.approvals
    assert (outcome.status, outcome.deadline) == (ApprovalStatus.APPROVED, pending.deadline)
    assert fleet.charges() == ["turn-1-charge 500"]
    assert _first_request_count(fleet) == 1
    al.transcript.validate_transcript(result.transcript)


async def test_a_session_continues_across_worker_restarts(fleet: Fleet) -> None:
    worker = fleet.start("worker-a")
    first = await fleet.enqueue("s-chat", "charge 5")
    one = await wait_result(fleet.client, first, within=WAIT)
    fleet.kill(worker)  # the process that ran the first input is gone
    (fleet.workdir / "hang_turn-2").touch()
    worker = fleet.start("worker-a")
    second = await fleet.enqueue("s-chat", "charge 6")
    fleet.wait_for(fleet.workdir / "model_turn-2_started", worker)
    fleet.kill(worker)  # inside the second input's first model call
    (fleet.workdir / "hang_turn-2").unlink()

    fleet.start("worker-a")
    two = await wait_result(fleet.client, second, within=WAIT)

    assert (first, second) == ("s-chat#1", "s-chat#2")
    assert two.transcript[: len(one.transcript)] == one.transcript
    assert final_text(two.transcript) == "done: charged 6"
    assert fleet.requests() == [
        _request("turn-1", 1, "charge 5"),
        _request("turn-1", 3, "charge 5"),
        _request("turn-2", 5, "charge 5", "charge 6"),  # cut by the kill
        _request("turn-2", 5, "charge 5", "charge 6"),
        _request("turn-2", 7, "charge 5", "charge 6"),
    ]
    assert fleet.charges() == ["turn-1-charge 5", "turn-2-charge 6"]
    al.transcript.validate_transcript(two.transcript)


async def test_a_recorded_model_failure_is_not_asked_again_on_recovery(fleet: Fleet) -> None:
    (fleet.workdir / "hang_turn-2").touch()
    worker = fleet.start("worker-a")
    first = await fleet.enqueue("s-busy", "fail busy")
    # turn-1's call failed (recorded); the worker's policy retries it as turn-2, which hangs.
    fleet.wait_for(fleet.workdir / "model_turn-2_started", worker)
    fleet.kill(worker)
    (fleet.workdir / "hang_turn-2").unlink()

    fleet.start("worker-a")
    failed = await wait_result(fleet.client, first, within=WAIT)

    assert (failed.finish_reason, failed.retries) == (al.FinishReason.ERROR, 1)
    assert failed.error is not None
    assert (failed.error.kind, str(failed.error)) == (
        al.ProviderErrorKind.RETRYABLE,
        "503: overloaded",
    )
    assert fleet.requests() == [
        _request("turn-1", 1, "fail busy"),  # recorded: not asked again
        _request("turn-2", 1, "fail busy"),  # cut by the kill
        _request("turn-2", 1, "fail busy"),  # the last retry, failed: the turn ends ERROR
    ]

    later = await fleet.enqueue("s-busy", "charge 5")  # the session goes on
    done = await wait_result(fleet.client, later, within=WAIT)

    assert (done.finish_reason, final_text(done.transcript)) == (
        al.FinishReason.COMPLETED,
        "done: charged 5",
    )
    assert fleet.requests()[3] == _request("turn-3", 2, "fail busy", "charge 5")
    assert fleet.charges() == ["turn-3-charge 5"]
    al.transcript.validate_transcript(done.transcript)


async def test_two_workers_share_a_queue_and_run_each_session_once(fleet: Fleet) -> None:
    fleet.start("worker-a")
    fleet.start("worker-b")
    parked = [f"s-big-{number}" for number in range(4)]
    runs = [await fleet.enqueue(session_id, "charge 500") for session_id in parked]
    pending = [await pending_approval(fleet.client, run, within=WAIT) for run in runs]
    # Each worker runs at most two (worker_concurrency=2) and a run parked on its
    # approval keeps its slot: both workers must hold two.
    holders = await anyio.to_thread.run_sync(
        lambda: Counter(
            status.executor_id for status in fleet.client.list_workflows(workflow_ids=runs)
        )
    )
    assert holders == {"worker-a": 2, "worker-b": 2}
    quick = [f"s-small-{number}" for number in range(4)]
    runs += [
        await fleet.enqueue(session_id, f"charge {n + 1}") for n, session_id in enumerate(quick)
    ]
    for run, approval in zip(runs[:4], pending, strict=True):
        assert approval is not None
        await approve(fleet.client, run, approval.call_id, al.ApprovalAnswer.approve())
    results = [await wait_result(fleet.client, run, within=WAIT) for run in runs]

    assert [final_text(r.transcript) for r in results] == ["done: charged 500"] * 4 + [
        f"done: charged {n + 1}" for n in range(4)
    ]
    assert {r.executor_id for r in results} == {"worker-a", "worker-b"}
    assert sorted(fleet.charges()) == sorted(
        ["turn-1-charge 500"] * 4 + [f"turn-1-charge {n + 1}" for n in range(4)]
    )
    assert len(fleet.requests()) == 16


async def test_a_worker_killed_inside_a_child_agents_tool_recovers_with_it_in_doubt(
    fleet: Fleet,
) -> None:
    """The lead's tool runs the charges agent as a child (``Agent.as_tool``): the child's
    model and tool calls are DBOS steps of the lead's workflow, so the recovery replays the
    recorded ones and answers the cut charge in doubt (its claim was taken)."""
    (fleet.workdir / "hang_tool").touch()
    worker = fleet.start("worker-a")
    workflow_id = await fleet.enqueue("s-nested", "charge 5", agent="nested")
    fleet.wait_for(fleet.workdir / "tool_started", worker)
    fleet.kill(worker)
    (fleet.workdir / "hang_tool").unlink()

    fleet.start("worker-a")
    result = await wait_result(fleet.client, workflow_id, within=WAIT)

    assert final_text(result.transcript).startswith(f"lead: done: {IN_DOUBT_PREFIX} turn-1-charge")
    assert fleet.charges() == ["turn-1-charge 5"]  # the child's side effect ran once
    # The child's first model call was recorded: asked once, not again on recovery.
    assert _first_request_count(fleet) == 1
    al.transcript.validate_transcript(result.transcript)
