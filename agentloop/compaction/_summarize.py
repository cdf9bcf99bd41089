"""``SummarizeOlder``: replace older turns with a summary written by a nested model call."""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from ..core._errors import MutatorError
from ..core._items import (
    Item,
    ItemKind,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..model._protocol import ModelAdapter, ModelTurnResult, TurnRequest
from ..model._session_config import SessionConfig
from ._pipeline import CompactionRequest
from ._strategies import SUMMARY_KEY, check_count, choose_cut, split_at, to_kinds
from ._tokens import output_text

__all__ = ["DEFAULT_SUMMARY_PROMPT", "SummarizeOlder", "render_for_summary"]

DEFAULT_SUMMARY_PROMPT = (
    "You compress an agent's conversation history into a durable note that replaces it. "
    "Keep names, numbers, dates, file paths, decisions, open questions, the user's goals "
    "and preferences, which tools were called and what they found. Drop chatter and "
    "reasoning. Write plain text, at most a few hundred words, in the third person."
)
"""The system prompt of the nested summary call."""

_SUMMARY_HEADER = "Summary of the earlier conversation (written by compaction):\n"
_RESULT_CHARS = 1_500  # of one tool output shown to the summarizer


def _brief(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def _render_part(part: object) -> str | None:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolCallPart):
        return f"(called tool {part.name} [{part.id}] with {json.dumps(part.input, default=str)})"
    if isinstance(part, ToolResultPart):
        status = "error" if part.is_error else "result"
        body = _brief(output_text(part.output), _RESULT_CHARS)
        return f"({status} of call {part.call_id}: {body})"
    if isinstance(part, StructuredPart):
        return json.dumps(part.value, default=str)
    if isinstance(part, ReasoningPart):
        return None  # reasoning is not history worth keeping
    return f"({type(part).__name__})"


def render_for_summary(items: Sequence[Item], *, max_chars: int = 60_000) -> str:
    """``items`` as blocks of ``[KIND]`` and their text, for the summarizer.

    Tool outputs are shortened to their head and tail; the whole text to
    ``max_chars`` (its start and end kept).
    """
    blocks = []
    for item in items:
        texts = [text for part in item.parts if (text := _render_part(part))]
        if texts:
            blocks.append(f"[{item.kind.value.upper()}]\n" + "\n".join(texts))
    return _brief("\n\n".join(blocks), max_chars)


@attrs.define(kw_only=True)
class SummarizeOlder:
    """Replace the older part of the transcript with a summary from ``model``.

    The cut is chosen as :class:`KeepRecent` does (at least the newest
    ``keep_last`` items, at an input item, no pair split, moved later to fit
    a token target); the system prompt stays. The dropped items, including
    any earlier summary, are rendered as text and sent to ``model`` (any
    :class:`~agentloop.ModelAdapter`) in a nested session
    ``"<session_id>/compaction"`` with ``prompt`` as its system prompt; its
    text answer becomes one context item where the dropped items were, with
    ``metadata["agentloop.compaction.summary"]`` = the number of items it
    covers. An answer without text raises ``MutatorError``.
    """

    model: ModelAdapter
    keep_last: int | None = 20
    prompt: str = DEFAULT_SUMMARY_PROMPT
    max_summary_tokens: int = 800
    max_input_chars: int = 60_000
    preserve: frozenset[ItemKind] = attrs.field(
        default=frozenset({ItemKind.SYSTEM, ItemKind.DEVELOPER}), converter=to_kinds
    )
    name: str = "summarize_older"

    def __attrs_post_init__(self) -> None:
        if self.keep_last is not None:
            check_count("SummarizeOlder", "keep_last", self.keep_last, 0)
        check_count("SummarizeOlder", "max_summary_tokens", self.max_summary_tokens, 1)
        check_count("SummarizeOlder", "max_input_chars", self.max_input_chars, 100)

    async def apply(self, items: list[Item], request: CompactionRequest) -> list[Item]:
        """Summarize what falls before the cut (see the class docstring)."""
        cut = choose_cut(
            items,
            request,
            keep_last=self.keep_last,
            preserve=self.preserve,
            summaries=False,
            replacement_tokens=self.max_summary_tokens,
        )
        if cut == 0:
            return items
        kept, dropped = split_at(items, cut, self.preserve, summaries=False)
        if not dropped:
            return items
        summary = await self._summarize(dropped, request)
        covered = sum(_covered(item) for item in dropped)
        item = Item(
            ItemKind.CONTEXT,
            (TextPart(_SUMMARY_HEADER + summary),),
            metadata={SUMMARY_KEY: covered},
        )
        return [*kept, item, *items[cut:]]

    async def _summarize(self, dropped: list[Item], request: CompactionRequest) -> str:
        config = SessionConfig(f"{request.session_id}/compaction")
        session = await self.model.start_session(config)
        rendered = render_for_summary(dropped, max_chars=self.max_input_chars)
        ask = (
            f"Compress the transcript below into a note of at most {self.max_summary_tokens} "
            f"tokens.\n\n{rendered}"
        )
        nested = TurnRequest(
            config.session_id,
            f"{request.turn_id or 'turn'}/compaction",
            (Item.text(ItemKind.SYSTEM, self.prompt), Item.text(ItemKind.USER, ask)),
        )
        stream = await session.begin_turn(nested, request.cancellation)
        result: ModelTurnResult | None = None
        try:
            async for event in stream:
                if isinstance(event, ModelTurnResult):
                    result = event
                    break
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        text = (
            ""
            if result is None
            else "\n".join(item.text_content for item in result.output_items if item.text_content)
        )
        if not text.strip():
            raise MutatorError(
                f"{self.name}: the summary model answered without text "
                f"({'no result' if result is None else result.finish_reason.value}); "
                f"{len(dropped)} items were left as they were"
            )
        return text.strip()


def _covered(item: Item) -> int:
    earlier = item.metadata.get(SUMMARY_KEY)
    return earlier if isinstance(earlier, int) and not isinstance(earlier, bool) else 1
