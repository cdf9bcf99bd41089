"""The structured-output example runs and prints what docs/output.md promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_output_modes_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "output_modes.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "tool mode: Forecast(city='Oslo', celsius=4, rain=True)",
        "  offered: ['final_answer', 'temperature']",
        "native mode: Forecast(city='Rome', celsius=19, rain=False)",
        "  feedback: Your answer did not match the output schema 'Forecast': at $.celsius: "
        "'warm' is not of type 'integer'. Answer again with only a JSON value that matches "
        "the schema.",
        "error: error (\"at $: 'celsius' is a required property\", \"at $: 'rain' is a "
        'required property")',
    ]
