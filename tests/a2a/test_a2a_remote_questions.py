"""What a remote input-required status asks, as questions (pure functions): any text and
any data parts give valid questions whose data is bounded JSON, and each accepted answer
gives the parts sent back; an approval's answer always names its call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.a2a import APPROVAL_ANSWER_SCHEMA, APPROVAL_KIND, INPUT_KIND
from agentloop.a2a._remote_questions import (
    MAX_APPROVALS,
    Asked,
    answer_parts,
    asked_of,
    question_for,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
approvals = st.fixed_dictionaries(
    {"callId": st.text(min_size=1, max_size=300)},
    optional={"toolName": json_values, "input": json_values, "reason": json_values},
)
data_parts = st.lists(
    st.one_of(
        json_values,
        st.fixed_dictionaries({"approvals": st.lists(approvals | json_values, max_size=4)}),
    ),
    max_size=3,
)
WHERE = {"agent": "http://remote.test", "taskId": "t-1", "contextId": "c-1"}


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=5_000), parts=data_parts)
def test_any_status_gives_valid_questions_and_answers(text: str, parts: list[Any]) -> None:
    listed = [
        a for d in parts if isinstance(d, dict) and isinstance(d.get("approvals"), list)
        for a in d["approvals"] if isinstance(a, dict) and isinstance(a.get("callId"), str)
    ]  # fmt: skip
    asked = asked_of(text, parts)
    assert len(asked) == max(len(listed), 1)
    if listed:
        assert [one.approval["callId"] for one in asked if one.approval] == [
            a["callId"] for a in listed
        ]
    for one in asked:
        question = question_for(
            one, agent="http://remote.test", text=text, data_parts=parts, where=WHERE
        )
        json.dumps(question.data)
        assert Asked.from_json(json.loads(json.dumps(one.to_json()))) == one
        assert {k: question.data[k] for k in WHERE} == WHERE
        assert len(question.message) < 5_000
        if one.approval is None:
            assert question.kind == INPUT_KIND
            sent = answer_parts(one, al.QuestionAnswer.accept({"text": "x", "data": {"a": 1}}))
            assert sent == [{"text": "x"}, {"data": {"a": 1}}]
        else:
            assert (question.kind, question.schema) == (APPROVAL_KIND, APPROVAL_ANSWER_SCHEMA)
            sent = answer_parts(one, al.QuestionAnswer.accept({"approved": False, "reason": "r"}))
            call_id = one.approval["callId"]
            assert sent == [{"data": {"callId": call_id, "approved": False, "reason": "r"}}]


def test_more_approvals_than_the_bound_are_refused() -> None:
    many = [{"approvals": [{"callId": f"c{n}"} for n in range(MAX_APPROVALS + 1)]}]
    with pytest.raises(ValueError, match="approvals at once") as raised:
        asked_of("", many)
    assert str(raised.value) == (
        "the remote task asks for 51 approvals at once (at most 50 are asked)"
    )
