"""docs/compaction.md's snippets run; the examples run and print what they claim;
the public surface of agentloop.compaction is explicit and documented."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import agentloop.compaction

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compaction.md"


def test_the_compaction_docs_snippets_run() -> None:
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(snippets) == 4
    namespace: dict[str, object] = {"__name__": "compaction_docs"}
    for number, snippet in enumerate(snippets, start=1):
        exec(compile(snippet, f"docs/compaction.md snippet {number}", "exec"), namespace)
    assert "kept" in namespace


def run_example(name: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    # structlog's default output (the library never configures logging) is interleaved
    return [line for line in done.stdout.splitlines() if not re.match(r"^\d{4}-\d\d-\d\d ", line)]


def test_the_session_example_stays_under_budget_with_a_stable_prefix() -> None:
    lines = run_example("compaction_session.py")
    assert lines[0] == "requests: 120, largest ~7549 tokens (budget 8000)"
    assert lines[1] == "compactions: 18"
    assert lines[2] == "requests that extend the previous one (cacheable prefix): 101 of 119"
    assert lines[3].startswith("first: compaction compacted at after_turn_ended (token_budget:")
    assert lines[4] == "every request valid, the system prompt first: True"


def test_the_pipeline_example_summarizes_and_passes_its_property() -> None:
    lines = run_example("compaction_pipeline.py")
    assert lines == [
        "  system: Be brief.",
        "  context: Summary of the earlier conversation (written by compaction):",
        "The user and the assistant talked about the weather.",
        "  user: question 7",
        "  assistant: reply 9",
        "  user: question 8",
        "  assistant: reply 11",
        "  user: question 9",
        "reports: ['compacted', 'compacted']",
        "property: every generated transcript stays valid",
    ]


def test_the_public_surface_is_sorted_importable_and_documented() -> None:
    names = agentloop.compaction.__all__

    def order(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(names) == sorted(names, key=order)
    assert len(set(names)) == len(names)
    undocumented = [
        name
        for name in names
        if isinstance(value := getattr(agentloop.compaction, name), type)
        or inspect.isfunction(value)
        if not value.__doc__
    ]
    assert undocumented == []
    doc = DOC.read_text(encoding="utf-8")
    for name in (
        "Compactor",
        "KeepRecent",
        "DropFailedResults",
        "TrimLargeOutputs",
        "SummarizeOlder",
        "CompactionPipeline",
        "TokenBudgetTrigger",
        "ItemCountTrigger",
        "ContextOverflowTrigger",
        "read_result_tool",
        "SqliteResultArchive",
        "CompactionOutcome",
        "default_compactor",
    ):
        assert f"`{name}" in doc, name
