"""Reasoning over the Responses API: summaries streamed, encrypted reasoning sent back.

Stateless by default (``store: false``): a reasoning item goes back with its
``encrypted_content`` (asked for with ``include: ["reasoning.encrypted_content"]``), and
the message and function call items that follow it go back with their ids, which
OpenAI pairs with it. A reasoning item that cannot be sent (no encrypted content, not
stored) is left out with those ids, so the request never names an item OpenAI does not
have (https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import (
    AppendText,
    CustomPart,
    Item,
    ItemKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.providers import OpenAIResponsesModel

from . import _responses_streams as streams
from ._helpers import WEATHER, collect, fast_retry, result_of, turn, user
from ._server import ReplayServer, sse

pytestmark = pytest.mark.anyio


def model_for(server: ReplayServer, name: str = "gpt-5", **options: Any) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        name, base_url=f"{server.url}/v1", api_key="k", retry=fast_retry(), **options
    )


def reasoning_stream() -> bytes:
    stream = streams.Stream().created()
    stream.reasoning(0, "First I look.", "Then I answer.", encrypted="gAAAA-the-whole-blob")
    stream.message(1, "Checking.", item_id="msg_2", phase="commentary")
    stream.call(2, "get_weather", '{"city":"Paris"}', "call_x", item_id="fc_3")
    return stream.completed(streams.make_usage(reasoning=64)).body()


async def answer_and_next(
    stream: bytes, **options: Any
) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """The first turn's events, its request body and the next request's body."""
    async with ReplayServer([sse(stream), sse(streams.text_stream())]) as server:
        model = model_for(server, **options)
        events = await collect(model, turn([user("weather?")], [WEATHER]))
        answer = result_of(events).output_items[0]
        calls = [ToolResultPart(call.id, "18°C") for call in answer.tool_calls()]
        follow = [user("weather?"), answer, Item(ItemKind.TOOL, calls)]
        await collect(model, turn(follow, [WEATHER]))
        first, second = (request.json for request in server.requests)
    return events, first, second


async def test_summaries_stream_as_paragraphs_and_the_items_go_back_with_their_ids() -> None:
    events, first, second = await answer_and_next(reasoning_stream())
    assert (first["store"], first["include"]) == (False, ["reasoning.encrypted_content"])
    assert [e for e in events if isinstance(e, AppendText) and e.part_id == "part-0"] == [
        AppendText("part-0", "First I look."),
        AppendText("part-0", "\n\nThen I answer."),
    ]
    parts = result_of(events).output_items[0].parts
    assert parts == (
        ReasoningPart(
            "First I look.\n\nThen I answer.",
            metadata={
                "openai.reasoning_id": "rs_1",
                "openai.encrypted_content": "gAAAA-the-whole-blob",  # done's, not added's
                "openai.reasoning_summary": ["First I look.", "Then I answer."],
            },
        ),
        TextPart("Checking.", metadata={"openai.item_id": "msg_2", "openai.phase": "commentary"}),
        ToolCallPart(
            "call_x", "get_weather", {"city": "Paris"}, metadata={"openai.item_id": "fc_3"}
        ),
    )
    assert second["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "First I look."},
                {"type": "summary_text", "text": "Then I answer."},
            ],
            "encrypted_content": "gAAAA-the-whole-blob",
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_2",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            "phase": "commentary",
        },
        {
            "type": "function_call",
            "call_id": "call_x",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "id": "fc_3",
        },
        {"type": "function_call_output", "call_id": "call_x", "output": "18°C"},
    ]


async def test_stored_responses_send_reasoning_by_id_and_ask_for_no_encrypted_content() -> None:
    stream = streams.Stream().created()
    stream.reasoning(0, encrypted="")
    stream.call(1, "get_weather", '{"city":"Oslo"}', "call_o", item_id="fc_o")
    _events, first, second = await answer_and_next(stream.completed().body(), store=True)
    assert first["store"] is True
    assert "include" not in first
    assert second["input"][1:3] == [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "call_id": "call_o",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
            "id": "fc_o",
        },
    ]


def answer_item(*parts: Any) -> Item:
    return Item(ItemKind.ASSISTANT, parts)


async def body_for(transcript: list[Item], **options: Any) -> dict[str, Any]:
    async with ReplayServer([sse(streams.text_stream())]) as server:
        await collect(model_for(server, **options), turn(transcript))
        body: dict[str, Any] = server.requests[0].json
    return body


async def test_unsendable_reasoning_is_left_out_and_takes_the_ids_with_it() -> None:
    unencrypted = ReasoningPart("hm", metadata={"openai.reasoning_id": "rs_9"})
    text = TextPart("Hi.", metadata={"openai.item_id": "msg_9", "openai.phase": "final_answer"})
    call = ToolCallPart("c9", "get_weather", {}, metadata={"openai.item_id": "fc_9"})
    foreign = ReasoningPart("x", metadata={"anthropic.thinking_signature": "s"})
    transcript = [user("a"), answer_item(foreign, unencrypted, text, call), user("b")]
    body = await body_for(transcript)
    assert body["input"][1:3] == [
        {"type": "message", "role": "assistant", "content": "Hi.", "phase": "final_answer"},
        {"type": "function_call", "call_id": "c9", "name": "get_weather", "arguments": "{}"},
    ]


async def test_raw_reasoning_text_goes_back_as_content() -> None:
    raw = ReasoningPart(
        "Two and two.",
        metadata={
            "openai.reasoning_id": "rs_tmp_1",
            "openai.reasoning_summary": [],
            "openai.reasoning_text": ["Two and two."],
        },
    )
    body = await body_for([user("a"), answer_item(raw, TextPart("4")), user("b")])
    assert body["input"][1] == {
        "type": "reasoning",
        "id": "rs_tmp_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "Two and two."}],
    }


@pytest.mark.parametrize(
    ("name", "options", "include", "reasoning"),
    [
        ("gpt-5", {}, True, None),
        ("o4-mini", {}, True, None),
        ("openai/o3", {}, True, None),  # a router's vendor prefix
        ("gpt-5-chat-latest", {}, False, None),
        ("gpt-4.1", {}, False, None),
        ("gpt-4.1", {"reasoning_effort": "low"}, True, {"effort": "low"}),
        ("m", {"reasoning_summary": "auto"}, True, {"summary": "auto"}),
        ("gpt-5", {"encrypted_reasoning": False}, False, None),
        ("gpt-4o", {"encrypted_reasoning": True}, True, None),
        ("gpt-5", {"store": True, "reasoning_effort": "high"}, False, {"effort": "high"}),
    ],
)
async def test_encrypted_reasoning_is_asked_for_when_the_model_reasons(
    name: str, options: dict[str, Any], include: bool, reasoning: dict[str, str] | None
) -> None:
    body = await body_for([user("a")], name=name, **options)
    assert ("include" in body) is include
    if include:
        assert body["include"] == ["reasoning.encrypted_content"]
    assert body.get("reasoning") == reasoning


async def test_citations_and_unknown_output_items_go_back_as_they_came() -> None:
    stream = streams.Stream().created()
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    stream.event("response.output_item.added", output_index=0, item={**search, "status": "x"})
    stream.event("response.web_search_call.searching", output_index=0, item_id="ws_1")
    stream.event("response.output_item.done", output_index=0, item=search)
    citation = {"type": "url_citation", "start_index": 0, "end_index": 4, "url": "u", "title": "t"}
    added = {"type": "message", "id": "msg_c", "status": "in_progress", "role": "assistant"}
    stream.event("response.output_item.added", output_index=1, item={**added, "content": []})
    where = {"item_id": "msg_c", "output_index": 1, "content_index": 0}
    stream.event("response.output_text.delta", **where, delta="Oslo")
    content = [{"type": "output_text", "text": "Oslo", "annotations": [citation]}]
    done = {**added, "status": "completed", "content": content}
    stream.event("response.output_item.done", output_index=1, item=done)
    async with ReplayServer([sse(stream.completed().body()), sse(streams.text_stream())]) as s:
        model = model_for(s, store=True)
        answer = result_of(await collect(model, turn([user("a")]))).output_items[0]
        await collect(model, turn([user("a"), answer, user("b")]))
        body = s.requests[1].json
    assert answer.parts == (
        CustomPart("openai.web_search_call", search),
        TextPart("Oslo", metadata={"openai.item_id": "msg_c", "openai.annotations": [citation]}),
    )
    assert body["input"][1:3] == [
        search,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_c",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Oslo", "annotations": [citation]}],
        },
    ]
