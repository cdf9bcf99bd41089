"""Hypothesis: for random type-hinted signatures, the schema ``@tool`` generates, the
executor's ``jsonschema`` check and the strict cattrs structuring agree."""

from __future__ import annotations

import inspect
import keyword
from typing import Any

import attrs
import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_support import json_values, to_json, type_hints, values_of

import agentloop as al
import agentloop.permissions
import agentloop.tools


@attrs.frozen
class Param:
    name: str
    hint: Any
    default: Any  # inspect.Parameter.empty: required


names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


@st.composite
def signatures(draw: st.DrawFn) -> list[Param]:
    """0-4 uniquely named parameters, each required or with a well-typed default."""
    params = []
    for name in draw(st.lists(names, max_size=4, unique=True)):
        hint = draw(type_hints)
        optional = draw(st.booleans())
        default = draw(values_of(hint)) if optional else inspect.Parameter.empty
        params.append(Param(name, hint, default))
    return params


def function_tool(params: list[Param]) -> al.tools.FunctionTool[..., str]:
    def probe(**arguments: Any) -> str:
        return ""

    probe.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=p.default)
            for p in params
        ]
    )
    probe.__annotations__ = {p.name: p.hint for p in params} | {"return": str}
    return al.tool(probe)


def accepts(tool: al.tools.FunctionTool[..., str], call_input: Any) -> bool:
    return jsonschema.Draft202012Validator(tool.spec.input_schema).is_valid(call_input)


def structures(tool: al.tools.FunctionTool[..., str], call_input: Any) -> bool:
    try:
        tool.arguments(call_input)
    except al.InvalidInputError:
        return False
    return True


def prepares(tool: al.tools.FunctionTool[..., str], call_input: Any) -> bool:
    """Whether the default executor lets the call through (lookup, schema, permissions)."""
    executor = al.tools.BasicToolExecutor([al.ToolRegistry().with_tool(tool)])
    request = al.ToolRequest("call-1", "probe", call_input, "s", "t")
    outcome = executor.prepare(request, al.permissions.AllowAll(), approved=False)
    if isinstance(outcome, al.ToolResultPart):
        assert al.tools.result_outcome(outcome) is al.tools.ResultOutcome.INVALID_INPUT
        return False
    assert isinstance(outcome, al.tools.PreparedCall)
    return True


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data(), signatures())
def test_well_typed_calls_are_accepted_and_structured(
    data: st.DataObject, params: list[Param]
) -> None:
    tool = function_tool(params)
    jsonschema.Draft202012Validator.check_schema(tool.spec.input_schema)
    call_input: dict[str, Any] = {}
    for p in params:
        if p.default is inspect.Parameter.empty or data.draw(st.booleans()):
            call_input[p.name] = to_json(data.draw(values_of(p.hint)))
    assert accepts(tool, call_input)
    assert prepares(tool, call_input)
    arguments = tool.arguments(call_input)
    assert sorted(arguments) == sorted(p.name for p in params)
    for p in params:
        expected = call_input[p.name] if p.name in call_input else to_json(p.default)
        assert to_json(arguments[p.name]) == expected


@SETTINGS
@given(st.data(), signatures(), type_hints)
def test_ill_typed_calls_are_rejected_by_schema_and_structuring_alike(
    data: st.DataObject, params: list[Param], other: Any
) -> None:
    tool = function_tool(params)
    call_input = {p.name: to_json(data.draw(values_of(p.hint))) for p in params}
    if params:  # one argument replaced by any JSON value, or a value of another type
        victim = data.draw(st.sampled_from(params)).name
        call_input[victim] = data.draw(json_values | values_of(other).map(to_json))
    verdict = accepts(tool, call_input)
    assert verdict == structures(tool, call_input) == prepares(tool, call_input), call_input


@SETTINGS
@given(st.data(), signatures())
def test_missing_required_and_extra_properties_are_rejected(
    data: st.DataObject, params: list[Param]
) -> None:
    tool = function_tool(params)
    full = {p.name: to_json(data.draw(values_of(p.hint))) for p in params}
    extra = data.draw(names.filter(lambda name: name not in full))
    with_extra = {**full, extra: data.draw(json_values)}
    assert not accepts(tool, with_extra)
    assert not structures(tool, with_extra)
    assert not prepares(tool, with_extra)
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    if required:
        missing = data.draw(st.sampled_from(required))
        without = {key: value for key, value in full.items() if key != missing}
        assert not accepts(tool, without)
        assert not structures(tool, without)
        assert not prepares(tool, without)
    not_objects: list[Any] = [[], "x", 1, None]
    for not_an_object in not_objects:
        assert not accepts(tool, not_an_object)
        assert not structures(tool, not_an_object)
        assert not prepares(tool, not_an_object)
