"""The fleet soak of issue 33, trimmed: ``scripts/soak_fleet.py`` as a subprocess.

3 worker processes (``SessionWorker.run``) advance 8 sessions of 2 turns on
SQLite and on the real PostgreSQL of ``conftest.py`` while, for 10 s, a worker
is SIGKILLed every 1-2 s and one is SIGSTOPped past its 1 s lease now and
then; two approvers race on the inbox, a feeder queues each next message with
``enqueue_input``. The script exits 0 only when every invariant held; the
test checks that and the figures it printed: every session finished, no call
ran twice or unapproved, no input lost, no session stranded, every decision
had one winner. The script runs in a session of its own, killed whole (its
workers with it) if it outlives its bound.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak_fleet.py"
SOAK = ["--sessions", "8", "--workers", "3", "--turns", "2", "--seconds", "10"]
SOAK += ["--kill-every", "1-2", "--stop-every", "2-4", "--drain-timeout", "20", "--seed", "33"]
ZERO = (
    "double runs",
    "unapproved runs",
    "denied calls that ran",
    "runs of calls no transcript answers",
    "answered as run, but no run",
    "fenced writes after a takeover",
    "lost input",
    "input answered twice",
    "stranded sessions",
    "consistency problems seen during the run",
    "consistency problems at the end",
    "decisions without exactly one winner",
    "inbox queries failed",
    "transfers not answered as decided",
    "invalid transcripts",
    "workers that exited unkilled",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the soak runs in its own processes: one backend here is enough


def parse(output: str) -> dict[str, str]:
    figures = {}
    for line in output.splitlines():
        name, colon, value = line.strip().partition(": ")
        if line.startswith("  ") and colon:
            figures[name.rstrip(":")] = value.strip()
    return figures


async def run_soak(workdir: Path, *arguments: str) -> tuple[int, str]:
    """Run the script (at most 60 s); its exit code and output. Its process group dies after."""
    out = workdir.parent / f"{workdir.name}.out"
    with out.open("wb") as file:
        process = await anyio.open_process(
            [sys.executable, str(SCRIPT), *SOAK, "--workdir", str(workdir), *arguments],
            stdout=file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])},
        )
    try:
        with anyio.fail_after(60):
            code = await process.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the script, and any worker it left
        with anyio.CancelScope(shield=True):
            await process.wait()
    return code, out.read_text()


def check(code: int, output: str, backend: str) -> None:
    assert code == 0, output
    assert output.rstrip().endswith("invariants: all hold"), output
    figures = parse(output)
    assert output.startswith(f"soak_fleet: backend {backend}, 8 sessions x 2 turns, 3 workers")
    assert figures["sessions"] == "8"
    assert figures["sessions finished"].startswith("8 ("), output
    assert figures["turns answered"] == "16 (planned 16)", output
    assert figures["input queued"] == "16", output
    for name in ZERO:
        assert figures[name] == "0", (name, output)
    assert int(figures["kills"].split()[0]) >= 4, output
    assert int(figures["stops"].split()[0]) >= 1, output
    assert int(figures["side-effect runs"]) > 0, output
    assert figures["drained in"] != "not drained", output


async def test_a_sqlite_fleet_soak_finishes_every_session(tmp_path: Path) -> None:
    code, output = await run_soak(tmp_path / "soak", "--backend", "sqlite")
    check(code, output, "sqlite")


async def test_a_postgres_fleet_soak_finishes_every_session(
    tmp_path: Path, new_postgres_schema: Callable[[], str]
) -> None:
    url = new_postgres_schema()
    code, output = await run_soak(tmp_path / "soak", "--backend", "postgres", "--url", url)
    check(code, output, "postgres")


async def test_a_redis_fleet_soak_finishes_every_session(
    tmp_path: Path, redis_server: str, redis_prefix: str
) -> None:
    url = f"{redis_server}#{redis_prefix}"
    code, output = await run_soak(tmp_path / "soak", "--backend", "redis", "--url", url)
    check(code, output, "redis")
