"""A save's item check: the fast path for the usual shapes decides exactly as structuring does."""

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import CheckpointError, Item, ItemKind, structure, unstructure
from agentloop.store._documents import (
    _ENCODER,
    _encode,
    answered_call_ids,
    describe_item_error,
    encode_checkpoint,
)
from agentloop.store._item_check import usual_item_answers
from agentloop.testing import items, json_values
from agentloop.testing.store_conformance import sample_checkpoint

ITEM_KEYS = ["kind", "parts", "id", "metadata", "usage", "finish_reason", "created_at"]
PART_KEYS = ["type", "text", "id", "name", "input", "call_id", "output_type", "output"]
PART_KEYS += ["is_error", "metadata", "redacted", "value"]
USAGE_KEYS = ["input_tokens", "output_tokens", "reasoning_tokens", "cost", "cache_read_tokens"]
ODD_VALUES = st.sampled_from(
    [
        *(None, True, False, 0, 1, -1, 1.5, 2**70, [], {}, [1], {"a": 1}, ["x"]),
        *("", "text", "user", "tool_call", "tool_result", "json", "parts", "stop"),
    ]
).map(copy.deepcopy)  # a fresh container each time: the tests change what they draw
VALUES = ODD_VALUES | json_values()


def _plain(item: Item) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(unstructure(item)))
    return data


def _structures(data: Any) -> Exception | None:
    try:
        structure(data, Item)
    except Exception as error:
        return error
    return None


@st.composite
def damaged(draw: st.DrawFn) -> dict[str, Any]:
    """A valid item's data with one to three changes: keys dropped, added or given odd values."""
    data = _plain(draw(items()))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["item", "part", "usage", "parts"]))
        target: Any = data
        keys = ITEM_KEYS
        if where == "part" and isinstance(data.get("parts"), list) and data["parts"]:
            target = draw(st.sampled_from(data["parts"]))
            keys = PART_KEYS
        elif where == "usage" and isinstance(data.get("usage"), dict):
            target, keys = data["usage"], USAGE_KEYS
        elif where == "parts" and isinstance(data.get("parts"), list):
            data["parts"].append(draw(ODD_VALUES | st.builds(dict)))
            continue
        if not isinstance(target, dict):
            continue
        action = draw(st.sampled_from(["drop", "set", "extra"]))
        if action == "drop" and target:
            del target[draw(st.sampled_from(sorted(target)))]
        elif action == "set":
            target[draw(st.sampled_from(keys))] = draw(VALUES)
        else:
            target[draw(st.sampled_from(["extra", "Kind", "types"]))] = draw(VALUES)
    return data


def _store_decision(data: dict[str, Any]) -> str | None:
    """What a save says about a transcript ending with ``data``: ``None`` or the refusal."""
    document = sample_checkpoint("s", [Item.text(ItemKind.USER, "hi")])
    document["transcript"].append(data)
    try:
        encode_checkpoint("s", document)
    except CheckpointError as error:
        return str(error)
    return None


def _expected_decision(data: dict[str, Any]) -> str | None:
    error = _structures(data)
    if error is None:
        return None
    return (
        "cannot save checkpoint for session 's': transcript item 1 is not an agentloop item "
        f"({describe_item_error(error)}); save the document driver.checkpoint() returns, unchanged"
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=items())
def test_every_item_the_fast_path_decides_structures_and_answers_the_same(item: Item) -> None:
    data = _plain(item)
    found = usual_item_answers(data)
    if found is not None:
        assert _structures(data) is None
        assert found == answered_call_ids((data,))
    assert _store_decision(data) is None


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=damaged())
def test_a_damaged_item_gets_the_decision_structuring_gives(data: dict[str, Any]) -> None:
    found = usual_item_answers(data)
    if found is not None:
        assert _structures(data) is None
        assert found == answered_call_ids((data,))
    assert _store_decision(data) == _expected_decision(data)


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "user", "parts": [{"type": "text", "text": "hi", "metadata": {}}]},
        {"kind": "user", "parts": [{"type": "text", "text": "hi"}], "id": "i", "created_at": 1},
        {
            "kind": "assistant",
            "parts": [{"type": "tool_call", "id": "c", "name": "f", "input": {"a": [1]}}],
            "finish_reason": "tool_call",
            "usage": {"input_tokens": 3, "output_tokens": 4, "cost": 0.5},
            "metadata": {"k": "v"},
            "created_at": 1.5,
        },
        {
            "kind": "tool",
            "parts": [
                {"type": "tool_result", "call_id": "c", "output_type": "text", "output": "ok"},
                {"type": "tool_result", "call_id": "d", "output_type": "json", "output": None},
            ],
        },
    ],
)
def test_the_usual_shapes_take_the_fast_path(data: dict[str, Any]) -> None:
    assert _structures(data) is None
    assert usual_item_answers(data) == answered_call_ids((data,))


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "user", "parts": [{"type": "text", "text": 5}]},  # structuring converts: str(5)
        {"kind": "user", "parts": [{"type": "media", "mime_type": "image/png"}]},
        {"kind": "user", "parts": [{"type": "text", "text": "a"}], "usage": {"cost": True}},
        {"kind": ["user"], "parts": []},
        {"kind": "user", "parts": [], "finish_reason": {"a": 1}},
        {"kind": "user", "parts": [], "extra": 1},
        {"kind": "tool", "parts": [{"type": "tool_result", "call_id": "c", "output_type": "text"}]},
        {"kind": "user", "parts": ({"type": "text", "text": "a"},)},
    ],
)
def test_other_shapes_are_left_to_structuring(data: dict[str, Any]) -> None:
    assert usual_item_answers(data) is None


@settings(max_examples=300, deadline=None)
@given(value=json_values())
def test_the_prepared_encoder_writes_what_the_encoder_writes(value: Any) -> None:
    assert _encode(value) == _ENCODER.encode(value)
    assert _encode(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
