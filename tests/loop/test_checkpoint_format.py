"""Checkpoint documents written by the previous driver (format version 1) still restore.

``data/checkpoint_v1.json`` holds documents written by the driver before its
state core was rebuilt, each with the steps and the transcript the old driver
produced after restoring it (made by driving ``test_checkpoint``'s scripted
host). The current driver must restore each, write the same document back
(upgraded to version 2: the fields version 2 adds, at their defaults), and
continue exactly as the old one did. Version 2 turn results hold more than
version 1's (every item of the turn, the tool calls, the model calls), so a
step is compared on what version 1 wrote: a turn result's id, reason, usage,
metadata and the output of its last model call.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_checkpoint import comparable, drive, make_agent, planned_model

import agentloop as al
import agentloop.permissions
import agentloop.transcript

pytestmark = pytest.mark.anyio

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "checkpoint_v1.json").read_text()
)


def agent_for(case: dict[str, Any]) -> al.Agent:
    extra = {"permissions": al.permissions.AllowAll()} if case["allow_all"] else {}
    return make_agent(planned_model(case["rounds"]), **extra)


def upgraded(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` as the current driver writes it back (version 2, new fields at defaults)."""
    new = json.loads(json.dumps(document))
    new["version"] = 2
    new["retry_point"] = None
    new["session_tool_calls"] = 0
    new["config"]["price_table"] = None
    limits = new["config"]["limits"]
    limits.update(on_limit="limit_reached", max_tool_calls_per_turn=None)
    limits["max_tool_calls_per_session"] = None
    if new["turn"] is not None:
        new["turn"].update(items=[], tool_calls=[], model_calls_made=[], final_answer=False)
    return new


def as_version_1(step: Any) -> Any:
    """A step as version 1 wrote it: a turn result's items were its last call's output."""
    if not (isinstance(step, dict) and step.get("type") == "finished"):
        return step
    result = step["result"]
    items = result["items"]
    tail = len(items)
    while tail > 0 and items[tail - 1]["kind"] == "assistant":
        tail -= 1
    keep = {key: result[key] for key in ("turn_id", "finish_reason", "usage", "metadata")}
    return {"type": "finished", "result": {**keep, "items": items[tail:]}}


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
    assert resumed.checkpoint() == upgraded(document)
    steps = await drive(resumed, case["position"], 16)
    assert [as_version_1(_without_requests(step)) for step in steps] == case["steps"]
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


# -- version 2 (the current format) ---------------------------------------------------

V2_CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "checkpoint_v2.json").read_text()
)
POSITIONAL = [case for case in V2_CASES if "position" in case]
SPECIAL = {case["name"]: case["document"] for case in V2_CASES if "position" not in case}


def test_the_version_2_fixture_covers_every_resting_state_and_special_field() -> None:
    documents = [case["document"] for case in V2_CASES]
    assert {d["state"] for d in documents} == {"IDLE", "AWAITING_APPROVAL", "AFTER_TOOL_RESULT"}
    assert all(d["version"] == 2 for d in documents)
    assert SPECIAL["retry-point"]["retry_point"] is not None
    assert SPECIAL["queues"]["steering"]
    assert SPECIAL["queues"]["follow_ups"]
    assert SPECIAL["interrupted"]["turn"]["interrupted"] is True


@pytest.mark.parametrize("case", V2_CASES, ids=[case["name"] for case in V2_CASES])
async def test_a_version_2_document_restores_and_is_written_back_unchanged(
    case: dict[str, Any],
) -> None:
    document = case["document"]
    resumed = await agent_for({"rounds": 1, "allow_all": False, **case}).resume(document)
    assert resumed.state.value == document["state"]
    assert resumed.checkpoint() == document


@pytest.mark.parametrize("case", POSITIONAL, ids=[case["name"] for case in POSITIONAL])
async def test_a_version_2_document_continues_as_the_driver_that_wrote_it(
    case: dict[str, Any],
) -> None:
    resumed = await agent_for(case).resume(case["document"])
    assert await drive(resumed, case["position"], 16) == case["steps"]
    assert comparable(list(resumed.snapshot().transcript)) == case["transcript"]


async def test_version_2_special_documents_continue() -> None:
    retry = await agent_for({"rounds": 1, "allow_all": True}).resume(SPECIAL["retry-point"])
    assert retry.retry_point is not None
    assert (retry.retry_point.turn_id, retry.retry_point.error.status) == ("turn-1", 529)

    queued = await agent_for({"rounds": 1, "allow_all": False}).resume(SPECIAL["queues"])
    assert [m.label for m in queued.queued_steering] == ["ana"]
    assert [m.label for m in queued.queued_follow_ups] == ["the user"]

    interrupted = await agent_for({"rounds": 1, "allow_all": False}).resume(SPECIAL["interrupted"])
    step = await interrupted.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    al.transcript.validate_transcript(interrupted.snapshot().transcript)


# -- hostile documents ----------------------------------------------------------------

HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*prefix, index))
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_corrupted_field_restores_or_is_refused_with_a_checkpoint_error(
    data: st.DataObject,
) -> None:
    case = data.draw(st.sampled_from(V2_CASES), label="case")
    document = copy.deepcopy(case["document"])
    paths = _paths(document)
    path = data.draw(st.sampled_from(paths), label="path")
    action = data.draw(st.sampled_from(["replace", "delete", "extra"]), label="action")
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "replace":
        parent[last] = data.draw(HOSTILE_VALUES, label="value")
    elif action == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent["unexpected"] = 1
    agent = agent_for({"rounds": 1, "allow_all": False, **case})
    try:
        driver = anyio.run(agent.resume, document)
    except al.CheckpointError as error:
        message = str(error)
    else:
        message = ""
    if message:
        assert message.startswith("cannot restore a checkpoint")
        return
    # Accepted: it is a consistent document and writes back what was read.
    assert json.loads(json.dumps(driver.checkpoint())) == driver.checkpoint()


def _with_value_at(document: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with ``value`` as the first tool call's input in ``where``
    (``transcript`` or the turn's ``items``), or as a transcript item's metadata value."""
    copied = copy.deepcopy(document)
    if where == "metadata":
        copied["transcript"][0]["metadata"] = {"k": value}
        return copied
    items = copied["transcript"] if where == "transcript" else copied["turn"]["items"]
    part = next(p for item in items for p in item["parts"] if p["type"] == "tool_call")
    part["input"] = {"value": value}
    return copied


@pytest.mark.parametrize("where", ["transcript", "turn", "metadata"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), {1, 2}, b"x"])
def test_a_value_no_json_can_hold_is_refused_anywhere(where: str, value: Any) -> None:
    case = next(c for c in V2_CASES if c["document"]["turn"] and c["document"]["turn"]["items"])
    document = _with_value_at(case["document"], where, value)
    agent = agent_for({"rounds": 1, "allow_all": False, **case})
    with pytest.raises(al.CheckpointError, match="it is not plain JSON"):
        anyio.run(agent.resume, document)
