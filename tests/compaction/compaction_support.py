"""Transcript builders, a provider-validity check and long-transcript strategies for the
compaction tests."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

import agentloop as al
import agentloop.tools
import agentloop.transcript
from agentloop.compaction import ELIDED_KEY, CompactionRequest, estimate_transcript

K = al.ItemKind


def system(text: str = "You are helpful.") -> al.Item:
    return al.Item.text(K.SYSTEM, text)


def user(text: str) -> al.Item:
    return al.Item.text(K.USER, text)


def answer(text: str) -> al.Item:
    return al.Item(K.ASSISTANT, [al.TextPart(text)], finish_reason=al.FinishReason.COMPLETED)


def calls(*ids: str, name: str = "echo") -> al.Item:
    return al.Item(
        K.ASSISTANT,
        [al.ToolCallPart(call_id, name, {"q": call_id}) for call_id in ids],
        finish_reason=al.FinishReason.TOOL_CALL,
    )


def result(
    call_id: str, output: Any = "ok", *, error: bool = False, outcome: str | None = None
) -> al.Item:
    metadata = {al.tools.OUTCOME_KEY: outcome} if outcome is not None else {}
    return al.Item(K.TOOL, [al.ToolResultPart(call_id, output, error, metadata=metadata)])


def request(
    target: int | None = None, *, session_id: str = "s", point: str = "after_turn_ended"
) -> CompactionRequest:
    return CompactionRequest(
        session_id=session_id, turn_id="turn-1", point=point, reason="test", target_tokens=target
    )


def texts(items: Sequence[al.Item]) -> list[tuple[str, str]]:
    """(kind, text or part summary) per item: a compact, exact view for assertions."""
    shown: list[tuple[str, str]] = []
    for item in items:
        bits = []
        for part in item.parts:
            if isinstance(part, al.TextPart):
                bits.append(part.text)
            elif isinstance(part, al.ToolCallPart):
                bits.append(f"call {part.id}")
            elif isinstance(part, al.ToolResultPart):
                bits.append(f"result {part.call_id}: {al.compaction.output_text(part.output)}")
            else:
                bits.append(type(part).__name__)
        shown.append((item.kind.value, " | ".join(bits)))
    return shown


_INPUT = (K.USER, K.NOTIFICATION)


def provider_violation(before: Sequence[al.Item], after: Sequence[al.Item]) -> str | None:
    """What makes ``after`` (a compaction of ``before``) unsendable or wrong, or ``None``.

    Rules, as providers and the brief state them: the pairing invariant;
    every call's results come right after the item that made the calls (only
    tool items between them); the system prompt (system and developer items)
    kept, in order; the newest item (the input being answered) kept; when the
    transcript started with input after its system prompt, it still does.
    """
    violation = al.transcript.find_violation(after)
    if violation is not None:
        return violation.message
    index = 0
    while index < len(after):
        open_calls = {call.id for call in after[index].tool_calls()}
        cursor = index + 1
        while open_calls:
            if cursor >= len(after) or after[cursor].kind is not K.TOOL:
                return f"results of item {index} do not follow it directly"
            for part in after[cursor].tool_results():
                open_calls.discard(part.call_id)
            cursor += 1
        index = max(index + 1, cursor)
    prompt = [item for item in before if item.kind in (K.SYSTEM, K.DEVELOPER)]
    if [item for item in after if item.kind in (K.SYSTEM, K.DEVELOPER)] != prompt:
        return "the system prompt changed"
    if (
        not after
        or after[-1].kind is not before[-1].kind
        or not _same_or_elided(before[-1], after[-1])
    ):
        return "the newest item was not kept"

    def first_conversational(items: Sequence[al.Item]) -> al.Item | None:
        return next((i for i in items if i.kind not in (K.SYSTEM, K.DEVELOPER, K.CONTEXT)), None)

    head_before, head_after = first_conversational(before), first_conversational(after)
    starts_with_input = head_before is not None and head_before.kind in _INPUT
    if starts_with_input and (head_after is None or head_after.kind not in _INPUT):
        return "the conversation no longer starts with input"
    return None


def _same_or_elided(before: al.Item, after: al.Item) -> bool:
    """Equal parts, except tool results whose body a strategy replaced (and marked)."""
    if len(before.parts) != len(after.parts):
        return False
    for old, new in zip(before.parts, after.parts, strict=True):
        if old == new:
            continue
        if not (
            isinstance(old, al.ToolResultPart)
            and isinstance(new, al.ToolResultPart)
            and old.call_id == new.call_id
            and ELIDED_KEY in new.metadata
        ):
            return False
    return True


def irreducible_tokens(items: Sequence[al.Item]) -> int:
    """A floor no dropping strategy goes below: the system prompt plus everything from
    the last input that starts a block (what the current turn needs)."""
    from agentloop.compaction._blocks import input_cuts

    cuts = input_cuts(items)
    start = cuts[-1] if cuts else 0
    prompt = [item for item in items[:start] if item.kind in (K.SYSTEM, K.DEVELOPER)]
    return estimate_transcript(prompt) + estimate_transcript(items[start:])


# -- long transcripts -------------------------------------------------------

_words = st.text(alphabet=string.ascii_letters + " ", min_size=1, max_size=40)
_OUTCOMES = [None, None, None, *[outcome.value for outcome in al.tools.ResultOutcome]]


@st.composite
def long_transcripts(
    draw: st.DrawFn,
    *,
    max_turns: int = 40,
    max_output: int = 6_000,
    ending: str = "input",
) -> list[al.Item]:
    """Valid transcripts of many turns with outputs up to ``max_output`` characters:
    parallel calls, error and synthesized results, grouped results, interjections,
    notifications, cancelled rounds. ``ending``: ``input`` or ``tool_result``."""
    items: list[al.Item] = []
    if draw(st.integers(0, 4)):
        items.append(system(draw(_words)))
    if draw(st.integers(0, 5)) == 0:
        items.append(al.Item.text(K.DEVELOPER, draw(_words)))
    counter = 0

    def tool_round() -> None:
        nonlocal counter
        ids = []
        for _ in range(draw(st.integers(1, 3))):
            counter += 1
            ids.append(f"c{counter}")
        parts: list[al.Part] = []
        if draw(st.booleans()):
            parts.append(al.TextPart(draw(_words)))
        parts.extend(al.ToolCallPart(i, "search", {"q": i}) for i in ids)
        items.append(al.Item(K.ASSISTANT, parts, finish_reason=al.FinishReason.TOOL_CALL))
        results = []
        for call_id in draw(st.permutations(ids)):
            outcome = draw(st.sampled_from(_OUTCOMES))
            size = draw(st.sampled_from([0, 10, 200, 1_000, max_output]))
            output: Any = draw(_words) * (1 + size // 20)
            if draw(st.integers(0, 5)) == 0:
                output = {"rows": [output[:50]] * (1 + size // 60)}
            metadata = {al.tools.OUTCOME_KEY: outcome} if outcome else {}
            error = outcome is not None or draw(st.integers(0, 6)) == 0
            results.append(al.ToolResultPart(call_id, output, error, metadata=metadata))
        if len(results) > 1 and draw(st.booleans()):
            items.append(al.Item(K.TOOL, results))
        else:
            items.extend(al.Item(K.TOOL, [part]) for part in results)

    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        last = turn == turns - 1
        kind = K.NOTIFICATION if draw(st.integers(0, 6)) == 0 else K.USER
        items.append(al.Item.text(kind, f"turn {turn}: {draw(_words)}"))
        if last and ending == "input":
            break
        rounds = draw(st.integers(1 if last else 0, 3))
        for _ in range(rounds):
            tool_round()
            if not last and draw(st.integers(0, 5)) == 0:
                items.append(user(f"interjection: {draw(_words)}"))
        if last:
            break
        items.append(answer(draw(_words)))
    return items
