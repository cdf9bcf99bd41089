"""Every persisted type round-trips through the converter, losslessly."""

from __future__ import annotations

import json
from typing import Any

import cattrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.model
import agentloop.observe

ids = st.text("abcdefgh-0123456789", min_size=1, max_size=8)
texts = st.text(max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
metadata = st.dictionaries(texts, json_values, max_size=2)

text_parts = st.builds(al.TextPart, texts, metadata=metadata)
simple_parts = st.one_of(
    text_parts,
    st.builds(al.ReasoningPart, texts, redacted=st.booleans(), metadata=metadata),
    st.builds(al.ToolCallPart, ids, ids, json_values, metadata=metadata),
    st.builds(al.StructuredPart, json_values, metadata=metadata),
    st.builds(al.MediaPart, texts, data=st.none() | texts, uri=st.none() | texts),
    st.builds(al.FilePart, st.none() | texts, mime_type=st.none() | texts, data=st.none() | texts),
    st.builds(al.CustomPart, texts, json_values, metadata=metadata),
)
outputs = texts | json_values | st.lists(text_parts, min_size=1, max_size=2)
parts = simple_parts | st.builds(al.ToolResultPart, ids, outputs, st.booleans(), metadata=metadata)
usages = st.builds(
    al.Usage,
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.none() | st.floats(0, 100, allow_nan=False),
)
items = st.builds(
    al.Item,
    st.sampled_from(al.ItemKind),
    st.lists(parts, max_size=3),
    id=st.none() | ids,
    metadata=metadata,
    usage=st.none() | usages,
    finish_reason=st.none() | st.sampled_from(al.FinishReason),
    created_at=st.none() | st.floats(0, 2e9, allow_nan=False),
)
turn_results = st.builds(
    al.TurnResult,
    ids,
    st.sampled_from(al.FinishReason),
    st.lists(items, max_size=2),
    st.none() | usages,
    metadata,
)
deltas = st.one_of(
    st.builds(al.BeginPart, ids, st.sampled_from(al.PartKind)),
    st.builds(al.AppendText, ids, texts),
    st.builds(al.CommitPart, ids, simple_parts),
)
events = st.one_of(
    st.builds(al.observe.RunStarted, ids),
    st.builds(al.observe.TurnStarted, ids, ids),
    st.builds(al.observe.InputAccepted, ids, st.lists(items, max_size=2)),
    st.builds(al.observe.ContentDelta, deltas),
    st.builds(
        al.observe.ToolResultReceived, st.builds(al.ToolResultPart, ids, outputs, st.booleans())
    ),
    st.builds(al.observe.ApprovalAnswered, ids, st.booleans(), st.booleans()),
    st.builds(al.observe.ToolCatalogChanged, ids, st.lists(ids).map(tuple)),
    st.builds(al.observe.MutationFinished, ids, st.none() | ids, ids, ids, st.booleans(), metadata),
    st.builds(al.observe.UsageUpdated, usages),
    st.builds(al.observe.LoopWarning, texts),
    st.builds(al.observe.TurnFinished, turn_results),
)
breakpoints = st.one_of(
    st.builds(al.model.AfterTools),
    st.builds(al.model.AfterItem, st.integers(0, 9)),
    st.builds(al.model.AfterPart, st.integers(0, 9), st.integers(0, 9)),
)
caches = st.builds(
    al.model.PromptCacheRequest,
    st.sampled_from(al.model.PromptCacheMode),
    st.builds(al.model.AutomaticCache)
    | st.builds(al.model.ExplicitCache, st.lists(breakpoints, max_size=3)),
    st.none() | st.sampled_from(al.model.PromptCacheRetention),
    st.none() | ids,
)


def roundtrip(value: Any, cls: Any) -> Any:
    data = al.unstructure(value)
    text = json.dumps(data)  # really JSON-compatible
    return al.structure(json.loads(text), cls)


@settings(max_examples=150)
@given(items)
def test_items_roundtrip(item: al.Item) -> None:
    assert roundtrip(item, al.Item) == item


@settings(max_examples=100)
@given(events)
def test_events_roundtrip(event: al.observe.AgentEvent) -> None:
    assert roundtrip(event, al.observe.AgentEvent) == event


@settings(max_examples=50)
@given(turn_results)
def test_turn_results_roundtrip(result: al.TurnResult) -> None:
    assert roundtrip(result, al.TurnResult) == result
    assert roundtrip(al.Finished(result), al.Step) == al.Finished(result)


@settings(max_examples=50)
@given(ids, st.lists(items, max_size=3), st.lists(items, max_size=2))
def test_snapshots_roundtrip(
    session: str, transcript: list[al.Item], pending: list[al.Item]
) -> None:
    snapshot = al.LoopSnapshot(session, transcript, pending)
    assert roundtrip(snapshot, al.LoopSnapshot) == snapshot


@settings(max_examples=50)
@given(caches)
def test_session_configs_roundtrip(cache: al.model.PromptCacheRequest) -> None:
    config = al.SessionConfig("s", cache=cache, limits=al.LoopLimits(tool_timeout=2.5))
    assert roundtrip(config, al.SessionConfig) == config


def test_tool_result_outputs_keep_their_kind() -> None:
    text = al.ToolResultPart("c", "[1]")
    structured = al.ToolResultPart("c", [1])
    parts = al.ToolResultPart("c", [al.TextPart("x")])
    assert al.unstructure(text)["output_type"] == "text"
    assert al.unstructure(structured)["output_type"] == "json"
    assert al.unstructure(parts)["output"] == [{"type": "text", "text": "x", "metadata": {}}]
    for part in (text, structured, parts):
        assert roundtrip(part, al.Part) == part


def test_enums_unstructure_to_plain_strings() -> None:
    data = al.unstructure(al.Item.text(al.ItemKind.USER, "x"))
    assert type(data["kind"]) is str
    assert data["kind"] == "user"


def test_interrupts_serialize_without_their_driver() -> None:
    request = al.ApprovalRequest(
        "c1", "echo", {"a": 1}, "filesystem.read", "sensitive_path", "Read /x", "approval:c1", "t1"
    )
    data = al.unstructure(request)
    assert data["type"] == "approval_request"
    assert "driver" not in data
    restored = al.structure(data, al.Step)
    assert restored == request
    with pytest.raises(al.InvalidStateError, match="not bound to a driver"):
        restored.approve()


def test_bad_documents_are_rejected() -> None:
    with pytest.raises(cattrs.BaseValidationError):
        al.structure({"kind": "user", "parts": [{"type": "nope"}]}, al.Item)
    with pytest.raises(cattrs.BaseValidationError):
        al.structure({"kind": "user", "parts": [], "surprise": 1}, al.Item)
