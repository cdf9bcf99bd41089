"""The pure helpers of the store protocol: a document's status, a call's input digest."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop import InvalidInputError
from agentloop.loop._session_store import summarize
from agentloop.store import SessionStatus, input_digest

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _round(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "round": {
            "calls": [{"call": {"id": call_id}, "status": status} for call_id, status in calls]
        }
    }


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, (SessionStatus.AWAITING_INPUT, ())),
        ({"state": "IDLE"}, (SessionStatus.AWAITING_INPUT, ())),
        ({"state": "IDLE", "pending_input": [{}]}, (SessionStatus.READY, ())),
        ({"state": "IDLE", "steering": [{}]}, (SessionStatus.READY, ())),
        ({"state": "IDLE", "follow_ups": [{}]}, (SessionStatus.READY, ())),
        ({"state": "AFTER_TOOL_RESULT"}, (SessionStatus.READY, ())),
        (
            {
                "state": "AWAITING_APPROVAL",
                "turn": _round(
                    ("a", "awaiting_approval"), ("b", "done"), ("c", "awaiting_approval")
                ),
            },
            (SessionStatus.AWAITING_APPROVAL, ("a", "c")),
        ),
        ({"state": "AWAITING_APPROVAL", "turn": None}, (SessionStatus.AWAITING_APPROVAL, ())),
        (
            {"state": "AWAITING_APPROVAL", "turn": {"round": "x"}},
            (SessionStatus.AWAITING_APPROVAL, ()),
        ),
        (
            {"state": "AWAITING_APPROVAL", "turn": {"round": {"calls": [3, {"call": 4}]}}},
            (SessionStatus.AWAITING_APPROVAL, ()),
        ),
        ({"state": "FAILED", "pending_input": [{}]}, (SessionStatus.AWAITING_INPUT, ())),
        (
            {
                "state": "AWAITING_ANSWER",
                "turn": {
                    "round": {
                        "calls": [
                            {"question": None},
                            {"question": {"id": "question:b:1", "question": {"kind": "k"}}},
                            {"question": {"id": 4, "question": {}}},
                            {"question": {"id": "question:d:2", "question": "x"}},
                        ]
                    }
                },
            },
            (SessionStatus.AWAITING_ANSWER, ("question:b:1",)),
        ),
        ({"state": "AWAITING_ANSWER", "turn": None}, (SessionStatus.AWAITING_ANSWER, ())),
    ],
)
def test_a_documents_status(document: dict[str, Any], expected: object) -> None:
    assert summarize(document) == expected


@given(document=st.dictionaries(st.text(), json_values))
def test_summarize_never_raises(document: dict[str, Any]) -> None:
    status, pending = summarize(document)
    assert isinstance(status, SessionStatus)
    assert all(isinstance(call_id, str) for call_id in pending)


@given(value=st.dictionaries(st.text(), json_values, max_size=6))
def test_the_digest_ignores_key_order_and_binds_name_and_input(value: dict[str, Any]) -> None:
    reordered = dict(reversed(list(value.items())))
    digest = input_digest("pay", value)
    assert digest == input_digest("pay", reordered)
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64
    assert digest != input_digest("refund", value)
    assert digest != input_digest("pay", {**value, "\x00extra": 1})


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), {1: "x"}, [{"a": {None: 1}}], {"a": {1, 2}}, object()]
)
def test_a_digest_of_non_json_input_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError) as raised:
        input_digest("pay", bad)
    assert str(raised.value).startswith("cannot digest the input of tool 'pay': ")
    assert str(raised.value).endswith("; pass JSON values")
