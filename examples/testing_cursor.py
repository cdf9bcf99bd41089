"""TranscriptCursor, Item helpers, and the error a broken transcript raises (docs/testing.md)."""

import anyio
import attrs
import pytest

import agentloop as al
from agentloop import Item, ItemKind
from agentloop.testing import ScriptedModel, call, check_mutator, tool_calls
from agentloop.transcript import MutationContext, TranscriptCursor


class StubOldOutputs:
    """Replaces tool outputs before the latest round with a stub (results stay in place)."""

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        rounds = [i for i, item in enumerate(cursor.items) if any(True for _ in item.tool_calls())]
        for index, item in enumerate(cursor.items):  # cursor.items: a read-only view
            if item.kind is ItemKind.TOOL and rounds and index < rounds[-1]:
                stubs = [attrs.evolve(r, output="[old output]") for r in item.tool_results()]
                cursor[index] = attrs.evolve(item, parts=stubs)  # writes go through the cursor


class NoteAfterCalls:
    """The bug: a context note between an assistant item's calls and their results."""

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        for index in reversed(range(len(cursor))):
            if any(True for _ in cursor[index].tool_calls()):
                cursor.insert(index + 1, Item.text(ItemKind.CONTEXT, "tools were called"))


def test_the_cursor_and_item_helpers() -> None:
    ask = Item(ItemKind.ASSISTANT, [al.TextPart("let me look"), al.ToolCallPart("c1", "ls", {})])
    answer = Item(ItemKind.TOOL, [al.ToolResultPart("c1", "a.txt b.txt")])
    items = [Item.text(ItemKind.USER, "list files"), ask, answer]
    assert ask.text_content == "let me look"
    assert [c.name for c in ask.tool_calls()] == ["ls"]
    assert [r.call_id for r in answer.tool_results()] == ["c1"]
    assert Item.notification("job 7 finished").kind is ItemKind.NOTIFICATION

    cursor = TranscriptCursor(items)
    assert not cursor.dirty
    assert list(cursor) == items
    with pytest.raises(AttributeError):
        cursor.items.append(answer)  # type: ignore[attr-defined]  # read-only: no bypass
    cursor.append(Item.text(ItemKind.USER, "thanks"))
    assert cursor.dirty
    assert (len(cursor), len(items)) == (4, 3)  # the list was copied on the first write


def test_the_kit_raises_assertion_error() -> None:
    check_mutator(StubOldOutputs, max_examples=50)
    with pytest.raises(AssertionError, match="item between tool_call"):
        check_mutator(NoteAfterCalls, max_examples=50)


def test_the_driver_raises_mutator_error() -> None:
    async def main() -> None:
        model = ScriptedModel([tool_calls(call("missing_tool")), "done"])
        agent = al.Agent.builder().model(model).mutator(NoteAfterCalls()).build()
        driver = await agent.start("s")
        driver.submit_input([Item.text(ItemKind.USER, "go")])
        assert isinstance(await driver.next(), al.AfterToolResult)
        with pytest.raises(al.MutatorError, match="broke the transcript: item between"):
            await driver.next()  # the pass before the continuation call

    anyio.run(main)


if __name__ == "__main__":
    test_the_cursor_and_item_helpers()
    test_the_kit_raises_assertion_error()
    test_the_driver_raises_mutator_error()
    print("cursor: writes go through the cursor; both errors raised")
