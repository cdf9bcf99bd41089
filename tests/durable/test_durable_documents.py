"""What crosses a DBOS step or message boundary round-trips exactly (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
from agentloop.durable.dbos import ApprovalOutcome, ApprovalStatus, PendingApproval
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
        PendingApproval,
        call_id=texts,
        tool_name=texts,
        input=json_values(),
        summary=texts,
        deadline=seconds,
    )
)
def test_a_pending_approval_round_trips(pending: PendingApproval) -> None:
    assert al.structure(_through_json(al.unstructure(pending)), PendingApproval) == pending


@given(
    st.sampled_from([al.ApprovalAnswer.approve(), al.ApprovalAnswer.deny()])
    | st.builds(al.ApprovalAnswer.approve_with, json_values())
    | st.builds(al.ApprovalAnswer.deny, texts)
)
def test_an_approval_decision_round_trips(decision: al.ApprovalAnswer) -> None:
    assert al.structure(_through_json(al.unstructure(decision)), al.ApprovalAnswer) == decision
