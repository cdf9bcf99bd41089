"""The validation fast path decides exactly as jsonschema (Draft 2020-12) on its subset."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
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

    executor = al.tools.BasicToolExecutor([al.tools.ToolRegistry().with_tool(echo)])
    request = al.ToolRequest("c1", "echo", call_input, "s", "t")
    outcome = executor.prepare(request, al.permissions.AllowAll())
    if problem is None:
        assert isinstance(outcome, al.tools.PreparedCall)
    else:
        assert isinstance(outcome, al.ToolResultPart)
        assert outcome.output == f"invalid input for tool 'echo': {problem}"
