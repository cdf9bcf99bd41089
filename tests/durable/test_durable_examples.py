"""examples/durable_plain.py and examples/durable_dbos.py run the same agent to the same end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAME = [
    "approval: refund 250",
    "answer: Done: refunded 250 on A-17",
    "answer: Done: refunded 40 on A-18",
    "ledger: A-17 refunded 250; A-18 refunded 40",
]


def _run(name: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "[info" not in line]


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("durable_plain.py", []),
        (
            "durable_dbos.py",
            ["runs: ['customer-42#1', 'customer-42#2']", "approvals: ['approved']"],
        ),
    ],
)
def test_durable_example_runs(name: str, extra: list[str]) -> None:
    assert _run(name) == SAME + extra
