"""A save's item check is the converter's: a save refuses exactly the items structuring refuses,
with structuring's reason, and notes the calls each item answers."""

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import CheckpointError, Item, ItemKind, structure, unstructure
from agentloop.store._codec import answered_call_ids, answered_from, encode_checkpoint
from agentloop.store._json import _ENCODER, compact, describe_error
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
        f"({describe_error(error)}); save the document driver.checkpoint() returns, unchanged"
    )


def _answers(data: dict[str, Any]) -> frozenset[str]:
    """The call ids a save notes ``data`` answers (as the last of a transcript)."""
    document = sample_checkpoint("s", [Item.text(ItemKind.USER, "hi")])
    document["transcript"].append(data)
    return answered_from(encode_checkpoint("s", document), 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=items())
def test_every_item_is_accepted_and_its_answers_noted(item: Item) -> None:
    data = _plain(item)
    assert _store_decision(data) is None
    assert _answers(data) == answered_call_ids(data) == {p.call_id for p in item.tool_results()}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=damaged())
def test_a_damaged_item_gets_the_decision_structuring_gives(data: dict[str, Any]) -> None:
    assert _store_decision(data) == _expected_decision(data)
    if _structures(data) is None:
        assert _answers(data) == answered_call_ids(data)


@settings(max_examples=300, deadline=None)
@given(value=json_values())
def test_the_prepared_encoder_writes_what_the_encoder_writes(value: Any) -> None:
    assert compact(value) == _ENCODER.encode(value)
    assert compact(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
