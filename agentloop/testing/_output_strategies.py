"""Hypothesis strategies for structured output: answers that match a spec and that don't.

``outputs(spec)`` draws JSON values ``spec.check`` accepts (built from the schema:
objects, arrays and tuples, scalars, ``enum``/``const``, ``anyOf``/``oneOf`` and ``{}``;
other keywords are checked by filtering); ``invalid_outputs(spec)`` draws values it rejects (a valid
value with a required property dropped, a value of the wrong type, a property the
schema does not allow, or a non-object). :func:`output_reply` is the scripted model
reply that gives a value in the spec's mode.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from ..output._spec import OutputMode, OutputSpec
from ._json_strategies import json_values
from ._replies import Reply, call, text, tool_calls

__all__ = ["invalid_outputs", "output_reply", "outputs"]

_WRONG_VALUES: tuple[Any, ...] = (None, True, 0, 1.5, "text", [], {})


def outputs(spec: OutputSpec[Any]) -> st.SearchStrategy[Any]:
    """JSON values that match ``spec`` (``spec.check`` accepts each)."""
    return from_schema(spec.schema).filter(lambda value: not spec.problems(value))


def from_schema(schema: Any) -> st.SearchStrategy[Any]:
    """JSON values drawn from the structure of ``schema`` (a JSON Schema document)."""
    if not isinstance(schema, dict) or not schema:
        return json_values()
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(option) for option in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": one}) for one in kind])
    return _typed(kind, schema)


def _typed(kind: Any, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "object" or "properties" in schema:
        return _object(schema)
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*map(from_schema, schema["prefixItems"])).map(list)
        items = from_schema(schema.get("items", {}))
        low, high = schema.get("minItems", 0), schema.get("maxItems", 3)
        return st.lists(items, min_size=low, max_size=max(low, high))
    scalars: dict[Any, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=12),
        "integer": st.integers(-(2**31), 2**31),
        "number": st.floats(-1e9, 1e9, allow_nan=False) | st.integers(-1000, 1000),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    return scalars.get(kind, json_values())


def _object(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fixed = {name: from_schema(sub) for name, sub in properties.items() if name in required}
    optional = {name: from_schema(sub) for name, sub in properties.items() if name not in required}
    return st.fixed_dictionaries(fixed, optional=optional)


def invalid_outputs(spec: OutputSpec[Any]) -> st.SearchStrategy[Any]:
    """JSON values that do not match ``spec`` (``spec.problems`` lists at least one)."""
    mutated = st.tuples(outputs(spec), st.integers(0, 3), st.sampled_from(_WRONG_VALUES)).map(
        lambda drawn: _mutate(*drawn)
    )
    whole = st.sampled_from(_WRONG_VALUES)
    return st.one_of(mutated, whole).filter(lambda value: bool(spec.problems(value)))


def _mutate(value: Any, how: int, wrong: Any) -> Any:
    if not isinstance(value, dict) or not value:
        return wrong
    keys = sorted(value)
    changed = dict(value)
    if how == 0:
        del changed[keys[0]]  # a property missing
    elif how == 1:
        changed[keys[-1]] = wrong  # a value of the wrong type (when it is one)
    elif how == 2:
        changed["unexpected_property"] = wrong  # not allowed by additionalProperties
    else:
        return [value]  # not an object
    return changed


def output_reply(spec: OutputSpec[Any], value: Any) -> Reply:
    """The reply that gives ``value`` (a JSON value) as the answer in ``spec``'s mode: JSON
    text (``NATIVE``), a call of the final-answer tool (``TOOL``, and ``AUTO`` for a
    scripted model, which has no native mode)."""
    if spec.mode is OutputMode.NATIVE:
        return text(json.dumps(value))
    return tool_calls(call(spec.tool_name, value))
