"""Output specs: the schema of each kind of target, and how answers are judged."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.output
from agentloop.core._items import Item, ItemKind, ToolCallPart
from agentloop.output._answer import OUTPUT_REJECTED_KEY, Accepted, Exhausted, Rejected, judge
from agentloop.testing import invalid_outputs, output_reply, outputs


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Label:
    """A label."""

    text: Annotated[str, "what it says"]
    color: Color


@dataclasses.dataclass
class Parcel:
    labels: list[Label]
    weight: float
    size: Literal["s", "m"] | None
    dims: tuple[int, int]


class Move(TypedDict):
    piece: str
    capture: NotRequired[bool]


LABEL = {
    "type": "object",
    "description": "A label.",
    "properties": {
        "text": {"type": "string", "description": "what it says"},
        "color": {"enum": ["red", "blue"]},
    },
    "required": ["text", "color"],
    "additionalProperties": False,
}


def test_an_attrs_class_gives_a_strict_object_schema() -> None:
    spec = al.output.output_spec(Label)
    assert (spec.name, spec.wrapped, spec.strict, spec.description) == (
        "Label",
        False,
        True,
        "A label.",
    )
    assert spec.schema == LABEL
    assert spec.parse('{"text": "hi", "color": "red"}') == Label("hi", Color.RED)


def test_a_dataclass_nests_and_its_generated_doc_is_not_a_description() -> None:
    spec = al.output.output_spec(Parcel)
    assert spec.schema == {
        "type": "object",
        "properties": {
            "labels": {"type": "array", "items": LABEL},
            "weight": {"type": "number"},
            "size": {"anyOf": [{"enum": ["s", "m"]}, {"type": "null"}]},
            "dims": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "integer"}],
                "minItems": 2,
                "maxItems": 2,
            },
        },
        "required": ["labels", "weight", "size", "dims"],
        "additionalProperties": False,
    }
    value = spec.parse(
        '{"labels": [{"text": "a", "color": "blue"}], "weight": 2, "size": null, "dims": [1, 2]}'
    )
    assert value == Parcel([Label("a", Color.BLUE)], 2.0, None, (1, 2))


def test_a_typed_dict_keeps_its_optional_keys_optional_and_is_not_strict() -> None:
    spec = al.output.output_spec(Move)
    assert spec.schema["required"] == ["piece"]
    assert spec.strict is False
    assert spec.parse('{"piece": "knight"}') == {"piece": "knight"}


def test_a_plain_type_is_wrapped_in_an_object() -> None:
    spec = al.output.output_spec(int)
    assert spec.wrapped is True
    assert spec.schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
    }
    assert spec.parse('{"result": 7}') == 7
    assert spec.unstructure(7) == {"result": 7}


def test_answers_in_a_markdown_fence_are_read() -> None:
    spec = al.output.output_spec(int)
    assert spec.parse('```json\n{"result": 1}\n```') == 1
    assert spec.parse('```\n{"result": 2}\n```') == 2


def test_every_problem_is_listed_with_its_path() -> None:
    spec = al.output.output_spec(Parcel)
    with pytest.raises(al.output.OutputProblems) as raised:
        spec.check({"labels": [{"text": 1, "color": "green"}], "weight": "x", "dims": [1]})
    assert raised.value.problems == (
        "at $: 'size' is a required property",
        "at $.dims: [1] is too short",
        "at $.labels[0].color: 'green' is not one of ['red', 'blue']",
        "at $.labels[0].text: 1 is not of type 'string'",
        "at $.weight: 'x' is not of type 'number'",
    )
    assert isinstance(raised.value, al.InvalidInputError)


@attrs.frozen
class Node:
    children: list[Node]


def test_recursive_types_and_bad_names_are_refused() -> None:
    with pytest.raises(al.InvalidInputError) as raised:
        al.output.output_spec(Node)
    assert "it contains itself; recursive output types are not supported" in str(raised.value)
    with pytest.raises(al.InvalidInputError) as raised:
        al.output.output_spec(int, name="has space")
    assert str(raised.value) == (
        "output name must be 1-64 letters, digits, '_' or '-', got 'has space'"
    )


SPECS = [al.output.output_spec(target) for target in (Label, Parcel, Move, int, list[str])]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SPECS).flatmap(lambda spec: st.tuples(st.just(spec), outputs(spec))))
def test_generated_valid_outputs_are_accepted_and_round_trip(drawn: Any) -> None:
    spec, value = drawn
    typed = spec.check(value)
    assert spec.check(spec.unstructure(typed)) == typed
    verdict = judge(spec.with_mode(al.OutputMode.NATIVE), [answer_item(spec, value)], [], [])
    assert verdict == Accepted(typed)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(SPECS).flatmap(lambda spec: st.tuples(st.just(spec), invalid_outputs(spec))),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_generated_invalid_outputs_are_rejected_until_the_limit(
    drawn: Any, failures: int, limit: int
) -> None:
    spec, value = drawn
    spec = attrs.evolve(spec, mode=al.OutputMode.TOOL, max_retries=limit)
    problems = spec.problems(value)
    assert problems
    with pytest.raises(al.output.OutputProblems):
        spec.check(value)
    earlier = [Item(ItemKind.TOOL, (), metadata={OUTPUT_REJECTED_KEY: True})] * failures
    answer = ToolCallPart("c1", "final_answer", value)
    verdict = judge(spec, [Item(ItemKind.ASSISTANT, (answer,))], [answer], earlier)
    if failures >= limit:
        assert isinstance(verdict, Exhausted)
        assert verdict.error.problems == tuple(problems)
        assert verdict.error.attempts == failures + 1
        assert verdict.error.answer == value
    else:
        assert isinstance(verdict, Rejected)
        (item,) = verdict.items
        (result,) = item.tool_results()
        assert result.is_error is True
        assert "; ".join(problems) in result.output
        assert item.metadata == {OUTPUT_REJECTED_KEY: True}


def answer_item(spec: al.output.OutputSpec[Any], value: Any) -> Item:
    reply = output_reply(spec.with_mode(al.OutputMode.NATIVE), value)
    (item,) = reply.steps[-1].output_items  # type: ignore[union-attr]
    return item
