"""ScriptedModel.assert_requests_valid checks the provider invariant and the tail rule."""

from __future__ import annotations

import pytest

import agentloop as al
import agentloop.model
from agentloop.testing import ScriptedModel


async def ask(model: ScriptedModel, transcript: list[al.Item]) -> None:
    stream = await model.begin_turn(al.model.TurnRequest("s", "t", transcript), None)
    async for _ in stream:
        pass


CALL = al.Item(al.ItemKind.ASSISTANT, [al.ToolCallPart("c1", "ls", {})])
RESULT = al.Item(al.ItemKind.TOOL, [al.ToolResultPart("c1", "a.txt")])
USER = al.Item.text(al.ItemKind.USER, "list")


async def test_valid_requests_pass(anyio_backend: str) -> None:
    model = ScriptedModel(["ok", "ok"])
    await ask(model, [USER])
    await ask(model, [USER, CALL, RESULT])
    model.assert_requests_valid()


async def test_an_interleaved_request_fails_with_the_rule(anyio_backend: str) -> None:
    model = ScriptedModel(["ok", "ok"])
    await ask(model, [USER])
    await ask(model, [USER, CALL, al.Item.text(al.ItemKind.CONTEXT, "note"), RESULT])
    with pytest.raises(AssertionError) as raised:
        model.assert_requests_valid()
    assert str(raised.value).startswith(
        "ScriptedModel: request 2: transcript invariant violation: item between tool_call(s) "
        "c1 and their tool_result(s): providers need the results right after the assistant "
        "item that made the calls at item 2; transcript of 4 item(s):\n"
    )


async def test_a_request_with_nothing_to_answer_fails(anyio_backend: str) -> None:
    model = ScriptedModel(["ok"])
    await ask(model, [USER, al.Item.text(al.ItemKind.ASSISTANT, "done")])
    with pytest.raises(AssertionError) as raised:
        model.assert_requests_valid()
    assert str(raised.value) == (
        "ScriptedModel: request 1 ends with nothing to answer (the last item must be user, "
        "tool or notification input):\n     [0] user: text 'list'\n     [1] assistant: text 'done'"
    )
