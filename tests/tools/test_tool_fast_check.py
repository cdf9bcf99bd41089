"""The validation fast path decides exactly as jsonschema (Draft 2020-12) on its subset."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import jsonschema
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.permissions
import agentloop.tools
from agentloop.tools._fast_check import compile_fast_check

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([0.0, 1.0, 1.5, -2.0, math.inf, math.nan]),
    st.sampled_from(["", "a", "b", "1"]),
)
_NAMES = st.sampled_from(["a", "b", "c"])

json_values = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_NAMES, inner, max_size=3)
    ),
    max_leaves=8,
)

_TYPE_NAMES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])


def _schema_nodes(
    inner: st.SearchStrategy[Any], enum_values: st.SearchStrategy[Any] = _SCALARS
) -> st.SearchStrategy[Any]:
    keyword = st.one_of(
        st.tuples(
            st.just("type"), st.one_of(_TYPE_NAMES, st.lists(_TYPE_NAMES, min_size=1, unique=True))
        ),
        st.tuples(st.just("properties"), st.dictionaries(_NAMES, inner, max_size=3)),
        st.tuples(st.just("required"), st.lists(_NAMES, max_size=3, unique=True)),
        st.tuples(st.just("additionalProperties"), inner),
        st.tuples(st.just("items"), inner),
        st.tuples(st.just("prefixItems"), st.lists(inner, min_size=1, max_size=2)),
        st.tuples(st.just("minItems"), st.integers(0, 3)),
        st.tuples(st.just("maxItems"), st.integers(0, 3)),
        st.tuples(st.just("enum"), st.lists(enum_values, min_size=1, max_size=4)),
        st.tuples(st.just("anyOf"), st.lists(inner, min_size=1, max_size=3)),
        st.tuples(st.just("description"), st.just("text")),
        st.tuples(st.just("default"), json_values),
    )
    return st.lists(keyword, max_size=4).map(dict)


_LEAVES: st.SearchStrategy[Any] = st.one_of(st.booleans(), st.just({}))
schemas = st.recursive(_LEAVES, _schema_nodes, max_leaves=10)
schemas_with_any_enum = st.recursive(
    _LEAVES, lambda inner: _schema_nodes(inner, json_values), max_leaves=10
)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return False


@settings(max_examples=1500, deadline=None)
@given(schemas, json_values)
def test_the_fast_check_agrees_with_jsonschema(schema: Any, instance: Any) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    check = compile_fast_check(schema)
    assert check is not None  # the whole generated subset is supported
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    if _has_nan(schema) or _has_nan(instance):  # NaN is never equal: may defer
        assert expected or not check(instance)
    else:
        assert check(instance) == expected


@settings(max_examples=500, deadline=None)
@given(schemas_with_any_enum, json_values)
def test_the_fast_check_never_accepts_what_jsonschema_rejects(schema: Any, instance: Any) -> None:
    """With arrays and objects in ``enum`` the fast path may defer, never accept wrongly."""
    jsonschema.Draft202012Validator.check_schema(schema)
    check = compile_fast_check(schema)
    assert check is not None
    if check(instance):
        assert jsonschema.Draft202012Validator(schema).is_valid(instance)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_a_tool_schema_checks_like_jsonschema(instance: Any) -> None:
    @al.tool
    def sample(name: str, count: int = 1, tags: list[str] | None = None) -> str:
        return name

    schema = sample.spec.input_schema
    check = compile_fast_check(schema)
    assert check is not None
    assert check(instance) == jsonschema.Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"type": "string", "minLength": 1},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "decimal"},
        {"anyOf": []},
        {"enum": {"a": 1}},
        {"minItems": -1},
        {"required": [1]},
        {"type": "object", "properties": {"a": {"format": "email"}}},
    ],
)
def test_schemas_outside_the_subset_have_no_fast_check(schema: dict[str, Any]) -> None:
    assert compile_fast_check(schema) is None


def test_subclasses_and_containers_in_enum_defer_to_jsonschema() -> None:
    check = compile_fast_check({"properties": {"a": {"type": "string"}}})
    assert check is not None
    assert check(OrderedDict(a=1)) is False  # jsonschema rejects it; the fast path defers
    assert check({"a": "x"}) is True
    enum_check = compile_fast_check({"enum": [[1], {"a": 1}, 2]})
    assert enum_check is not None
    assert enum_check([1]) is False  # valid, but decided by jsonschema
    assert enum_check(2) is True
    assert enum_check(2.0) is True
    assert enum_check(True) is False


@pytest.mark.parametrize(
    ("call_input", "problem"),
    [
        ({"value": "x"}, None),
        ({"value": 1}, "at $.value: 1 is not of type 'string'"),
        ({}, "at $: 'value' is a required property"),
    ],
)
def test_the_executor_still_words_problems_with_jsonschema(
    call_input: dict[str, Any], problem: str | None
) -> None:
    @al.tool
    def echo(value: str) -> str:
        return value

    executor = al.tools.BasicToolExecutor([al.ToolRegistry().with_tool(echo)])
    request = al.ToolRequest("c1", "echo", call_input, "s", "t")
    outcome = executor.prepare(request, al.permissions.AllowAll())
    if problem is None:
        assert isinstance(outcome, al.tools.PreparedCall)
    else:
        assert isinstance(outcome, al.ToolResultPart)
        assert outcome.output == f"invalid input for tool 'echo': {problem}"


# -- instances drawn from the schema: valid ones, and ones a step away from valid ------


def _instances_of(schema: Any) -> st.SearchStrategy[Any]:
    """Values meant to satisfy ``schema`` (exact for the keywords ``@tool`` writes; the
    property below compares with jsonschema, so an inexact draw only tests more)."""
    if not isinstance(schema, dict):
        return json_values
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_instances_of(option) for option in schema["anyOf"]])
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if not kinds:
        object_keys = ("properties", "required", "additionalProperties")
        array_keys = ("items", "prefixItems", "minItems", "maxItems")
        kinds = ["object"] if any(key in schema for key in object_keys) else []
        kinds += ["array"] if any(key in schema for key in array_keys) else []
    if not kinds:
        return json_values
    return st.one_of([_instances_of_type(schema, kind) for kind in kinds])


def _instances_of_type(schema: dict[str, Any], kind: str) -> st.SearchStrategy[Any]:
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "string": st.sampled_from(["", "a", "b"]),
        "integer": st.one_of(st.integers(-3, 3), st.just(2.0)),
        "number": st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.0])),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    if kind in scalars:
        return scalars[kind]
    if kind == "object":
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties", True)
        required = {
            name: _instances_of(properties.get(name, True)) for name in schema.get("required", [])
        }
        optional = {
            name: _instances_of(sub) for name, sub in properties.items() if name not in required
        }
        base = st.fixed_dictionaries(required, optional=optional)
        if additional is False:
            return base
        extra = st.dictionaries(st.sampled_from(["x", "y"]), _instances_of(additional), max_size=2)
        return st.builds(lambda known, more: {**more, **known}, base, extra)
    low, high = schema.get("minItems", 0), schema.get("maxItems", 4)
    high = max(high, low)  # minItems > maxItems: nothing is valid; draw near misses
    prefix = [_instances_of(sub) for sub in schema.get("prefixItems", [])]
    rest = _instances_of(schema.get("items", True))
    return st.builds(
        lambda head, tail: (head + tail)[: max(high, 0)],
        st.tuples(*prefix).map(list),
        st.lists(rest, min_size=max(low - len(prefix), 0), max_size=max(high - len(prefix), 0)),
    )


def _one_step_away(value: Any, data: st.DataObject) -> Any:
    """``value`` with one leaf or key replaced, dropped or added (often invalid)."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        change = data.draw(st.sampled_from(["drop", "replace", "descend"]))
        if change == "drop":
            return {k: v for k, v in value.items() if k != key}
        if change == "replace":
            return {**value, key: data.draw(json_values)}
        return {**value, key: _one_step_away(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        position = data.draw(st.integers(0, len(value) - 1))
        return [*value[:position], _one_step_away(value[position], data), *value[position + 1 :]]
    if isinstance(value, dict):
        return {**value, data.draw(_NAMES): data.draw(json_values)}
    return data.draw(json_values)


@settings(max_examples=1500, deadline=None)
@given(schemas, st.data())
def test_valid_and_nearly_valid_instances_are_decided_as_jsonschema_decides(
    schema: Any, data: st.DataObject
) -> None:
    """The same accept/reject decision as Draft 2020-12, on instances drawn from the
    schema (mostly valid) and one edit away from them (mostly invalid)."""
    instance = data.draw(_instances_of(schema), label="instance")
    if data.draw(st.booleans(), label="edit it"):
        instance = _one_step_away(instance, data)
    check = compile_fast_check(schema)
    assert check is not None
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    event("valid" if expected else "invalid")
    if _has_nan(schema) or _has_nan(instance):
        assert expected or not check(instance)
    else:
        assert check(instance) == expected


class _SchemaTool:
    """A tool that advertises any input schema and echoes its input."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.spec = al.ToolSpec("probe", "echoes its input", schema)

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        return request.input


@settings(max_examples=400, deadline=None)
@given(schemas, st.data())
def test_the_executor_accepts_exactly_what_jsonschema_accepts(
    schema: Any, data: st.DataObject
) -> None:
    """End to end: the fast path's deferrals included, a call is prepared if and only if
    jsonschema accepts its input (else it is answered with an invalid-input result)."""
    tool_schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    value = data.draw(_instances_of(schema), label="value")
    if data.draw(st.booleans(), label="edit it"):
        value = _one_step_away(value, data)
    if _has_nan(value):
        return
    executor = al.tools.BasicToolExecutor([al.ToolRegistry().with_tool(_SchemaTool(tool_schema))])
    request = al.ToolRequest("c1", "probe", {"value": value}, "s", "t")
    outcome = executor.prepare(request, al.permissions.AllowAll(), approved=False)
    accepted = jsonschema.Draft202012Validator(tool_schema).is_valid({"value": value})
    event("valid" if accepted else "invalid")
    assert isinstance(outcome, al.tools.PreparedCall) is accepted
    if not accepted:
        assert isinstance(outcome, al.ToolResultPart)
        assert str(outcome.output).startswith("invalid input for tool 'probe': ")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}},
        {"anyOf": [{"type": "null"}, {"type": "object", "additionalProperties": False}]},
    ],
)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_instances_drawn_from_a_schema_are_valid(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """The generator above really draws valid instances (so the properties see many)."""
    instance = data.draw(_instances_of(schema))
    assert jsonschema.Draft202012Validator(schema).is_valid(instance)
    check = compile_fast_check(schema)
    assert check is not None
    assert check(instance) is True
