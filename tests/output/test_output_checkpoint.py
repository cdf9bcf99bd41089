"""Checkpoints keep the output spec: a restored session validates the same way."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.output
from agentloop.testing import ScriptedModel, call, tool_calls

pytestmark = pytest.mark.anyio


@attrs.frozen
class Score:
    player: str
    points: int


def agent(model: ScriptedModel, target: Any = Score, **options: Any) -> al.Agent[Any, Any]:
    builder = al.Agent.builder().model(model)
    if target is not None:
        builder = builder.output(target, **options)
    return builder.build()


async def finished(driver: al.LoopDriver) -> al.TurnResult:
    step = await driver.next()
    assert isinstance(step, al.Finished), step
    return step.result


async def checkpointed_after_one_turn() -> dict[str, Any]:
    model = ScriptedModel([tool_calls(call("final_answer", {"player": "ada", "points": 3}))])
    driver = await agent(model).start("s")
    driver.submit_input("score?")
    assert (await finished(driver)).output == Score("ada", 3)
    return json.loads(json.dumps(driver.checkpoint()))


async def test_the_checkpoint_holds_the_resolved_spec() -> None:
    document = await checkpointed_after_one_turn()
    assert document["config"]["output"] == {
        "name": "Score",
        "schema": {
            "type": "object",
            "properties": {"player": {"type": "string"}, "points": {"type": "integer"}},
            "required": ["player", "points"],
            "additionalProperties": False,
        },
        "wrapped": False,
        "mode": "tool",
        "max_retries": 2,
        "description": None,
    }


async def test_resumed_with_the_same_agent_the_output_is_typed_again() -> None:
    document = await checkpointed_after_one_turn()
    model = ScriptedModel(
        [
            tool_calls(call("final_answer", {"player": "bob"})),
            tool_calls(call("final_answer", {"player": "bob", "points": 5})),
        ]
    )
    driver = await agent(model).resume(document)
    driver.submit_input("and now?")
    result = await finished(driver)
    assert result.output == Score("bob", 5)
    rejected = next(model.requests[1].transcript[-1].tool_results())
    assert rejected.is_error is True
    assert "at $: 'points' is a required property" in rejected.output


async def test_resumed_by_an_agent_without_output_the_checkpoint_schema_still_validates() -> None:
    document = await checkpointed_after_one_turn()
    model = ScriptedModel(
        [
            tool_calls(call("final_answer", {"player": "bob", "points": "x"})),
            tool_calls(call("final_answer", {"player": "bob", "points": 5})),
        ]
    )
    driver = await agent(model, target=None).resume(document)
    driver.submit_input("and now?")
    result = await finished(driver)
    assert result.output == {"player": "bob", "points": 5}  # the JSON value: no type
    assert [spec.name for spec in model.requests[0].available_tools] == ["final_answer"]


async def test_resuming_with_a_different_output_schema_is_refused() -> None:
    document = await checkpointed_after_one_turn()
    with pytest.raises(al.CheckpointError) as raised:
        await agent(ScriptedModel([]), target=int).resume(document)
    message = str(raised.value)
    assert message.startswith(
        "cannot start session 's': its output schema 'Score' differs from the agent's 'int' "
    )
    assert message.endswith("resume it with an agent built with the same .output()")


async def test_a_damaged_output_document_is_a_checkpoint_error() -> None:
    document = await checkpointed_after_one_turn()
    del document["config"]["output"]["wrapped"]
    with pytest.raises(al.CheckpointError) as raised:
        await agent(ScriptedModel([])).resume(document)
    assert "an output spec document must have the keys" in str(raised.value)


def specs() -> st.SearchStrategy[al.output.OutputSpec[Any]]:
    targets = st.sampled_from([Score, int, list[str], {"type": "object"}, dict[str, float]])
    return st.builds(
        al.output.output_spec,
        targets,
        name=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
        mode=st.sampled_from(list(al.OutputMode)),
        max_retries=st.integers(0, 5),
        description=st.none() | st.text(max_size=20),
    )


@settings(max_examples=40, deadline=None)
@given(specs())
def test_an_output_spec_round_trips_through_a_session_config(
    spec: al.output.OutputSpec[Any],
) -> None:
    config = al.SessionConfig("s", output=spec)
    data = json.loads(json.dumps(al.unstructure(config)))
    restored = al.structure(data, al.SessionConfig)
    assert restored == config  # the type is not kept (eq ignores it): the schema is
    assert restored.output is not None
    assert restored.output.target is None
    assert "output" not in al.unstructure(al.SessionConfig("s"))
