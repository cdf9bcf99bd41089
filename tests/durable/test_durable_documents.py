"""What crosses a DBOS step or message boundary round-trips exactly (hypothesis); run ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
from agentloop.durable.dbos import (
    ApprovalOutcome,
    ApprovalStatus,
    DurableApproval,
    run_workflow_id,
)
from agentloop.durable.dbos._agent import run_number
from agentloop.durable.dbos._steps import _output_document, _restore_output
from agentloop.testing import json_values, parts
from agentloop.tools import ToolOutput

texts = st.text(max_size=20)
seconds = st.floats(min_value=0, max_value=4e9, allow_nan=False)


def _through_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


@given(json_values())
def test_a_plain_tool_output_round_trips(value: Any) -> None:
    assert _restore_output(_through_json(_output_document(value))) == value


@given(json_values(), st.booleans(), st.dictionaries(texts, json_values(max_leaves=2)))
def test_a_tool_output_round_trips(value: Any, is_error: bool, metadata: dict[str, Any]) -> None:
    output = ToolOutput(value, is_error, metadata)
    assert _restore_output(_through_json(_output_document(output))) == output


@given(st.lists(parts(tool_parts=False), min_size=1, max_size=4))
def test_a_list_of_parts_round_trips(value: list[al.Part]) -> None:
    assert _restore_output(_through_json(_output_document(value))) == value


@given(
    st.builds(
        ApprovalOutcome,
        call_id=texts,
        tool_name=texts,
        status=st.sampled_from(ApprovalStatus),
        deadline=seconds,
        reason=st.none() | texts,
    )
)
def test_an_approval_outcome_round_trips(outcome: ApprovalOutcome) -> None:
    assert al.structure(_through_json(al.unstructure(outcome)), ApprovalOutcome) == outcome


@given(
    st.builds(
        DurableApproval,
        call_id=texts,
        tool_name=texts,
        input=json_values(),
        summary=texts,
        deadline=seconds,
    )
)
def test_a_pending_approval_round_trips(pending: DurableApproval) -> None:
    assert al.structure(_through_json(al.unstructure(pending)), DurableApproval) == pending


@given(
    st.sampled_from([al.ApprovalAnswer.approve(), al.ApprovalAnswer.deny()])
    | st.builds(al.ApprovalAnswer.approve_with, json_values())
    | st.builds(al.ApprovalAnswer.deny, texts)
)
def test_an_approval_decision_round_trips(decision: al.ApprovalAnswer) -> None:
    assert al.structure(_through_json(al.unstructure(decision)), al.ApprovalAnswer) == decision


@given(st.text(min_size=1), st.integers(min_value=1, max_value=10**12), st.text(min_size=1))
def test_a_run_id_belongs_to_its_session_only(session_id: str, run: int, other: str) -> None:
    workflow_id = run_workflow_id(session_id, run)
    assert workflow_id == f"{session_id}#{run}"
    assert run_number(session_id, workflow_id) == run
    if other != session_id:
        assert run_number(other, workflow_id) is None


@pytest.mark.parametrize(
    "workflow_id", ["s", "s#", "s#0", "s#01", "s#x", "s#1#2", "s#\u00b2", "t#1"]
)
def test_what_is_no_run_of_a_session_has_no_number(workflow_id: str) -> None:
    assert run_number("s", workflow_id) is None


@pytest.mark.parametrize(
    ("session_id", "run", "message"),
    [
        ("", 1, "session_id must be a non-empty str, got ''"),
        (None, 1, "session_id must be a non-empty str, got None"),
        ("s", 0, "run must be an int of at least 1, got 0"),
        ("s", -2, "run must be an int of at least 1, got -2"),
        ("s", True, "run must be an int of at least 1, got True"),
        ("s", 1.0, "run must be an int of at least 1, got 1.0"),
        ("s", "1", "run must be an int of at least 1, got '1'"),
    ],
)
def test_run_workflow_id_refuses_what_names_no_run(session_id: Any, run: Any, message: str) -> None:
    with pytest.raises(al.InvalidInputError, match=message):
        run_workflow_id(session_id, run)
