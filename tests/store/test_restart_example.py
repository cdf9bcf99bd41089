"""examples/approval_after_restart.py: one process asks, another approves and finishes."""

import subprocess
import sys
from pathlib import Path

import anyio

from agentloop.store import SqliteSessionStore, StoredSession

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "approval_after_restart.py"

ASKED = "approval needed: publish_report {'path': '/reports/q3.txt'} (Write /reports/q3.txt)"
FIRST_PROCESS = [ASKED, "session report-q3 saved; exiting without answering"]
SECOND_PROCESS = [
    "resumed session report-q3 in state AWAITING_APPROVAL",
    ASKED,
    "answer: Done: published /reports/q3.txt.",
    "transcript:",
    "     [0] user: text 'Publish the Q3 report.'",
    '     [1] assistant: tool_call call-1 publish_report({"path": "/reports/q3.txt"})',
    "     [2] tool: tool_result call-1: 'published /reports/q3.txt'",
    "     [3] assistant: text 'Done: published /reports/q3.txt.'",
]


def run_example(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def load(path: Path) -> StoredSession | None:
    async with SqliteSessionStore(path) as store:
        return await store.load("report-q3")


def test_the_second_process_approves_what_the_first_asked(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    first = run_example("start", str(path))
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout.splitlines() == FIRST_PROCESS
    waiting = anyio.run(load, path)
    assert waiting is not None
    assert (waiting.checkpoint["state"], waiting.started_calls) == (
        "AWAITING_APPROVAL",
        frozenset(),
    )

    second = run_example("approve", str(path))
    assert (second.returncode, second.stderr) == (0, "")
    assert second.stdout.splitlines() == SECOND_PROCESS
    done = anyio.run(load, path)
    assert done is not None
    assert (done.checkpoint["state"], len(done.checkpoint["transcript"])) == ("IDLE", 4)

    again = run_example("approve", str(path))
    assert again.returncode == 1
    assert again.stdout.splitlines() == ["resumed session report-q3 in state IDLE"]
    assert again.stderr == "nothing to approve: run `start DB_PATH` first\n"


def test_without_arguments_it_runs_both_phases() -> None:
    both = run_example()
    assert (both.returncode, both.stderr) == (0, "")
    assert both.stdout.splitlines() == FIRST_PROCESS + SECOND_PROCESS
