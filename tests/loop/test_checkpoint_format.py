"""Checkpoint documents written by the previous driver (format version 1) still restore.

``data/checkpoint_v1.json`` holds documents written by the driver before its
state core was rebuilt, each with the steps and the transcript the old driver
produced after restoring it (made by driving ``test_checkpoint``'s scripted
host). The current driver must restore each, write the same document back, and
continue exactly as the old one did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_checkpoint import comparable, drive, make_agent, planned_model

import agentloop as al

pytestmark = pytest.mark.anyio

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "checkpoint_v1.json").read_text()
)


def agent_for(case: dict[str, Any]) -> al.Agent:
    extra = {"permissions": al.AllowAll()} if case["allow_all"] else {}
    return make_agent(planned_model(case["rounds"]), **extra)


def test_the_fixture_covers_every_resting_state() -> None:
    assert {case["document"]["state"] for case in CASES} == {
        "IDLE",
        "AWAITING_APPROVAL",
        "AFTER_TOOL_RESULT",
    }
    statuses = {
        (call["status"], call["surfaced"], call["decision"] is not None)
        for case in CASES
        if case["document"]["turn"] and case["document"]["turn"]["round"]
        for call in case["document"]["turn"]["round"]["calls"]
    }
    assert ("awaiting_approval", False, False) in statuses  # not shown yet
    assert ("awaiting_approval", True, True) in statuses  # answered, next() not called


@pytest.mark.parametrize(
    "case", CASES, ids=[f"r{c['rounds']}-p{c['position']}-{c['document']['state']}" for c in CASES]
)
async def test_a_version_1_document_restores_and_continues_as_before(case: dict[str, Any]) -> None:
    document = case["document"]
    assert document["version"] == 1
    resumed = await agent_for(case).resume(document)
    assert resumed.state.value == document["state"]
    assert resumed.checkpoint() == document
    steps = await drive(resumed, case["position"], 16)
    assert [_without_requests(step) for step in steps] == case["steps"]
    assert comparable(list(resumed.snapshot().transcript)) == case["transcript"]


def _without_requests(step: dict[str, Any]) -> dict[str, Any]:
    """A step as the old driver wrote it: approvals now also list their requests (one here,
    the same as the approval's own kind, summary and reason)."""
    if step.get("type") != "approval_request" or "requests" not in step:
        return step
    rest = {key: value for key, value in step.items() if key != "requests"}
    assert [(r["kind"], r["summary"], r["reason"]) for r in step["requests"]] == [
        (step["request_kind"], step["summary"], step["reason"])
    ]
    return rest
