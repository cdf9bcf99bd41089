"""The provider invariant against each wire format's own rules.

One checker per wire format states what the provider's API checks about tool
calls and results (OpenAI Chat Completions, Anthropic Messages, Gemini
generateContent). Every transcript ``validate_transcript`` accepts must render,
through the adapter's public ``request_body``, into a body its provider accepts;
every transcript it rejects renders into a body at least one provider refuses
(or the adapter refuses to render it), so the validator is neither too loose
nor stricter than the providers together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import Item, ItemKind, ProviderError, TextPart, ToolCallPart, ToolResultPart
from agentloop.model import TurnRequest
from agentloop.providers import AnthropicModel, GeminiModel, OpenAIChatModel
from agentloop.testing import VIOLATION_KINDS, invalid_transcripts, transcripts
from agentloop.transcript import find_violation

Body = dict[str, Any]


class WireError(AssertionError):
    """A rendered body the provider would refuse (the message quotes the API's rule)."""


def check_openai(body: Body) -> None:
    """Chat Completions: an assistant message with ``tool_calls`` must be followed by
    tool messages responding to each ``tool_call_id``; a tool message must respond to
    the preceding message with ``tool_calls``."""
    messages = body["messages"]
    open_ids: set[str] = set()
    round_ids: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in round_ids:
                raise WireError(
                    f"messages[{index}]: messages with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' ({call_id!r})"
                )
            if call_id not in open_ids:
                raise WireError(f"messages[{index}]: duplicate response to {call_id!r}")
            open_ids.discard(call_id)
            continue
        if open_ids:
            raise WireError(
                f"messages[{index}] ({role}): an assistant message with 'tool_calls' must be "
                f"followed by tool messages responding to each 'tool_call_id': {sorted(open_ids)}"
            )
        round_ids = set()
        if role == "assistant" and message.get("tool_calls"):
            ids = [call["id"] for call in message["tool_calls"]]
            if len(set(ids)) != len(ids):
                raise WireError(f"messages[{index}]: duplicate tool_call ids {ids}")
            open_ids = set(ids)
            round_ids = set(ids)
    if open_ids:
        raise WireError(f"the request ends with unanswered tool_calls {sorted(open_ids)}")


def check_anthropic(body: Body) -> None:
    """Messages API: every ``tool_use`` needs a ``tool_result`` in the very next message
    (a user message, results first); every ``tool_result`` answers a ``tool_use`` of the
    previous message; roles alternate; no message is empty."""
    messages = body["messages"]
    previous_uses: set[str] = set()
    for index, message in enumerate(messages):
        role, content = message["role"], message["content"]
        if not content:
            raise WireError(f"messages.{index}: all messages must have non-empty content")
        if index and messages[index - 1]["role"] == role:
            raise WireError(f"messages.{index}: roles must alternate (two {role} messages)")
        results = [block for block in content if block["type"] == "tool_result"]
        uses = [block["id"] for block in content if block["type"] == "tool_use"]
        if role == "assistant" and results:
            raise WireError(f"messages.{index}: tool_result blocks belong in user messages")
        result_ids = [block["tool_use_id"] for block in results]
        if previous_uses and sorted(result_ids) != sorted(previous_uses):
            raise WireError(
                f"messages.{index}: tool_use ids were found without tool_result blocks "
                f"immediately after: {sorted(previous_uses - set(result_ids))}"
            )
        if set(result_ids) - previous_uses or len(set(result_ids)) != len(result_ids):
            raise WireError(
                f"messages.{index}.content: unexpected tool_use_id found in tool_result blocks: "
                "each tool_result block must have a corresponding tool_use block in the "
                "previous message"
            )
        if results and content[: len(results)] != results:
            raise WireError(f"messages.{index}: tool_result blocks must come first")
        if len(set(uses)) != len(uses):
            raise WireError(f"messages.{index}: duplicate tool_use ids {uses}")
        previous_uses = set(uses)
    if previous_uses:
        raise WireError(f"the request ends with tool_use ids without results {previous_uses}")


def check_gemini(body: Body) -> None:
    """generateContent: a model turn with function calls is followed by a user turn with
    as many function responses, matching by name (and id when sent); function responses
    appear nowhere else; roles alternate."""
    contents = body["contents"]
    previous_calls: list[dict[str, Any]] = []
    for index, content in enumerate(contents):
        role, parts = content["role"], content["parts"]
        if not parts:
            raise WireError(f"contents[{index}]: contents.parts must not be empty")
        if index and contents[index - 1]["role"] == role:
            raise WireError(f"contents[{index}]: roles must alternate (two {role} turns)")
        responses = [part["functionResponse"] for part in parts if "functionResponse" in part]
        calls = [part["functionCall"] for part in parts if "functionCall" in part]
        if (role == "user" and calls) or (role == "model" and responses):
            raise WireError(f"contents[{index}]: function parts in a {role} turn")
        if len(responses) != len(previous_calls):
            raise WireError(
                f"contents[{index}]: please ensure that the number of function response parts "
                f"is equal to the number of function call parts of the function call turn "
                f"({len(responses)} != {len(previous_calls)})"
            )
        called = sorted((call["name"], call.get("id")) for call in previous_calls)
        answered = sorted((response["name"], response.get("id")) for response in responses)
        if called != answered:
            raise WireError(f"contents[{index}]: function responses {answered} != calls {called}")
        previous_calls = calls
    if previous_calls:
        raise WireError("the request ends with a function call turn")


def openai_body(items: Sequence[Item]) -> Body:
    return OpenAIChatModel("gpt-test", api_key="k").request_body(TurnRequest("s", "t", items))


def anthropic_body(items: Sequence[Item]) -> Body:
    return AnthropicModel("claude-test", api_key="k").request_body(TurnRequest("s", "t", items))


def gemini_body(items: Sequence[Item]) -> Body:
    return GeminiModel("gemini-test", api_key="k").request_body(TurnRequest("s", "t", items))


WIRE_FORMATS: dict[str, tuple[Callable[[Sequence[Item]], Body], Callable[[Body], None]]] = {
    "openai": (openai_body, check_openai),
    "anthropic": (anthropic_body, check_anthropic),
    "gemini": (gemini_body, check_gemini),
}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("wire_format", sorted(WIRE_FORMATS))
@SETTINGS
@given(
    items=transcripts(ends_with="input")
    | transcripts(ends_with="tool_result")
    | transcripts(max_turns=6, max_rounds=4, max_parallel=5, background_notifications=True)
)
def test_every_valid_transcript_renders_into_a_body_the_provider_accepts(
    wire_format: str, items: list[Item]
) -> None:
    assert find_violation(items) is None
    render, check = WIRE_FORMATS[wire_format]
    check(render(items))


def rejected_somewhere(items: Sequence[Item]) -> list[str]:
    refusals = []
    for name, (render, check) in sorted(WIRE_FORMATS.items()):
        try:
            check(render(items))
        except (WireError, ProviderError) as error:
            refusals.append(f"{name}: {error}")
    return refusals


@SETTINGS
@given(bad=invalid_transcripts())
def test_every_invalid_transcript_is_refused_by_some_provider(bad: Any) -> None:
    transcript, kind = bad
    assert find_violation(transcript).kind == kind  # type: ignore[union-attr]
    assert rejected_somewhere(transcript), kind


@pytest.mark.parametrize("kind", sorted(VIOLATION_KINDS))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_each_planted_violation_is_refused_by_some_provider(kind: str, data: Any) -> None:
    transcript, planted = data.draw(invalid_transcripts(kinds=[kind]))
    assert planted == kind
    assert rejected_somewhere(transcript)


CALL = Item(ItemKind.ASSISTANT, [ToolCallPart("c1", "echo", {"v": 1})])
RESULT = Item(ItemKind.TOOL, [ToolResultPart("c1", "ok")])
USER = Item.text(ItemKind.USER, "hi")


@pytest.mark.parametrize(
    ("intruder", "refused_by"),
    [
        (Item.text(ItemKind.CONTEXT, "summary"), ["openai"]),
        # Anthropic and Gemini merge same-role turns (and hoist context into the
        # system prompt), so only Chat Completions sees these intruders: the
        # invariant is the strictest provider's rule.
        (Item.text(ItemKind.USER, "steer"), ["openai"]),
        (Item.notification("task done"), ["openai"]),
        (Item(ItemKind.ASSISTANT, [TextPart("more")]), ["openai"]),
    ],
)
def test_an_item_between_a_call_and_its_result_is_interleaved(
    intruder: Item, refused_by: list[str]
) -> None:
    transcript = [USER, CALL, intruder, RESULT]
    violation = find_violation(transcript)
    assert violation is not None
    assert (violation.kind, violation.call_ids, violation.item_index) == ("interleaved", ("c1",), 2)
    assert violation.message == (
        "item between tool_call(s) c1 and their tool_result(s): providers need the results "
        "right after the assistant item that made the calls"
    )
    assert [refusal.split(":")[0] for refusal in rejected_somewhere(transcript)] == refused_by
    assert find_violation([USER, CALL, RESULT, intruder]) is None


def test_calls_whose_results_never_come_are_unanswered_where_the_round_breaks() -> None:
    violation = find_violation([USER, CALL, USER, Item(ItemKind.ASSISTANT, [TextPart("x")])])
    assert violation is not None
    assert (violation.kind, violation.call_ids, violation.item_index) == ("unanswered", ("c1",), 2)
    tail = find_violation([USER, CALL])
    assert tail is not None
    assert (tail.kind, tail.call_ids, tail.item_index) == ("unanswered", ("c1",), None)


@pytest.mark.parametrize(
    ("transcript", "index"),
    [
        ([USER, Item(ItemKind.USER, [ToolCallPart("c1", "echo", {})]), RESULT], 1),
        ([USER, CALL, Item(ItemKind.NOTIFICATION, [ToolResultPart("c1", "ok")])], 2),
        ([USER, CALL, Item(ItemKind.ASSISTANT, [ToolResultPart("c1", "ok")])], 2),
    ],
)
def test_tool_parts_in_the_wrong_kind_of_item_are_misplaced(
    transcript: list[Item], index: int
) -> None:
    violation = find_violation(transcript)
    assert violation is not None
    assert (violation.kind, violation.call_ids, violation.item_index) == (
        "misplaced",
        ("c1",),
        index,
    )
    assert rejected_somewhere(transcript)
