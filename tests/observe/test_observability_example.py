"""examples/observability_spans.py runs and prints the span tree the docs show."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = """\
invoke_agent notes-agent  provider.name=scripted request.model=demo-1 usage.input_tokens=240 usage.output_tokens=60 usage.cache_read.input_tokens=200
  chat demo-1  provider.name=scripted request.model=demo-1 response.finish_reasons=tool_call usage.input_tokens=120 usage.output_tokens=30 usage.cache_read.input_tokens=100
  execute_tool add  tool.call.id=call-1
    * agentloop.tool.started
  execute_tool delete_note  tool.call.id=call-2
    * agentloop.approval.required
    * agentloop.approval.resolved
    * agentloop.tool.started
  chat demo-1  provider.name=scripted request.model=demo-1 response.finish_reasons=stop usage.input_tokens=120 usage.output_tokens=30 usage.cache_read.input_tokens=100
usage: 2 model calls, 240 input tokens (200 cached), 60 output tokens
"""  # noqa: E501


def test_the_example_prints_the_span_tree_and_logs_to_stderr() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "observability_spans.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED
    logged = [line.split()[1] for line in done.stderr.splitlines()]
    assert logged[:2] == ["agentloop.run_started", "agentloop.turn_started"]
    assert logged[-2:] == ["agentloop.turn_finished", "agentloop.agent_ended"]
    assert "agentloop.approval_required" in logged


def test_the_docs_show_the_examples_output() -> None:
    docs = (ROOT / "docs" / "observability.md").read_text()
    assert EXPECTED in docs
