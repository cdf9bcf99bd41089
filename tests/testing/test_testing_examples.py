"""The docs/testing.md examples run (as scripts) and their tests pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "testing_compaction.py": "compaction: both properties hold",
    "testing_cursor.py": "cursor: writes go through the cursor; both errors raised",
    "testing_permissions.py": "permissions: the policy holds under random host actions",
    "testing_replay.py": "replay: the recording replays; a drift shows the diff",
    "testing_store.py": "store: the suite passes on asyncio and trio",
    "testing_task_manager.py": "task manager: every call answered once, nothing left running",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_testing_example_runs(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == EXAMPLES[name]


def test_docs_show_the_examples_verbatim() -> None:
    doc = (ROOT / "docs" / "testing.md").read_text()
    for name in EXAMPLES:
        source = (ROOT / "examples" / name).read_text()
        body = source.split('if __name__ == "__main__":')[0].strip()
        assert body in doc, f"docs/testing.md is out of date with examples/{name}"
