"""Model output admission: assistant items only, repeated ids renamed, provider ids sent back."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop import (
    FinishReason,
    Item,
    ItemKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import ModelTurnResult
from agentloop.model._admission import PROVIDER_CALL_ID_KEY, AdmittedOutput, admit_model_output
from agentloop.providers import (
    AnthropicModel,
    GeminiModel,
    ModelProtocolError,
    OpenAIChatModel,
    ProviderErrorKind,
)

from . import _openai_streams as openai_streams
from ._helpers import WEATHER, collect, turn, user
from ._server import ReplayServer, sse

IDS = st.sampled_from(["call_0", "call_1", "call_2", "call_0_2", "t"])

call_parts = st.builds(
    ToolCallPart, IDS, st.sampled_from(["a", "b"]), st.just({}), metadata=st.just({})
)
other_parts = st.sampled_from([TextPart("hi"), ReasoningPart("hmm")])
assistant_items = st.builds(
    lambda parts: Item(ItemKind.ASSISTANT, tuple(parts)),
    st.lists(call_parts | other_parts, max_size=5),
)


def call_ids(items: tuple[Item, ...] | list[Item]) -> list[str]:
    return [part.id for item in items for part in item.parts if isinstance(part, ToolCallPart)]


@given(st.lists(assistant_items, max_size=3), st.sets(IDS))
def test_admitted_ids_never_repeat_an_earlier_round_and_keep_the_provider_id(
    items: list[Item], known: set[str]
) -> None:
    admitted = admit_model_output(items, known)
    before, after = call_ids(items), call_ids(admitted.items)
    assert len(after) == len(before)
    assert not set(after) & known
    # the duplicate structure within the response is unchanged ...
    assert sorted(Counter(before).values()) == sorted(Counter(after).values())
    assert admitted.duplicate_call_ids == {i for i, n in Counter(after).items() if n > 1}
    # ... and every renamed call remembers the provider's id
    for old, new in zip(before, after, strict=True):
        if old in known:
            assert admitted.renamed[new] == old
        else:
            assert new == old
    calls = [p for item in admitted.items for p in item.parts if isinstance(p, ToolCallPart)]
    for call in calls:
        if call.id in admitted.renamed:
            assert call.metadata == {PROVIDER_CALL_ID_KEY: admitted.renamed[call.id]}
        else:
            assert call.metadata == {}
    # nothing but ids changed
    strip = [[(type(p), getattr(p, "name", None)) for p in item.parts] for item in admitted.items]
    assert strip == [[(type(p), getattr(p, "name", None)) for p in item.parts] for item in items]


def test_a_repeated_id_is_renamed_deterministically() -> None:
    items = [
        Item(
            ItemKind.ASSISTANT,
            (
                TextPart("two lookups"),
                ToolCallPart("call_0", "a", {"x": 1}),
                ToolCallPart("call_1", "b", {}),
            ),
        )
    ]
    admitted = admit_model_output(items, {"call_0", "call_0_2"})
    assert admitted == AdmittedOutput(
        items=(
            Item(
                ItemKind.ASSISTANT,
                (
                    TextPart("two lookups"),
                    ToolCallPart(
                        "call_0_3", "a", {"x": 1}, metadata={PROVIDER_CALL_ID_KEY: "call_0"}
                    ),
                    ToolCallPart("call_1", "b", {}),
                ),
            ),
        ),
        renamed={"call_0_3": "call_0"},
        duplicate_call_ids=frozenset(),
    )


def test_a_duplicate_within_one_response_is_reported_not_renamed() -> None:
    items = [Item(ItemKind.ASSISTANT, (ToolCallPart("c", "a", {}), ToolCallPart("c", "b", {})))]
    admitted = admit_model_output(items, set())
    assert admitted.items == tuple(items)
    assert admitted.duplicate_call_ids == {"c"}
    assert admitted.renamed == {}


def test_an_unchanged_output_is_returned_as_is() -> None:
    items = [Item(ItemKind.ASSISTANT, (TextPart("hi"),))]
    assert admit_model_output(items, {"x"}) == AdmittedOutput(items=tuple(items))
    assert admit_model_output([], set()) == AdmittedOutput(items=())


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            Item(ItemKind.TOOL, (ToolResultPart("c", "42"),)),
            "model output item 1 is a tool item; a model may only add assistant items (text, "
            "reasoning, tool calls), never tool items: the model adapter broke the protocol",
        ),
        (
            Item.text(ItemKind.USER, "I am the user now"),
            "model output item 1 is a user item; a model may only add assistant items (text, "
            "reasoning, tool calls), never user items: the model adapter broke the protocol",
        ),
        (
            Item.text(ItemKind.SYSTEM, "new rules"),
            "model output item 1 is a system item; a model may only add assistant items (text, "
            "reasoning, tool calls), never system items: the model adapter broke the protocol",
        ),
        (
            Item(ItemKind.ASSISTANT, (ToolResultPart("c", "42"),)),
            "model output item 1 (assistant) part 0 is a ToolResultPart; a model may only "
            "produce text, reasoning, structured, media, file, custom and tool-call parts",
        ),
        (
            "text",
            "model output item 1 is a str, not an Item; a model adapter must produce "
            "assistant Items",
        ),
    ],
)
def test_non_assistant_output_is_a_protocol_error(item: Any, message: str) -> None:
    ok = Item.text(ItemKind.ASSISTANT, "fine")
    with pytest.raises(ModelProtocolError) as caught:
        admit_model_output([ok, item], set())
    assert str(caught.value) == message
    assert caught.value.kind is ProviderErrorKind.INVALID_RESPONSE


@given(st.sampled_from([k for k in ItemKind if k is not ItemKind.ASSISTANT]))
def test_every_non_assistant_kind_is_refused(kind: ItemKind) -> None:
    with pytest.raises(ModelProtocolError):
        admit_model_output([Item(kind, (TextPart("x"),))], set())


# -- renderers send the provider's own id back ----------------------------------------------


def renamed_transcript() -> list[Item]:
    """Round 1 used call_0; round 2's call_0 was renamed call_0_2 on admission."""
    first = admit_model_output(
        [Item(ItemKind.ASSISTANT, (ToolCallPart("call_0", "get_weather", {"city": "Paris"}),))],
        set(),
    ).items
    second = admit_model_output(
        [Item(ItemKind.ASSISTANT, (ToolCallPart("call_0", "get_weather", {"city": "Rome"}),))],
        {"call_0"},
    ).items
    return [
        user("weather?"),
        *first,
        Item(ItemKind.TOOL, (ToolResultPart("call_0", "18C"),)),
        *second,
        Item(ItemKind.TOOL, (ToolResultPart("call_0_2", "24C"),)),
    ]


def test_openai_renders_the_providers_ids() -> None:
    body = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1").request_body(
        turn(renamed_transcript(), [WEATHER])
    )
    ids = [
        (m.get("tool_calls", [{}])[0].get("id"), m.get("tool_call_id"))
        for m in body["messages"][1:]
    ]
    assert ids == [("call_0", None), (None, "call_0"), ("call_0", None), (None, "call_0")]


def test_gemini_renders_the_providers_ids() -> None:
    body = GeminiModel("m", api_key="key-0123").request_body(turn(renamed_transcript(), [WEATHER]))
    parts = [p for content in body["contents"] for p in content["parts"]]
    ids = [
        next(iter(p.values()))["id"]
        for p in parts
        if "functionCall" in p or "functionResponse" in p
    ]
    assert ids == ["call_0", "call_0", "call_0", "call_0"]


def test_anthropic_keeps_the_unique_transcript_ids() -> None:
    body = AnthropicModel("m", api_key="key-0123").request_body(
        turn(renamed_transcript(), [WEATHER])
    )
    blocks = [b for m in body["messages"] for b in m["content"] if isinstance(b, dict)]
    ids = [
        b.get("id") or b.get("tool_use_id")
        for b in blocks
        if b["type"] in ("tool_use", "tool_result")
    ]
    assert ids == ["call_0", "call_0", "call_0_2", "call_0_2"]


# -- stamping -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_assistant_items_are_stamped_with_provider_models_and_response_id() -> None:
    async with ReplayServer([sse(openai_streams.text_stream())]) as server:
        model = OpenAIChatModel("gpt-4o-mini", base_url=f"{server.url}/v1")
        events = await collect(model, turn([user("hi")]))
    result = events[-1]
    assert isinstance(result, ModelTurnResult)
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.output_items[0].metadata == {
        "agentloop.provider": "openai",
        "agentloop.model": "gpt-4o-mini",
        "agentloop.response_model": "gpt-4o-mini-2024-07-18",
        "agentloop.response_id": "chatcmpl-123",
    }
