"""Structured output through the loop: each mode, retries, the typed error, tools first."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

import agentloop as al
import agentloop.output
import agentloop.tools
import agentloop.transcript
from agentloop.testing import ScriptedModel, call, tool_calls

pytestmark = pytest.mark.anyio


@attrs.frozen
class City:
    """A city and its population."""

    name: str
    population: int


CITY_SCHEMA = {
    "type": "object",
    "description": "A city and its population.",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
    "additionalProperties": False,
}


@al.tool
def lookup(city: str) -> str:
    """Look up a city's population."""
    return {"Paris": "2102650"}[city]


def agent(model: ScriptedModel, **output: Any) -> al.Agent[Any, City]:
    registry = al.ToolRegistry().with_tool(lookup)
    return al.Agent.builder().model(model).add_tool_source(registry).output(City, **output).build()


def kinds(items: Any) -> list[str]:
    return [item.kind.value for item in items]


async def test_tool_mode_is_chosen_for_a_model_without_a_native_mode() -> None:
    model = ScriptedModel([tool_calls(call("final_answer", {"name": "Paris", "population": 2}))])
    result = await al.run(agent(model), "Which city?")

    assert result.output == City("Paris", 2)
    assert result.turns[0].output == City("Paris", 2)
    assert result.finish_reason is al.FinishReason.COMPLETED
    request = model.requests[0]
    assert request.output is not None
    assert request.output.mode is al.OutputMode.TOOL
    assert [spec.name for spec in request.available_tools] == ["final_answer", "lookup"]
    assert request.available_tools[0].input_schema == CITY_SCHEMA
    assert kinds(result.transcript) == ["user", "assistant", "tool"]
    assert list(result.transcript[-1].tool_results()) == [al.ToolResultPart("call-1", "accepted")]
    al.transcript.validate_transcript(result.transcript)
    model.assert_complete()


async def test_native_mode_reads_the_json_text_and_offers_no_answer_tool() -> None:
    model = ScriptedModel(['{"name": "Rome", "population": 3}'])
    result = await al.run(agent(model, mode="native"), "Which city?")

    assert result.output == City("Rome", 3)
    request = model.requests[0]
    assert request.output is not None
    assert request.output.mode is al.OutputMode.NATIVE
    assert [spec.name for spec in request.available_tools] == ["lookup"]
    assert kinds(result.transcript) == ["user", "assistant"]


async def test_tools_first_then_the_typed_answer_in_one_turn() -> None:
    model = ScriptedModel(
        [
            tool_calls(call("lookup", {"city": "Paris"})),
            tool_calls(call("final_answer", {"name": "Paris", "population": 2102650})),
        ]
    )
    result = await al.run(agent(model), "How many people live in Paris?")

    assert result.output == City("Paris", 2102650)
    assert len(result.turns) == 1
    assert [executed.tool_name for executed in result.turns[0].tool_calls] == ["lookup"]
    assert kinds(result.transcript) == ["user", "assistant", "tool", "assistant", "tool"]
    al.transcript.validate_transcript(result.transcript)


async def test_a_native_answer_that_does_not_validate_goes_back_and_the_model_retries() -> None:
    model = ScriptedModel(['{"name": "Rome"}', '{"name": "Rome", "population": 3}'])
    result = await al.run(agent(model, mode="native"), "Which city?")

    assert result.output == City("Rome", 3)
    feedback = model.requests[1].transcript[-1]
    assert feedback.kind is al.ItemKind.USER
    assert feedback.text_content == (
        "Your answer did not match the output schema 'City': at $: 'population' is a "
        "required property. Answer again with only a JSON value that matches the schema."
    )
    assert kinds(result.transcript) == ["user", "assistant", "user", "assistant"]
    assert [record.index for record in result.turns[0].model_calls] == [1, 2]


async def test_a_final_answer_that_does_not_validate_gets_an_error_result() -> None:
    model = ScriptedModel(
        [
            tool_calls(call("final_answer", {"name": "Rome", "population": "many"})),
            tool_calls(call("final_answer", {"name": "Rome", "population": 3})),
        ]
    )
    result = await al.run(agent(model), "Which city?")

    assert result.output == City("Rome", 3)
    rejected = next(model.requests[1].transcript[-1].tool_results())
    assert rejected == al.ToolResultPart(
        "call-1",
        "not accepted: the answer does not match the output schema 'City': at "
        "$.population: 'many' is not of type 'integer'. Call final_answer again with a "
        "corrected answer.",
        True,
    )
    al.transcript.validate_transcript(result.transcript)


async def test_past_the_limit_the_turn_ends_with_a_typed_error_and_no_value() -> None:
    model = ScriptedModel(["not json", '{"name": 1, "population": 2}'])
    result = await al.run(agent(model, mode="native", max_retries=1), "Which city?")

    turn = result.turns[0]
    assert turn.finish_reason is al.FinishReason.ERROR
    assert turn.output is None
    error = turn.error
    assert isinstance(error, al.OutputValidationError)
    assert error.kind is al.ProviderErrorKind.INVALID_RESPONSE
    assert error.error_type == "invalid_output"
    assert error.problems == ("at $.name: 1 is not of type 'string'",)
    assert error.answer == '{"name": 1, "population": 2}'
    assert error.attempts == 2
    assert str(error) == (
        "the model's output did not match the schema 'City' after 2 answers: "
        "at $.name: 1 is not of type 'string'"
    )
    with pytest.raises(al.InvalidStateError) as raised:
        result.output  # noqa: B018
    assert str(raised.value) == (
        "cannot read the output 'City': the run stopped with finished and the last turn "
        f"ended error: {error}; no validated output exists"
    )
    # The rejected last answer is not in the transcript: retry() asks again from here.
    assert kinds(result.transcript) == ["user", "assistant", "user"]
    assert result.transcript[-1].text_content.startswith(
        "Your answer did not match the output schema 'City': at $: the answer is not JSON"
    )


async def test_retry_after_the_typed_error_asks_the_model_again() -> None:
    model = ScriptedModel(["{}", '{"name": "Oslo", "population": 1}'])
    failed = await al.run(agent(model, mode="native", max_retries=0), "Which city?")
    assert isinstance(failed.error, al.OutputValidationError)

    retried = await al.continue_from(failed)
    assert retried.output == City("Oslo", 1)
    assert kinds(retried.transcript) == ["user", "assistant"]


async def test_an_answer_called_beside_other_tools_is_not_taken() -> None:
    model = ScriptedModel(
        [
            tool_calls(
                call("lookup", {"city": "Paris"}),
                call("final_answer", {"name": "Paris", "population": 0}),
            ),
            tool_calls(call("final_answer", {"name": "Paris", "population": 2102650})),
        ]
    )
    result = await al.run(agent(model), "How many people live in Paris?")

    assert result.output == City("Paris", 2102650)
    sent = model.requests[1].transcript
    first_round = [part for item in sent[2:] for part in item.tool_results()]
    assert [(part.call_id, part.output, part.is_error) for part in first_round] == [
        ("call-1", "2102650", False),
        (
            "call-2",
            "not accepted: final_answer was called together with other tools; call "
            "final_answer alone, after you have read their results",
            True,
        ),
    ]
    al.transcript.validate_transcript(result.transcript)


async def test_a_text_reply_in_tool_mode_is_taken_when_it_validates() -> None:
    model = ScriptedModel([json.dumps({"name": "Lima", "population": 9})])
    result = await al.run(agent(model), "Which city?")
    assert result.output == City("Lima", 9)


async def test_a_text_reply_in_tool_mode_that_does_not_validate_asks_for_the_tool() -> None:
    model = ScriptedModel(
        ["Lima!", tool_calls(call("final_answer", {"name": "Lima", "population": 9}))]
    )
    result = await al.run(agent(model), "Which city?")

    assert result.output == City("Lima", 9)
    assert model.requests[1].transcript[-1].text_content == (
        "Give your final answer by calling the final_answer tool; your reply did not match "
        "the output schema 'City': at $: the answer is not JSON (Expecting value: line 1 "
        "column 1 (char 0)): 'Lima!'."
    )


async def test_plain_types_typed_dicts_and_json_schemas_are_outputs() -> None:
    model = ScriptedModel(['{"result": [1, 2]}', '{"a": 1}'])
    numbers = al.Agent.builder().model(model).output(list[int], mode="native").build()
    assert (await al.run(numbers, "n?")).output == [1, 2]

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    raw = al.Agent.builder().model(model).output(schema, mode="native", name="pair").build()
    assert (await al.run(raw, "a?")).output == {"a": 1}


async def test_an_agent_without_output_has_none() -> None:
    model = ScriptedModel(["hello"])
    result = await al.run(al.Agent.builder().model(model).build(), "hi")
    assert result.output is None
    assert result.turns[0].output is None
    assert model.requests[0].output is None


async def test_stream_returns_the_output() -> None:
    model = ScriptedModel([tool_calls(call("final_answer", {"name": "Bern", "population": 1}))])
    async with al.stream(agent(model), "Which city?") as events:
        async for _item in events:
            pass
    assert (await events.result()).output == City("Bern", 1)


def test_run_sync_returns_the_output() -> None:
    model = ScriptedModel([tool_calls(call("final_answer", {"name": "Bern", "population": 1}))])
    assert al.run_sync(agent(model), "Which city?").output == City("Bern", 1)


def test_builder_refuses_what_cannot_be_an_output() -> None:
    builder = al.Agent.builder()
    with pytest.raises(al.InvalidInputError) as raised:
        builder.output(object)
    assert str(raised.value).startswith("cannot use <class 'object'> as an output type: ")
    with pytest.raises(al.InvalidInputError) as raised:
        builder.output(City, mode="json")
    assert str(raised.value) == "output mode must be 'auto', 'native' or 'tool', got 'json'"
    with pytest.raises(al.InvalidInputError) as raised:
        builder.output(City, max_retries=-1)
    assert str(raised.value) == "output max_retries must be an int >= 0, got -1"
    with pytest.raises(al.InvalidInputError) as raised:
        builder.output({"type": "nonsense"})
    assert str(raised.value).startswith("the output schema is not a valid JSON Schema: ")
    with pytest.raises(al.InvalidInputError) as raised:
        builder.output(al.output.output_spec(City), max_retries=-2)
    assert str(raised.value) == "output max_retries must be an int >= 0, got -2"
    # Nothing was set by the refused calls.
    assert builder.model(ScriptedModel([])).build().output is None
