"""The scripted demo runs and tells the truth about what it did."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_scripted_demo_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "scripted_demo.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "the model is a ScriptedModel, not a real LLM" in out
    assert "step: ApprovalRequest read_note 'Read /notes/groceries'" in out
    assert "[event] ToolResultReceived: call-1 -> '42'" in out
    assert "answer: 2 + 40 = 42, and the groceries note says: eggs, flour, milk." in out
    assert "transcript: 7 items, every tool call answered" in out
