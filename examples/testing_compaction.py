"""Property-test a compaction mutator with agentloop.testing (docs/testing.md)."""

import pytest

from agentloop import Item, ItemKind
from agentloop.testing import check_mutator
from agentloop.transcript import MutationContext, TranscriptCursor


class KeepRecentTurns:
    """Compaction that drops old items, cutting only where a user turn starts."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        starts = [i for i, item in enumerate(cursor) if item.kind is ItemKind.USER]
        cut = next((i for i in starts if len(cursor) - i <= self.keep), 0)
        if cut > 1:
            cursor[:cut] = [Item.text(ItemKind.CONTEXT, f"[{cut} earlier items compacted]")]


class KeepRecentItems(KeepRecentTurns):
    """The bug: cutting anywhere can separate a tool call from its result."""

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        del cursor[: max(0, len(cursor) - self.keep)]


def test_compaction_keeps_every_call_with_its_result() -> None:
    check_mutator(KeepRecentTurns, max_examples=50)  # both mutation points


def test_blind_compaction_is_caught() -> None:
    # The failure shows the shrunk transcript the mutator broke, and how.
    with pytest.raises(AssertionError, match="broke the transcript"):
        check_mutator(KeepRecentItems, max_examples=50)


if __name__ == "__main__":
    test_compaction_keeps_every_call_with_its_result()
    test_blind_compaction_is_caught()
    print("compaction: both properties hold")
