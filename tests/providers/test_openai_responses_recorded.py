"""OpenAIResponsesModel on real recorded Responses streams (OpenAI, OpenRouter, DeepSeek).

The recordings are public test cassettes of pydantic-ai (origin, commit, licence and
each file's git blob id in ``recordings/README.md``, checked below). Each recorded
response body is replayed on the loopback server, byte for byte, and the adapter's
result is compared with what the recording's own ``response.output_item.done`` and
``response.completed`` events say; where the recording holds the next request (which
the provider accepted), the adapter's next request is compared with it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import anyio
import pytest

from agentloop import (
    AppendText,
    CommitPart,
    FinishReason,
    Item,
    ItemKind,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from agentloop.providers import OpenAIResponsesModel

from ._helpers import collect, fast_retry, result_of, run_agent, turn, user
from ._responses_streams import RECORDINGS, Exchange, recorded, recording_text
from ._server import Recorded, ReplayServer, Reply, sse

pytestmark = pytest.mark.anyio

README = (RECORDINGS / "README.md").read_text()
FILES = re.findall(r"^\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{40})` \|", README, re.MULTILINE)
RESPONSES = [name for name, _blob in FILES if name.startswith("openai_responses/")]
EXCHANGES = [
    pytest.param(name, number, id=f"{name.split('/')[1].split('.')[0]}-{number}")
    for name in RESPONSES
    for number, exchange in enumerate(recorded(name))
    if exchange.uri.endswith("/responses")
]
CURLY = str.maketrans({"\u2019": "'", "\u201c": '"', "\u201d": '"'})
CAPITAL = ToolSpec(
    "get_capital",
    "",
    {
        "type": "object",
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
        "additionalProperties": False,
    },
)


def test_every_recording_is_the_upstream_file() -> None:
    assert len(FILES) == 10
    assert sorted(name for name, _ in FILES) == sorted(
        str(path.relative_to(RECORDINGS)) for path in RECORDINGS.glob("*/*")
    )
    for name, blob in FILES:
        data = recording_text(name)
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name


def data_events(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def expected_parts(body: str) -> tuple[Part, ...]:
    """The parts the documented mapping makes of the recording's finished output items."""
    parts: list[Part] = []
    done = [e for e in data_events(body) if e["type"] == "response.output_item.done"]
    for event in sorted(done, key=lambda e: int(e["output_index"])):  # OpenRouter: not in order
        item = event["item"]
        if item["type"] == "message":
            metadata = {"openai.item_id": item["id"]}
            if item.get("phase"):
                metadata["openai.phase"] = item["phase"]
            parts += [TextPart(c["text"], metadata=metadata) for c in item["content"]]
        elif item["type"] == "function_call":
            metadata = {"openai.item_id": item["id"]}
            arguments = json.loads(item["arguments"])
            parts.append(ToolCallPart(item["call_id"], item["name"], arguments, metadata=metadata))
        else:
            parts.append(expected_reasoning(item))
    return tuple(parts)


def expected_reasoning(item: dict[str, Any]) -> ReasoningPart:
    assert item["type"] == "reasoning"
    summaries = [entry["text"] for entry in item["summary"]]
    contents = [entry["text"] for entry in item.get("content") or []]
    metadata: dict[str, Any] = {"openai.reasoning_id": item["id"]}
    if item.get("encrypted_content"):
        metadata["openai.encrypted_content"] = item["encrypted_content"]
    metadata["openai.reasoning_summary"] = summaries
    if contents:
        metadata["openai.reasoning_text"] = contents
    return ReasoningPart("\n\n".join(contents or summaries), metadata=metadata)


def completed_response(body: str) -> dict[str, Any]:
    (event,) = [e for e in data_events(body) if e["type"] == "response.completed"]
    return dict(event["response"])


async def replay(exchange: Exchange, request: Any = None) -> list[Any]:
    reply = sse(exchange.body.encode())
    async with ReplayServer([reply]) as server:
        model = model_for(server, exchange)
        return await collect(model, request or turn([user("hi")]))


def model_for(server: ReplayServer, exchange: Exchange) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        exchange.request["model"], base_url=f"{server.url}/v1", api_key="k", retry=fast_retry()
    )


# what each recorded answer is, written out by hand (the rest is checked against the events)
FACTS = {
    "test_openai_responses_stream-0": (FinishReason.TOOL_CALL, (255, 16, 0, 0), ""),
    "test_openai_responses_stream-1": (
        FinishReason.COMPLETED,
        (278, 9, 0, 0),
        "The capital of France is Paris.",
    ),
    "test_openai_responses_streaming_usage-0": (FinishReason.TOOL_CALL, (53, 469, 448, 0), ""),
    "test_openai_responses_phase_streamed_on_part_start-0": (
        FinishReason.TOOL_CALL,
        (63, 69, 26, 0),
        "I\u2019ll check the capital lookup tool for \u201cPotatoLand.\u201d",
    ),
    "test_openai_responses_phase_streamed_on_part_start-1": (
        FinishReason.COMPLETED,
        (147, 16, 0, 0),
        "The capital of PotatoLand is **Potato City**.",
    ),
    "test_openai_responses_thinking_part_iter-0": (
        FinishReason.COMPLETED,
        (13, 1680, 1408, 0),
        None,
    ),
    "test_background_mode_streaming_vcr-0": (
        FinishReason.COMPLETED,
        (15, 9, 0, 0),
        "2 + 2 equals 4.",
    ),
    "test_openai_responses_raw_cot_stream_openrouter-0": (
        FinishReason.COMPLETED,
        (78, 37, 22, 0),
        "4",
    ),
    "test_deepseek_responses[text_stream]-0": (
        FinishReason.COMPLETED,
        (90, 15, 7, 0),
        "The capital of France is Paris.",
    ),
    "test_openai_responses_moderation_stream-0": (FinishReason.COMPLETED, (13, 59, 0, 0), "Paris."),
}


@pytest.mark.parametrize(("name", "number"), EXCHANGES)
async def test_a_recorded_stream_is_read_exactly(name: str, number: int) -> None:
    exchange = recorded(name)[number]
    events = await replay(exchange)
    result = result_of(events)
    response = completed_response(exchange.body)
    reason, counts, text = FACTS[f"{name.split('/')[1].split('.')[0]}-{number}"]
    assert result.finish_reason is reason
    assert result.output_items[0].parts == expected_parts(exchange.body)
    if text is not None:
        assert result.output_items[0].text_content == text
    assert (result.model, result.response_id) == (response["model"], response["id"])
    usage = result.usage
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens) == counts[:2]
    assert (usage.reasoning_tokens, usage.cache_read_tokens) == counts[2:]
    assert result.metadata == {"agentloop.provider_finish_reason": "completed"}
    assert streamed_texts(events) == [
        part.text if isinstance(part, TextPart | ReasoningPart) else arguments(exchange, part)
        for part in result.output_items[0].parts
    ]


def streamed_texts(events: list[Any]) -> list[str]:
    """Per part (in part order), what its ``AppendText`` deltas added up to."""
    texts: dict[str, str] = {}
    for event in events:
        if isinstance(event, AppendText):
            texts[event.part_id] = texts.get(event.part_id, "") + event.text
    committed = sorted(
        (e for e in events if isinstance(e, CommitPart)), key=lambda e: int(e.part_id[5:])
    )
    return [texts.get(e.part_id, "") for e in committed]


def arguments(exchange: Exchange, part: Part) -> str:
    assert isinstance(part, ToolCallPart)
    done = [
        e["item"] for e in data_events(exchange.body) if e["type"] == "response.output_item.done"
    ]
    return str(next(item["arguments"] for item in done if item.get("call_id") == part.id))


async def test_four_recorded_summary_parts_stream_as_paragraphs_of_one_reasoning_part() -> None:
    (exchange,) = recorded("openai_responses/test_openai_responses_thinking_part_iter.yaml.gz")
    events = await replay(exchange)
    reasoning = result_of(events).output_items[0].parts[0]
    assert isinstance(reasoning, ReasoningPart)
    summaries = reasoning.metadata["openai.reasoning_summary"]
    assert len(summaries) == 4
    assert reasoning.text == "\n\n".join(summaries)
    recorded_deltas = [
        e["delta"]
        for e in data_events(exchange.body)
        if e["type"] == "response.reasoning_summary_text.delta"
    ]
    reasoning_deltas = [
        e.text for e in events if isinstance(e, AppendText) and e.part_id == "part-0"
    ]
    assert len(reasoning_deltas) == len(recorded_deltas) == 383
    assert [text.removeprefix("\n\n") for text in reasoning_deltas] == recorded_deltas
    assert sum(text.startswith("\n\n**") for text in reasoning_deltas) == 3


async def test_the_encrypted_content_kept_is_the_done_items_not_the_added_ones() -> None:
    (exchange,) = recorded("openai_responses/test_openai_responses_streaming_usage.yaml")
    added, done = (
        e["item"]["encrypted_content"]
        for e in data_events(exchange.body)
        if e["type"].startswith("response.output_item.") and e["item"]["type"] == "reasoning"
    )
    assert added != done
    reasoning = result_of(await replay(exchange)).output_items[0].parts[0]
    assert reasoning.metadata["openai.encrypted_content"] == done


# -- the next request ------------------------------------------------------------------------


def sent_back(answer: Item, results: list[ToolResultPart]) -> list[Item]:
    return [answer, Item(ItemKind.TOOL, results)]


async def test_the_next_request_sends_back_what_the_recorded_one_did() -> None:
    first, second = recorded(
        "openai_responses/test_openai_responses_phase_streamed_on_part_start.yaml"
    )
    prompt = [Item.text(ItemKind.SYSTEM, first.request["instructions"])]
    prompt.append(user(first.request["input"][0]["content"]))
    async with ReplayServer([sse(first.body.encode()), sse(second.body.encode())]) as server:
        model = model_for(server, first)
        answer = result_of(await collect(model, turn(prompt, [CAPITAL]))).output_items[0]
        (call,) = answer.tool_calls()
        follow = [*prompt, *sent_back(answer, [ToolResultPart(call.id, "Potato City")])]
        await collect(model, turn(follow, [CAPITAL]))
        ours = server.requests[1].json
    theirs = second.request
    assert ours["instructions"] == theirs["instructions"]
    assert ours["include"] == theirs["include"] == ["reasoning.encrypted_content"]
    assert (ours["store"], ours["stream"]) == (False, True)
    # item for item as pydantic-ai sent them; it leaves out a user message's "type", and its
    # cassette holds the commentary with straight quotes where the answer had curly ones
    text = ours["input"][2]["content"][0]["text"]
    assert text.translate(CURLY) == theirs["input"][2]["content"][0]["text"]
    theirs["input"][2]["content"][0]["text"] = text
    assert ours["input"] == [{"type": "message", **theirs["input"][0]}, *theirs["input"][1:]]


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("test_openai_responses_stream.yaml", "Paris"),
        ("test_openai_responses_phase_streamed_on_part_start.yaml", "Potato City"),
    ],
)
async def test_an_agent_runs_a_recorded_tool_round(name: str, answer: str) -> None:
    first, second = recorded(f"openai_responses/{name}")
    call_id = next(
        e["item"]["call_id"] for e in data_events(first.body) if "call_id" in e.get("item", {})
    )

    def respond(request: Recorded) -> Reply:
        outputs = [i for i in request.json["input"] if i["type"] == "function_call_output"]
        if not outputs:
            return sse(first.body.encode())
        assert outputs == [{"type": "function_call_output", "call_id": call_id, "output": answer}]
        return sse(second.body.encode())

    class Capital:
        spec = CAPITAL

        async def invoke(self, request: Any, ctx: Any) -> str:
            return answer

    async with ReplayServer(respond) as server:
        with anyio.fail_after(10):
            step, driver, pauses = await run_agent(
                model_for(server, first), first.request["input"][0]["content"], [Capital()]
            )
    assert pauses == 1
    assert step.result.finish_reason is FinishReason.COMPLETED
    final = driver.snapshot().transcript[-1]
    assert final.text_content == completed_response(second.body)["output"][-1]["content"][0]["text"]
