"""Content blocks the Anthropic adapter does not model keep every delta they stream.

The compaction shape is Anthropic's server-side compaction (context management,
https://platform.claude.com/docs/en/build-with-claude/compaction): a
``content_block_start`` with ``{"type": "compaction", "content": ""}`` whose summary
streams as ``compaction_delta`` ``content`` pieces, sent back as the same block in
the next request. The other block and delta types stand for ones not yet published.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import CustomPart, Item, ProviderError, ProviderErrorKind, TextPart
from agentloop.providers import AnthropicModel

from . import _anthropic_streams as streams
from ._helpers import collect, fast_retry, result_of, turn, user
from ._server import ReplayServer, events, sse

pytestmark = pytest.mark.anyio


def model_for(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("m", base_url=server.url, api_key="k", retry=fast_retry())


def stream(block: dict[str, Any], *deltas: dict[str, Any]) -> bytes:
    return events(
        streams.message_start(),
        streams.block_start(0, block),
        *(streams.delta(0, value) for value in deltas),
        streams.block_stop(0),
        streams.block_start(1, {"type": "text", "text": ""}),
        streams.text(1, "Done."),
        streams.block_stop(1),
        streams.message_delta("end_turn"),
        streams.STOP,
    )


async def answer_of(data: bytes) -> Item:
    async with ReplayServer([sse(data)]) as server:
        result = result_of(await collect(model_for(server), turn([user("hi")])))
    return result.output_items[0]


async def test_a_compaction_block_keeps_its_streamed_text_and_goes_back_as_sent() -> None:
    data = stream(
        {"type": "compaction", "content": ""},
        {"type": "compaction_delta", "content": "The user asked about "},
        {"type": "compaction_delta", "content": "the weather in Paris."},
    )
    answer = await answer_of(data)
    compaction = {"type": "compaction", "content": "The user asked about the weather in Paris."}
    assert answer.parts == (CustomPart("anthropic.compaction", compaction), TextPart("Done."))
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server), turn([user("hi"), answer, user("more")]))
        body = server.requests[0].json
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [compaction, {"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": "more"}]},
    ]


async def test_text_fields_of_an_unknown_delta_are_accumulated_into_a_missing_field() -> None:
    data = stream(
        {"type": "future_block", "id": "fb_1"},
        {"type": "future_delta", "summary": "a", "note": "x"},
        {"type": "future_delta", "summary": "b", "note": "y"},
    )
    answer = await answer_of(data)
    assert answer.parts[0] == CustomPart(
        "anthropic.future_block",
        {"type": "future_block", "id": "fb_1", "summary": "ab", "note": "xy"},
    )


async def test_deltas_that_cannot_be_folded_in_are_kept_in_metadata() -> None:
    data = stream(
        {"type": "future_block", "items": []},
        {"type": "future_delta", "items": "not a list"},
        {"type": "future_delta", "count": 3, "nested": {"a": 1}},
        {"type": "future_delta"},
    )
    answer = await answer_of(data)
    assert answer.parts[0] == CustomPart(
        "anthropic.future_block",
        {"type": "future_block", "items": []},
        metadata={
            "anthropic.deltas": [
                {"type": "future_delta", "items": "not a list"},
                {"type": "future_delta", "count": 3, "nested": {"a": 1}},
            ]
        },
    )


async def test_tool_input_json_of_an_unknown_block_is_still_parsed() -> None:
    data = stream(
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "input_json_delta", "partial_json": '{"query": '},
        {"type": "input_json_delta", "partial_json": '"paris"}'},
    )
    answer = await answer_of(data)
    assert answer.parts[0] == CustomPart(
        "anthropic.server_tool_use",
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "paris"},
        },
    )


async def test_an_unknown_delta_whose_type_is_not_a_string_is_an_invalid_response() -> None:
    data = stream({"type": "compaction", "content": ""}, {"type": 5, "content": "x"})
    async with ReplayServer([sse(data)]) as server:
        with pytest.raises(ProviderError) as caught:
            await collect(model_for(server), turn([user("hi")]))
    assert caught.value.kind is ProviderErrorKind.INVALID_RESPONSE
    assert str(caught.value) == (
        "Anthropic: malformed response: expected content_block_delta.delta.type to be a "
        "string or null, got int 5"
    )
