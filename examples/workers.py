"""Many workers, one store: worker processes advance sessions under leases; one is killed.

    python examples/workers.py                       # the demo, on a temporary SQLite file
    python examples/workers.py STORE WORKDIR         # the demo on STORE (a postgresql:// URI
                                                     # or a SQLite path); side effects in WORKDIR
    python examples/workers.py STORE WORKDIR worker OWNER [--die-in-tool]   # one worker

The demo starts ``SESSIONS`` sessions and queues input in each with
``enqueue_input`` (no agent needed), starts one worker that will die inside
its tool, SIGKILLs it there, then starts ``WORKERS`` workers. Each worker is
an ``agentloop.host.SessionWorker``: it leases the oldest ready session
(``acquire_ready``), resumes it under the lease, calls ``next()`` until the
session rests while renewing the lease, and releases it. The driver saves
every step under the lease's fencing token and claims the tool call before
it runs; the killed worker's session is taken over once its lease expires,
and its claimed call is answered in doubt, never run again.
The tool's side effect is a line in ``WORKDIR/<call id>``: the demo checks
each ran at most once and prints what every session ended with.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
import agentloop.host
import agentloop.model
import agentloop.observe
import agentloop.testing
import agentloop.tools
from agentloop.store import SessionStatus, SessionStore, SqliteSessionStore, enqueue_input
from agentloop.testing import call, tool_calls

SESSIONS = [f"job-{n}" for n in range(6)]
WORKERS = 3
TTL = 30.0
"""A live worker's lease outlives any step here, however busy the machine."""
DOOMED_TTL = 1.0
"""The worker that will be killed: its session is taken over a second later."""


class Effect:
    """A side effect (not idempotent): appends a line to ``WORKDIR/<call id>``."""

    spec = al.ToolSpec("effect", "Do the job's side effect.", {"type": "object"})

    def __init__(self, workdir: Path, owner: str, die: bool) -> None:
        self.workdir, self.owner, self.die = workdir, owner, die

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        with (self.workdir / request.call_id).open("a", encoding="utf-8") as file:
            file.write(f"{self.owner}\n")
        if self.die:  # tell the demo where we are, then wait for the SIGKILL
            (self.workdir / "entered.tmp").write_text(request.call_id)
            (self.workdir / "entered.tmp").rename(self.workdir / "entered")
            await anyio.sleep(3600)
        return f"done by {self.owner}"


def reply(request: al.model.TurnRequest) -> Any:
    """The model: one tool call per job, then a final answer (decided from the transcript)."""
    if request.transcript[-1].kind is al.ItemKind.USER:
        return tool_calls(
            call("effect", {"job": request.session_id}, id=f"call-{request.session_id}")
        )
    return "finished"


class ReportWarnings:
    """Print the driver's warnings: a call answered in doubt is reported here."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        if isinstance(event, al.observe.LoopWarning):
            print(f"{self.owner}: warning: {event.message}", flush=True)


def make_agent(store: SessionStore, workdir: Path, owner: str, die: bool = False) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(al.ToolRegistry().with_tool(Effect(workdir, owner, die)))
        .observer(ReportWarnings(owner))
        .store(store)
        .build()
    )


def open_store(target: str) -> Any:
    if target.startswith("postgresql://"):
        from agentloop.store import PostgresSessionStore

        return PostgresSessionStore(target, pool_size=1)
    return SqliteSessionStore(target)


async def all_finished(store: SessionStore) -> bool:
    for session_id in SESSIONS:
        stored = await store.load(session_id)
        if stored is None or stored.status is not SessionStatus.AWAITING_INPUT:
            return False
    return True


async def work(target: str, workdir: Path, owner: str, die: bool) -> None:
    """One worker: advance ready sessions, one lease at a time, until all finished."""
    async with open_store(target) as store:
        worker = al.host.SessionWorker(
            store=store,
            agent=make_agent(store, workdir, owner, die),
            owner=owner,
            ttl=DOOMED_TTL if die else TTL,
            poll_interval=0.05,
        )
        await worker.run(stop=lambda: all_finished(store))


def start_worker(target: str, workdir: Path, owner: str, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, target, str(workdir), "worker", owner, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def seed(target: str, workdir: Path) -> None:
    async with open_store(target) as store:
        agent = make_agent(store, workdir, "seed")
        for session_id in SESSIONS:
            await (await agent.start(session_id)).save()  # a new session, awaiting input
            # Queued without an agent (a web process could do this): the session is ready.
            await enqueue_input(
                store, session_id, [al.Item.text(al.ItemKind.USER, f"run {session_id}")]
            )


def run_fleet(target: str, workdir: Path) -> str:
    """Kill a worker inside its tool, let ``WORKERS`` others finish; the killed call id."""
    doomed = start_worker(target, workdir, "worker-doomed", "--die-in-tool")
    workers: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + 60
        while not (workdir / "entered").exists():
            if doomed.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the doomed worker never entered its tool: {doomed.communicate()}"
                )
            time.sleep(0.02)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        print(f"killed worker-doomed inside {(workdir / 'entered').read_text()}")
        workers = [start_worker(target, workdir, f"worker-{n}") for n in range(WORKERS)]
        for worker in workers:
            out, err = worker.communicate(timeout=120)
            if worker.returncode != 0:
                raise RuntimeError(f"a worker failed:\n{out}\n{err}")
            for line in out.splitlines():
                if "warning: " in line:  # e.g. the call it answered in doubt
                    print(line.split(": ", 1)[1])
    finally:
        for process in [doomed, *workers]:
            if process.poll() is None:
                process.kill()
                process.wait()
    return (workdir / "entered").read_text()


async def report(target: str, workdir: Path, killed: str) -> list[str]:
    """One line per session: how its call ended and how often its side effect ran."""
    lines = []
    async with open_store(target) as store:
        for session_id in SESSIONS:
            call_id = f"call-{session_id}"
            transcript = await store.transcript(session_id)
            assert transcript is not None
            result = next(
                part
                for item in transcript
                for part in item.parts
                if isinstance(part, al.ToolResultPart) and part.call_id == call_id
            )
            runs = (workdir / call_id).read_text().splitlines()
            assert len(runs) == 1, (call_id, runs)  # at most once; here exactly once
            assert transcript[-1].text_content == "finished"
            outcome = al.tools.result_outcome(result)
            if outcome is al.tools.ResultOutcome.IN_DOUBT:
                assert call_id == killed, (call_id, killed)
                ended = "in doubt (reported, not re-run)"
            else:
                assert result.output == f"done by {runs[0]}"
                ended = "ran once"
            lines.append(f"{session_id}: finished; {call_id} {ended}; side effect ran {len(runs)}x")
    return lines


def demo(target: str, workdir: Path) -> None:
    anyio.run(seed, target, workdir)
    killed = run_fleet(target, workdir)
    for line in anyio.run(report, target, workdir, killed):
        print(line)


def main(arguments: list[str]) -> None:
    if len(arguments) >= 4 and arguments[2] == "worker":
        target, workdir, _, owner = arguments[:4]
        anyio.run(work, target, Path(workdir), owner, "--die-in-tool" in arguments)
    elif len(arguments) == 2:
        os.makedirs(arguments[1], exist_ok=True)
        demo(arguments[0], Path(arguments[1]))
    elif not arguments:
        with tempfile.TemporaryDirectory() as directory:
            demo(str(Path(directory) / "sessions.db"), Path(directory))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
