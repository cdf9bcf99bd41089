"""examples/workers.py runs: real LoopDrivers in worker processes, one SIGKILLed mid-tool.

On a real PostgreSQL (the embedded server of ``conftest.py``) and on SQLite:
every session finishes, every side effect ran at most once, and the killed
worker's call is reported in doubt, never run again.
"""

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workers.py"

EXPECTED = [
    "killed worker-doomed inside call-job-0",
    "warning: call call-job-0 (effect) started before the restore and has no result; "
    "answered as in doubt instead of running it again",
    "job-0: finished; call-job-0 in doubt (reported, not re-run); side effect ran 1x",
    *(f"job-{n}: finished; call-job-{n} ran once; side effect ran 1x" for n in range(1, 6)),
]


def run_example(*arguments: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE), *arguments],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


def test_the_worker_example_on_postgres(postgres_uri: str, tmp_path: Path) -> None:
    assert run_example(postgres_uri, str(tmp_path)) == EXPECTED
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["entered", *(f"call-job-{n}" for n in range(6))]
    )


def test_the_worker_example_on_sqlite(tmp_path: Path) -> None:
    assert run_example(str(tmp_path / "sessions.db"), str(tmp_path / "effects")) == EXPECTED


def test_the_worker_example_runs_without_arguments() -> None:
    assert run_example() == EXPECTED
