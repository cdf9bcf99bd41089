"""Schemas from type hints agree with strict structuring (hypothesis), plus exact schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import attrs
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_support import Color, Level, json_values, to_json, type_hints, values_of

import agentloop as al
import agentloop.tools


def probe_tool(hint: Any) -> al.tools.FunctionTool[..., str]:
    def probe(value):  # type: ignore[no-untyped-def]
        return ""

    probe.__annotations__ = {"value": hint, "return": str}
    return al.tool(probe)


def schema_accepts(tool: al.tools.FunctionTool[..., str], value: Any) -> bool:
    return jsonschema.Draft202012Validator(tool.spec.input_schema).is_valid({"value": value})


def structures(tool: al.tools.FunctionTool[..., str], value: Any) -> bool:
    try:
        tool.arguments({"value": value})
    except al.InvalidInputError:
        return False
    return True


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), type_hints)
def test_schema_accepts_well_typed_values_and_they_round_trip(
    data: st.DataObject, hint: Any
) -> None:
    tool = probe_tool(hint)
    jsonschema.Draft202012Validator.check_schema(tool.spec.input_schema)
    value = to_json(data.draw(values_of(hint)))
    assert schema_accepts(tool, value)
    structured = tool.arguments({"value": value})["value"]
    assert to_json(structured) == value


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), type_hints, type_hints)
def test_schema_and_structuring_agree_on_any_json(
    data: st.DataObject, hint: Any, other: Any
) -> None:
    tool = probe_tool(hint)
    value = data.draw(json_values | values_of(other).map(to_json))
    assert schema_accepts(tool, value) == structures(tool, value), (hint, value)


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (list, {"type": "array"}),
        (dict, {"type": "object"}),
        (tuple[()], {"type": "array", "maxItems": 0}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Literal[1, 2.5], {"type": "number", "enum": [1, 2.5]}),
        (Literal["a", None], {"enum": ["a", None]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (
            Annotated[list[Color], "colors"],
            {
                "type": "array",
                "items": {"type": "string", "enum": ["red", "green"]},
                "description": "colors",
            },
        ),
    ],
)
def test_exact_schemas(hint: Any, schema: dict[str, Any]) -> None:
    assert al.tools.json_schema_for(hint) == schema


@attrs.frozen
class Node:
    children: list[Node]


def test_recursive_attrs_classes_are_refused() -> None:
    with pytest.raises(TypeError) as caught:
        al.tools.json_schema_for(Node)
    assert str(caught.value) == (
        "cannot describe Node in JSON Schema: it contains itself; recursive attrs classes are "
        "not supported"
    )
