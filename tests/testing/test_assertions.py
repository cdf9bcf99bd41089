"""assert_transcript_valid and check_mutator."""

from __future__ import annotations

import re

import pytest

from agentloop import Item, ItemKind, TextPart, ToolCallPart, ToolResultPart
from agentloop.testing import assert_transcript_valid, check_mutator, format_transcript
from agentloop.transcript import MutationContext, MutationPoint, TranscriptCursor


def _round(call_id: str) -> list[Item]:
    return [
        Item(ItemKind.ASSISTANT, (ToolCallPart(call_id, "echo", {"value": "x"}),)),
        Item(ItemKind.TOOL, (ToolResultPart(call_id, "pong"),)),
    ]


def test_valid_transcript_passes() -> None:
    assert_transcript_valid([Item.text(ItemKind.USER, "hi"), *_round("c1")])


def test_orphaned_result_message_names_the_rule_and_marks_the_item() -> None:
    transcript = [Item.text(ItemKind.USER, "hi"), Item(ItemKind.TOOL, (ToolResultPart("c9", "?"),))]
    with pytest.raises(AssertionError) as raised:
        assert_transcript_valid(transcript)
    assert str(raised.value) == (
        "transcript invariant violation: orphaned tool_result for call c9: no earlier "
        "tool_call has this id at item 1; transcript of 2 item(s):\n"
        "     [0] user: text 'hi'\n"
        "  >> [1] tool: tool_result c9: '?'"
    )


def test_unanswered_call_marks_the_call_and_elides_far_items() -> None:
    transcript = [Item.text(ItemKind.USER, str(n)) for n in range(8)]
    transcript.append(Item(ItemKind.ASSISTANT, (TextPart("let me"), ToolCallPart("c1", "ls", {}))))
    with pytest.raises(AssertionError) as raised:
        assert_transcript_valid(transcript)
    message = str(raised.value)
    assert message.startswith(
        "transcript invariant violation: tool_call(s) without matching tool_result: c1; "
        "transcript of 9 item(s):\n       ... 6 item(s) ...\n"
    )
    assert message.endswith("  >> [8] assistant: text 'let me'; tool_call c1 ls({})")


def test_format_transcript_lists_every_item_without_highlights() -> None:
    assert format_transcript([]) == "  (empty transcript)"
    assert format_transcript(_round("c1")).splitlines() == [
        '     [0] assistant: tool_call c1 echo({"value": "x"})',
        "     [1] tool: tool_result c1: 'pong'",
    ]


class DropOldest:
    """Broken compaction: drops the oldest items whatever they are (splits pairs)."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        if len(cursor) > self.keep:
            del cursor[: len(cursor) - self.keep]


class DropOldTurns:
    """Correct compaction: drops whole turns (cuts only right before a user item)."""

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        starts = [i for i, item in enumerate(cursor) if item.kind is ItemKind.USER]
        if len(starts) > 1:
            cursor[: starts[-1]] = [Item.text(ItemKind.CONTEXT, "summary of earlier turns")]


def test_check_mutator_finds_the_planted_pair_breaking_bug() -> None:
    with pytest.raises(AssertionError) as raised:
        check_mutator(DropOldest(), max_examples=100)
    message = str(raised.value)
    # "(pass N of M)" appears when the shrink bound stops before a single pass is left.
    assert re.match(
        r"mutator 'DropOldest' broke the transcript at after_turn_ended( \(pass \d of \d\))?: ",
        message,
    )
    assert "orphaned tool_result for call" in message
    assert ": tool_result " in message.split("\ninput transcript")[0].split(">> [")[1]
    assert "\ninput transcript (" in message


def test_check_mutator_checks_the_after_tool_result_point_too() -> None:
    with pytest.raises(AssertionError, match="broke the transcript at after_tool_result"):
        check_mutator(DropOldest, points=[MutationPoint.AFTER_TOOL_RESULT], max_examples=100)


def test_check_mutator_passes_a_correct_compaction() -> None:
    check_mutator(DropOldTurns, max_examples=50)


def test_check_mutator_passes_a_read_only_mutator_on_trio() -> None:
    class Counter:
        seen = 0

        async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
            Counter.seen += len(cursor)

    check_mutator(Counter(), max_examples=10, backend="trio")
    assert Counter.seen > 0


def test_check_mutator_reports_a_mutator_that_raises() -> None:
    class Exploding:
        async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
            raise KeyError("summary")

    with pytest.raises(
        AssertionError,
        match=r"mutator 'Exploding' raised at after_turn_ended \(KeyError: 'summary'\)",
    ):
        check_mutator(Exploding(), max_examples=5)


def test_check_mutator_refuses_a_factory_that_makes_something_else() -> None:
    with pytest.raises(TypeError, match="factory returned 42, not a LoopMutator"):
        check_mutator(lambda: 42, max_examples=1)  # type: ignore[arg-type,return-value]


@pytest.mark.anyio
async def test_check_mutator_inside_an_event_loop_says_how_to_call_it() -> None:
    with pytest.raises(RuntimeError, match=r"call it from a plain \(non-async\) test function"):
        check_mutator(DropOldTurns(), max_examples=1)
