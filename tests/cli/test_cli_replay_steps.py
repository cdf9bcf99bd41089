"""`agentloop replay --steps` lists a stored session's saved steps; `--step N` renders one."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import console, lines
from test_cli_replay_decisions import APPROVED_WITH_EDIT, START, park

from agentloop.cli import main


def replay(*arguments: str) -> tuple[int, list[str]]:
    target, buffer = console()
    status = main(["replay", *arguments], console=target)
    return status, lines(buffer)


def without_times(line: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "TIME", line)


def test_steps_lists_every_saved_step_and_step_renders_one(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    park(database, decide=APPROVED_WITH_EDIT, resume=True)
    status, out = replay(str(database), "--steps")
    assert status == 0
    assert [without_times(line) for line in out] == [
        "the steps of session 's1'",
        "step 1  TIME  idle  0 items  queued user: publish the report",
        "step 2  TIME  after_tool_result  2 items  assistant: calls publish_report",
        "step 3  TIME  awaiting_approval  2 items  assistant: calls publish_report",
        "step 4  TIME  after_tool_result  3 items  tool: result of call-1",
        "step 5  TIME  idle  4 items  assistant: Done: published /reports/final.txt",
    ]
    status, out = replay(str(database), "--step", "3")
    assert status == 0
    assert out == [
        "replaying session 's1' as saved at step 3",
        *START,
        "waiting for approval of call call-1 (publish_report)",  # as it was at step 3
    ]


def test_a_step_the_store_does_not_keep_is_refused_naming_the_kept_ones(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    park(database)
    status, out = replay(str(database), "--step", "9")
    assert status == 2
    assert out == [
        f"agentloop replay: cannot read the session store {str(database)!r}: cannot load step 9 "
        "of session 's1': the store keeps steps 1 to 3 of it; pick one that history() lists "
        "(a store keeps the last history_limit steps)"
    ]


def test_steps_of_a_jsonl_transcript_are_refused(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    status, out = replay(str(transcript), "--steps")
    assert status == 2
    assert out == [
        f"agentloop replay: --steps and --step are for a session store; {str(transcript)!r} is "
        "a JSONL transcript (it keeps no steps)"
    ]
