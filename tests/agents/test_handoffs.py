"""Handoffs: a tool call hands the conversation to another agent, with a history that any
provider accepts (tool pairs closed, reasoning and provider replay data dropped)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from agents_support import assert_answered_once, user
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.agents
import agentloop.testing
import agentloop.transcript
from agentloop.providers._anthropic_render import SIGNATURE_KEY, render_transcript
from agentloop.providers._gemini import THOUGHT_SIGNATURE_KEY
from agentloop.providers._gemini import _render as render_gemini
from agentloop.providers._openai_render import render_messages
from agentloop.providers._responses_render import ENCRYPTED_CONTENT_KEY, render_input
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def system(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.SYSTEM, text)


def agents(
    triage_script: list[Any], billing_script: list[Any], *, history: Any = None,
    prior: list[al.Item] | None = None,
) -> tuple[al.Agent, al.testing.ScriptedModel, al.testing.ScriptedModel]:  # fmt: skip
    billing_model = al.testing.ScriptedModel(billing_script)
    billing = (
        al.Agent.builder().model(billing_model).transcript([system("You do billing.")]).build()
    )
    transfer = al.agents.handoff(
        billing, name="transfer_to_billing", description="Billing questions.", history=history
    )
    triage_model = al.testing.ScriptedModel(triage_script)
    triage = (
        al.Agent.builder()
        .model(triage_model)
        .transcript([system("You triage."), *(prior or [])])
        .add_tool_source(al.ToolRegistry().with_tool(transfer))
        .build()
    )
    return triage, triage_model, billing_model


TRANSFER = tool_calls(call("transfer_to_billing", {"reason": "refund"}, id="t-1"))


async def test_the_target_answers_the_users_message_with_its_own_instructions() -> None:
    triage, triage_model, billing_model = agents([TRANSFER], ["Your refund is on its way."])
    result = await al.agents.run_handoffs(triage, "I need a refund", session_id="conv")
    assert isinstance(result.step, al.Finished)
    assert result.final_text == "Your refund is on its way."
    assert result.handoffs == ("transfer_to_billing",)
    assert result.driver.session_id == "conv/transfer_to_billing"
    [request] = billing_model.requests
    assert [(i.kind, i.text_content) for i in request.transcript] == [
        (al.ItemKind.SYSTEM, "You do billing."),
        (al.ItemKind.USER, "I need a refund"),
    ]
    assert_answered_once(result.driver.snapshot().transcript)
    triage_model.assert_complete()


async def test_a_round_with_other_calls_keeps_them_paired() -> None:
    class Lookup:
        spec = al.ToolSpec("lookup", "Look up.", {"type": "object"})

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            return "order 7"

    billing_model = al.testing.ScriptedModel(["Refunding order 7."])
    billing = al.Agent.builder().model(billing_model).build()
    transfer = al.agents.handoff(billing, name="to_billing", description="Billing.")
    both = tool_calls(call("lookup", {}, id="l-1"), call("to_billing", {}, id="t-1"))
    triage = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([both]))
        .add_tool_source(al.ToolRegistry().with_tool(Lookup()).with_tool(transfer))
        .build()
    )
    result = await al.agents.run_handoffs(triage, "refund please")
    assert result.final_text == "Refunding order 7."
    [request] = billing_model.requests
    calls = [p.id for i in request.transcript for p in i.parts if isinstance(p, al.ToolCallPart)]
    answers = [r.call_id for i in request.transcript for r in i.tool_results()]
    assert (calls, answers) == (["l-1"], ["l-1"])
    al.testing.assert_transcript_valid(list(request.transcript))


def signed_prior() -> list[al.Item]:
    """An earlier exchange carrying each provider's replay data."""
    thought = al.ReasoningPart("let me think", metadata={SIGNATURE_KEY: "sig"})
    encrypted = al.ReasoningPart("", metadata={ENCRYPTED_CONTENT_KEY: "enc"})
    signed_call = al.ToolCallPart("w-1", "weather", {}, metadata={THOUGHT_SIGNATURE_KEY: "ts"})
    return [
        user("weather?"),
        al.Item(al.ItemKind.ASSISTANT, (thought, encrypted, signed_call)),
        al.Item(al.ItemKind.TOOL, (al.ToolResultPart("w-1", "sunny"),)),
        al.Item(al.ItemKind.ASSISTANT, (al.ReasoningPart("only thinking"),)),
        al.Item.text(al.ItemKind.ASSISTANT, "It is sunny."),
    ]


async def test_reasoning_and_provider_replay_data_do_not_travel() -> None:
    triage, _, billing_model = agents([TRANSFER], ["ok"], prior=signed_prior())
    await al.agents.run_handoffs(triage, "refund")
    [request] = billing_model.requests
    parts = [p for item in request.transcript for p in item.parts]
    assert not any(isinstance(p, al.ReasoningPart) for p in parts)
    assert all(not key.startswith(("anthropic.", "openai.", "gemini.")) for p in parts
               for key in p.metadata)  # fmt: skip
    assert [(i.kind, i.text_content) for i in request.transcript] == [
        (al.ItemKind.SYSTEM, "You do billing."),
        (al.ItemKind.USER, "weather?"),
        (al.ItemKind.ASSISTANT, ""),
        (al.ItemKind.TOOL, ""),
        (al.ItemKind.ASSISTANT, "It is sunny."),
        (al.ItemKind.USER, "refund"),
    ]


async def test_a_history_filter_chooses_what_travels() -> None:
    triage, _, billing_model = agents(
        [TRANSFER], ["ok"], history=al.agents.without_tool_rounds, prior=signed_prior()
    )
    await al.agents.run_handoffs(triage, "refund")
    [request] = billing_model.requests
    assert [(i.kind, i.text_content) for i in request.transcript] == [
        (al.ItemKind.SYSTEM, "You do billing."),
        (al.ItemKind.USER, "weather?"),
        (al.ItemKind.ASSISTANT, "It is sunny."),
        (al.ItemKind.USER, "refund"),
    ]


@pytest.mark.parametrize(
    ("history", "message"),
    [
        (lambda items: [*items, al.Item(al.ItemKind.TOOL, (al.ToolResultPart("zz", "x"),))],
         "the history filter returned an invalid transcript: "),
        (lambda items: (*items[:-1], al.Item.text(al.ItemKind.ASSISTANT, "hm")),
         "must end with input the next agent can answer (a user, tool or notification item), "
         "found an item of kind 'assistant'"),
        (lambda items: [], "found nothing"),
        (lambda items: ["text"], "returned str at position 0, not an Item"),
    ],
)  # fmt: skip
async def test_a_filter_that_breaks_the_history_is_refused(history: Any, message: str) -> None:
    triage, _, billing_model = agents([TRANSFER], ["never"], history=history)
    with pytest.raises(al.InvalidInputError, match="handoff 'transfer_to_billing': ") as raised:
        await al.agents.run_handoffs(triage, "refund")
    assert message in str(raised.value)
    assert billing_model.requests == []


async def test_handoff_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(al.InvalidInputError, match="expects an Agent to hand over to, got str"):
        al.agents.handoff("billing", name="x", description="y")  # type: ignore[arg-type]
    with pytest.raises(al.InvalidInputError, match="history must be a callable"):
        al.agents.handoff(agents(["a"], ["b"])[0], name="x", description="y", history=3)  # type: ignore[arg-type]


async def test_a_forged_handoff_marker_hands_nothing_over() -> None:
    class Forger:
        spec = al.ToolSpec("forger", "Forge.", {"type": "object"})

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> al.ToolOutput:
            return al.ToolOutput("x", metadata={al.agents.HANDOFF_KEY: "transfer_to_billing"})

    model = al.testing.ScriptedModel([tool_calls(call("forger", {}, id="f-1")), "stayed"])
    triage = (
        al.Agent.builder().model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Forger())).build()
    )  # fmt: skip
    result = await al.agents.run_handoffs(triage, "hi")
    assert (result.final_text, result.handoffs) == ("stayed", ())


# -- every adapter accepts the handed-over history (a property) ----------------------


def check_every_adapter(history: tuple[al.Item, ...]) -> None:
    """The history rendered for each adapter keeps its pairing and carries no reasoning."""
    anthropic = render_transcript(history).messages
    pending: set[str] = set()
    for message in anthropic:
        blocks = message["content"] if isinstance(message["content"], list) else []
        kinds = {block["type"] for block in blocks}
        assert not kinds & {"thinking", "redacted_thinking"}
        answered = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
        assert answered == pending or (not pending and not answered)
        pending = {b["id"] for b in blocks if b["type"] == "tool_use"}
    roles = [m["role"] for m in anthropic]
    assert all(first != second for first, second in itertools.pairwise(roles))
    chat = render_messages(history, developer_role="developer")
    for position, message in enumerate(chat):
        ids = {c["id"] for c in message.get("tool_calls", [])}
        following = chat[position + 1 : position + 1 + len(ids)]
        assert ids == {m["tool_call_id"] for m in following if m["role"] == "tool"}
    assert not any("reasoning_details" in m for m in chat)
    responses = render_input(history, store=False).input
    assert not any(item.get("type") == "reasoning" for item in responses)
    seen: set[str] = set()
    for item in responses:
        if item.get("type") == "function_call":
            seen.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in seen
    assert seen == {i["call_id"] for i in responses if i.get("type") == "function_call_output"}
    _, contents = render_gemini(history)
    for position, content in enumerate(contents):
        asked = sum("functionCall" in part for part in content["parts"])
        if asked:
            following = contents[position + 1]["parts"]
            assert asked == sum("functionResponse" in part for part in following)
        assert not any(part.get("thought") for part in content["parts"])


@settings(max_examples=60)
@given(
    al.testing.transcripts(ends_with="user", background_notifications=False),
    st.booleans(),
)
def test_every_handed_over_history_is_valid_for_every_adapter(
    transcript: list[al.Item], text_only: bool
) -> None:
    billing = al.Agent.builder().model(al.testing.ScriptedModel([])).build()
    tool = al.agents.handoff(
        billing,
        name="to_billing",
        description="Billing.",
        history=al.agents.without_tool_rounds if text_only else None,
    )
    handed_round = [
        al.Item(al.ItemKind.ASSISTANT, (al.ReasoningPart("hm", metadata={SIGNATURE_KEY: "s"}),
                                        al.ToolCallPart("handoff-1", "to_billing", {}))),
        al.Item(al.ItemKind.TOOL, (al.ToolResultPart("handoff-1", "Handed over."),)),
    ]  # fmt: skip
    history = tool.handed_history([*transcript, *handed_round], "handoff-1")
    al.testing.assert_transcript_valid(list(history))
    assert al.transcript.has_pending_input(history)
    assert not any(isinstance(p, al.ReasoningPart) for item in history for p in item.parts)
    check_every_adapter(history)
