"""Hostile Responses streams: out of order, contradictory, malformed, unknown, huge.

A stream that breaks the protocol ends the turn with a ``ProviderError`` of kind
``INVALID_RESPONSE`` naming what broke; unknown event types and fields are ignored; no
foreign exception ever leaves the translator (hypothesis throws event soup at it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from httpx_sse import ServerSentEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import (
    AppendText,
    FinishReason,
    ProviderError,
    ProviderErrorKind,
    TextPart,
    ToolCallPart,
)
from agentloop.model import ModelTurnResult
from agentloop.providers import OpenAIResponsesModel, OpenAIResponsesStreamTranslator

from . import _responses_streams as streams
from ._helpers import collect, fast_retry, result_of, turn, user
from ._server import ReplayServer, sse

MESSAGE = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant"}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
TEXT_AT = {"item_id": "msg_1", "output_index": 0, "content_index": 0}


def translate(*records: tuple[str, dict[str, Any]]) -> list[Any]:
    """Feed ``(type, fields)`` events to a fresh translator, then finish it."""
    translator = OpenAIResponsesStreamTranslator(new_call_id=lambda: "call_new")
    events: list[Any] = []
    for kind, fields in records:
        data = json.dumps({"type": kind, **fields})
        events += translator.feed(ServerSentEvent(event=kind, data=data))
    return events + translator.finish()


def completed() -> tuple[str, dict[str, Any]]:
    return ("response.completed", {"response": {"id": "r", "status": "completed", "output": []}})


def added(item: dict[str, Any], index: int = 0) -> tuple[str, dict[str, Any]]:
    return ("response.output_item.added", {"output_index": index, "item": item})


def text_delta(delta: Any, **where: Any) -> tuple[str, dict[str, Any]]:
    return ("response.output_text.delta", {**TEXT_AT, **where, "delta": delta})


def invalid(*records: tuple[str, dict[str, Any]]) -> str:
    with pytest.raises(ProviderError) as caught:
        translate(*records)
    assert caught.value.kind is ProviderErrorKind.INVALID_RESPONSE
    assert caught.value.error_type == "malformed_stream"
    return str(caught.value)


def test_events_for_items_never_announced_or_already_done_are_refused() -> None:
    assert invalid(text_delta("hi")) == (
        "OpenAI: malformed response: response.output_text.delta for output item 0, which the "
        "stream never announced with response.output_item.added"
    )
    done = ("response.output_item.done", {"output_index": 0, "item": {**MESSAGE, "content": []}})
    assert invalid(added(MESSAGE), done, text_delta("late")) == (
        "OpenAI: malformed response: response.output_text.delta for output item 0 after its "
        "response.output_item.done"
    )
    assert invalid(added(MESSAGE), done, done) == (
        "OpenAI: malformed response: response.output_item.done.item: output item 0 was "
        "finished twice"
    )
    assert invalid(added(MESSAGE), added(MESSAGE)) == (
        "OpenAI: malformed response: response.output_item.added.item: output item 0 was "
        "announced twice"
    )
    arguments = ("response.function_call_arguments.delta", {"output_index": 0, "delta": "{"})
    assert invalid(added(MESSAGE), arguments) == (
        "OpenAI: malformed response: response.function_call_arguments.delta for output item 0, "
        "which is a 'message' item"
    )
    as_call = ("response.output_item.done", {"output_index": 0, "item": CALL})
    assert invalid(added(MESSAGE), as_call) == (
        "OpenAI: malformed response: response.output_item.done.item: output item 0 was "
        "announced as 'message'"
    )


def test_a_done_event_that_contradicts_the_deltas_is_refused() -> None:
    done = ("response.output_text.done", {**TEXT_AT, "text": "Goodbye"})
    assert invalid(added(MESSAGE), text_delta("Hello"), done) == (
        "OpenAI: malformed response: output item 0's text is 'Goodbye' at its end, but its "
        "deltas made 'Hello'"
    )
    arguments = ("response.function_call_arguments.delta", {"output_index": 0, "delta": '{"a"'})
    final = ("response.function_call_arguments.done", {"output_index": 0, "arguments": "{}"})
    assert invalid(added(CALL), arguments, final) == (
        "OpenAI: malformed response: response.function_call_arguments.done's arguments is '{}' "
        """at its end, but its deltas made '{"a"'"""
    )


def test_fields_of_the_wrong_type_are_named() -> None:
    assert invalid(added(MESSAGE), text_delta(5)) == (
        "OpenAI: malformed response: expected response.output_text.delta.delta to be a string "
        "or null, got int 5"
    )
    assert invalid(("response.output_item.added", {"output_index": "0", "item": MESSAGE})) == (
        "OpenAI: malformed response: expected response.output_item.added.output_index to be a "
        "non-negative integer, got string '0'"
    )
    assert invalid(added({"id": "x"})) == (
        "OpenAI: malformed response: expected response.output_item.added.item.type to be a "
        "string, got null None"
    )
    usage = {"response": {"status": "completed", "usage": [1]}}
    assert invalid(("response.completed", usage)) == (
        "OpenAI: malformed response: expected response.completed.response.usage to be an "
        "object, got array [1]"
    )


def test_unknown_events_and_fields_are_ignored_and_missing_deltas_filled_in() -> None:
    events = translate(
        ("response.brand_new_event", {"whatever": [1, {"deep": None}]}),
        ("keepalive", {}),
        added({**MESSAGE, "novel": True}),
        ("response.content_part.added", {**TEXT_AT, "part": {"type": "output_text"}}),
        # no deltas at all: the done events carry the text, and the call's arguments
        ("response.output_text.done", {**TEXT_AT, "text": "Whole."}),
        ("response.output_item.done", {"output_index": 0, "item": {**MESSAGE, "content": []}}),
        ("response.output_item.done", {"output_index": 1, "item": {**CALL, "arguments": "{}"}}),
        completed(),
    )
    result = result_of(events)
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.output_items[0].parts == (
        TextPart("Whole.", metadata={"openai.item_id": "msg_1"}),
        ToolCallPart("c1", "f", {}, metadata={"openai.item_id": "fc_1"}),
    )


def test_a_completed_response_alone_gives_its_output() -> None:
    output = [{**MESSAGE, "content": [{"type": "output_text", "text": "Only this."}]}]
    response = {"id": "r", "model": "m", "status": "completed", "output": output}
    result = result_of(translate(("response.completed", {"response": response})))
    assert result.output_items[0].parts == (
        TextPart("Only this.", metadata={"openai.item_id": "msg_1"}),
    )
    assert (result.model, result.response_id) == ("m", "r")


@pytest.mark.anyio
async def test_bad_json_and_a_huge_delta_on_the_wire() -> None:
    huge = "x" * (2 * 1024 * 1024)
    stream = streams.Stream().created()
    stream.event("response.output_item.added", output_index=0, item={**MESSAGE, "content": []})
    stream.event("response.output_text.delta", **TEXT_AT, delta=huge)
    body = stream.completed().body()
    broken = (
        streams.Stream().created().body() + b"event: response.output_item.added\ndata: {oops\n\n"
    )
    async with ReplayServer([sse(body), sse(broken)]) as server:
        model = OpenAIResponsesModel("m", base_url=f"{server.url}/v1", retry=fast_retry())
        result = result_of(await collect(model, turn([user("x")])))
        with pytest.raises(ProviderError) as caught:
            await collect(model, turn([user("x")]))
    assert result.output_items[0].text_content == huge
    assert caught.value.kind is ProviderErrorKind.INVALID_RESPONSE
    assert str(caught.value) == (
        "OpenAI: malformed JSON in a stream event 'response.output_item.added': Expecting "
        "property name enclosed in double quotes in '{oops'"
    )


# -- hypothesis ------------------------------------------------------------------------------

pieces = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(texts=pieces, summaries=pieces, split=st.integers(0, 12))
def test_any_split_of_the_deltas_makes_the_same_parts(
    texts: list[str], summaries: list[str], split: int
) -> None:
    """Deltas in any pieces, and a done text that adds the rest, give the whole texts."""
    text, summary = "".join(texts), "".join(summaries)
    reasoning = {"type": "reasoning", "id": "rs", "summary": []}
    where = {"item_id": "rs", "output_index": 0, "summary_index": 0}
    records = [added(reasoning)]
    records += [("response.reasoning_summary_text.delta", {**where, "delta": p}) for p in summaries]
    done = {**reasoning, "summary": [{"type": "summary_text", "text": summary}]}
    records.append(("response.output_item.done", {"output_index": 0, "item": done}))
    records.append(added(MESSAGE, 1))
    streamed = texts[: split % len(texts)]
    records += [text_delta(p, output_index=1) for p in streamed]
    records.append(("response.output_text.done", {**TEXT_AT, "output_index": 1, "text": text}))
    events = translate(*records, completed())
    result = result_of(events)
    reasoning_part, text_part = result.output_items[0].parts
    assert (reasoning_part.text, text_part.text) == (summary, text)  # type: ignore[union-attr]
    appended = [e for e in events if isinstance(e, AppendText)]
    assert "".join(e.text for e in appended if e.part_id == "part-0") == summary
    assert "".join(e.text for e in appended if e.part_id == "part-1") == text


EVENT_TYPES = [
    "response.created",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "response.unknown",
]
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.sampled_from(["", "x", "message", "reasoning", "function_call", "{}"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "id",
                    "text",
                    "delta",
                    "item",
                    "content",
                    "summary",
                    "output_index",
                    "arguments",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
fields = st.dictionaries(
    st.sampled_from(
        [
            "output_index",
            "content_index",
            "summary_index",
            "item_id",
            "item",
            "delta",
            "text",
            "arguments",
            "response",
            "code",
            "message",
            "error",
        ]
    ),
    values,
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(EVENT_TYPES), fields), max_size=12))
def test_event_soup_ends_in_a_result_or_a_provider_error(records: list[Any]) -> None:
    try:
        events = translate(*records)
    except ProviderError:
        return
    assert isinstance(events[-1], ModelTurnResult)


def test_items_addressed_by_id_alone_as_llama_cpp_sends_them() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    records = [
        ("response.output_item.added", {"item": reasoning}),
        ("response.reasoning_text.delta", {"item_id": "rs_1", "delta": "Think."}),
        ("response.output_item.added", {"item": {**MESSAGE, "content": []}}),
        ("response.output_text.delta", {"item_id": "msg_1", "delta": "Hi"}),
        ("response.output_text.done", {"item_id": "msg_1", "text": "Hi!"}),
        ("response.output_item.done", {"item": {**MESSAGE, "content": []}}),
        ("response.output_item.done", {"item": reasoning}),
        completed(),
    ]
    result = result_of(translate(*records))
    assert [part.text for part in result.output_items[0].parts] == ["Think.", "Hi!"]  # type: ignore[union-attr]
    assert invalid(("response.output_text.delta", {"item_id": "msg_x", "delta": "?"})) == (
        "OpenAI: malformed response: response.output_text.delta for output item 'msg_x', which "
        "the stream never announced with response.output_item.added"
    )
