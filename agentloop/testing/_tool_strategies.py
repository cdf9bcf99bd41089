"""Hypothesis strategies for tools, model scripts and host actions.

``tool_inputs`` reads the JSON Schema subset tools use in practice (``type``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``,
``const``, ``anyOf``/``oneOf``, string and number bounds, ``pattern``);
every example is checked with ``jsonschema`` (the same validator the
executor uses), so a schema feature it does not model only makes examples
rarer, never wrong.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
from hypothesis import strategies as st

from ..core._items import Item, ItemKind
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..loop._steps import AfterToolResult, ApprovalRequest, AwaitingInput, Finished, Step
from ._actions import (
    Approve,
    ApproveWith,
    Cancel,
    CancelPoint,
    Continue,
    DenyCall,
    HostAction,
    Interject,
    Submit,
)
from ._json_strategies import json_values
from ._replies import Reply, call, chunked, reasoning, text, tool_calls

__all__ = [
    "host_actions",
    "model_replies",
    "model_scripts",
    "tool_inputs",
    "tool_specs",
]

_names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
_words = st.text(alphabet=string.ascii_letters + " ", max_size=12)
_UNKNOWN_TOOL = "no_such_tool"

# -- tool specs -------------------------------------------------------------------------


def _property_schemas() -> st.SearchStrategy[dict[str, Any]]:
    scalar = st.one_of(
        st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(1, 20)),
        st.builds(
            lambda words: {"type": "string", "enum": words},
            st.lists(_names, min_size=1, max_size=3, unique=True),
        ),
        st.builds(
            lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
            st.integers(-50, 50),
            st.integers(0, 100),
        ),
        st.just({"type": "number"}),
        st.just({"type": "boolean"}),
        st.builds(
            lambda n: {"type": "array", "items": {"type": "string"}, "maxItems": n},
            st.integers(0, 4),
        ),
    )
    nested = st.builds(
        lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]},
        st.dictionaries(_names, scalar, max_size=2),
    )
    return scalar | nested


@st.composite
def _object_schemas(draw: st.DrawFn) -> dict[str, Any]:
    properties = draw(st.dictionaries(_names, _property_schemas(), max_size=4))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = (
        draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    )
    if required:
        schema["required"] = sorted(required)
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


def tool_specs() -> st.SearchStrategy[ToolSpec]:
    """Tool specs with object input schemas: scalars, enums, bounds, arrays, nested objects."""
    annotations = st.builds(
        ToolAnnotations, st.booleans(), st.booleans(), st.booleans(), st.booleans()
    )
    return st.builds(ToolSpec, _names, _words, _object_schemas(), annotations=annotations)


# -- tool inputs ------------------------------------------------------------------------


def _schema_of(spec: ToolSpec | Mapping[str, Any]) -> Mapping[str, Any]:
    return spec.input_schema if isinstance(spec, ToolSpec) else spec


def _values(schema: Any) -> st.SearchStrategy[Any]:
    """Values meant to match ``schema`` (checked by the caller)."""
    if schema is True or not isinstance(schema, Mapping) or not schema:
        return json_values()
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([_values(branch) for branch in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_values({**schema, "type": one}) for one in kind])
    if kind == "object" or "properties" in schema:
        return _objects(schema)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"])
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 16))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(
            schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        low = schema.get("minItems", 0)
        return st.lists(
            _values(schema.get("items", {})), min_size=low, max_size=schema.get("maxItems", low + 3)
        )
    return json_values()


@st.composite
def _objects(draw: st.DrawFn, schema: Mapping[str, Any]) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    value: dict[str, Any] = {}
    for name, sub in properties.items():
        if name in required or draw(st.booleans()):
            value[name] = draw(_values(sub))
    for name in required - set(properties):
        value[name] = draw(json_values(max_leaves=2))
    extra = schema.get("additionalProperties", True)
    if extra is not False and draw(st.integers(0, 4)) == 0:
        key = draw(st.text(alphabet=string.ascii_uppercase, min_size=1, max_size=6))
        value.setdefault(key, draw(_values(extra if isinstance(extra, Mapping) else {})))
    return value


@st.composite
def _broken(draw: st.DrawFn, schema: Mapping[str, Any]) -> Any:
    """A value one mistake away from ``schema`` (may still be valid; the caller filters)."""
    value = draw(_values(schema))
    if not isinstance(value, dict) or draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from([[], "text", 7, None, [value]]))
    properties: Mapping[str, Any] = schema.get("properties", {})
    mistakes = ["wrong_type"] if properties else []
    if set(schema.get("required", ())) & set(value):
        mistakes.append("drop_required")
    if schema.get("additionalProperties", True) is False:
        mistakes.append("extra_key")
    if not mistakes:
        return draw(st.sampled_from([[], "text", 7, None]))
    mistake = draw(st.sampled_from(mistakes))
    broken = dict(value)
    if mistake == "drop_required":
        del broken[draw(st.sampled_from(sorted(set(schema["required"]) & set(value))))]
    elif mistake == "extra_key":
        broken["unexpected_" + draw(_names)] = draw(json_values(max_leaves=1))
    else:
        name = draw(st.sampled_from(sorted(properties)))
        broken[name] = draw(st.sampled_from([None, "text", -(10**9), 10**9, 0.5, [], {}, True]))
    return broken


def tool_inputs(spec: ToolSpec | Mapping[str, Any], valid: bool = True) -> st.SearchStrategy[Any]:
    """Inputs that ``spec``'s input schema accepts (or, with ``valid=False``, rejects).

    ``spec`` is a :class:`ToolSpec` or a JSON Schema. Every example is checked
    with ``jsonschema``. A schema that accepts everything has no invalid
    inputs, so ``valid=False`` then fails hypothesis' health check.
    """
    schema = _schema_of(spec)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema)
    if valid:
        return _values(schema).filter(validator.is_valid)
    return _broken(schema).filter(lambda value: not validator.is_valid(value))


# -- model replies and scripts -------------------------------------------------------------


_Choice = tuple[str, st.SearchStrategy[Any]]


@st.composite
def _call_replies(
    draw: st.DrawFn, choices: Sequence[_Choice], max_parallel: int, invalid_calls: bool
) -> Reply:
    calls = []
    for _ in range(draw(st.integers(1, max_parallel))):
        if not choices or (invalid_calls and draw(st.integers(0, 9)) == 0):
            calls.append(call(_UNKNOWN_TOOL, {}))
            continue
        name, inputs = draw(st.sampled_from(choices))
        broken = invalid_calls and draw(st.integers(0, 9)) == 0
        calls.append(call(name, draw(st.sampled_from([[], "not an object"]) if broken else inputs)))
    preamble = draw(st.none() | _words.filter(bool))
    return tool_calls(*calls, text=preamble)


def _choices(tools: Sequence[ToolSpec]) -> tuple[_Choice, ...]:
    return tuple((spec.name, tool_inputs(spec)) for spec in tools)


@functools.cache
def _answers() -> st.SearchStrategy[Reply]:
    return st.one_of(
        st.builds(text, _words),
        st.builds(lambda chunks: chunked(*chunks), st.lists(_words, min_size=1, max_size=4)),
        st.builds(reasoning, _words, _words),
    )


def model_replies(
    tools: Sequence[ToolSpec] = (),
    *,
    calls: bool = True,
    max_parallel: int = 3,
    invalid_calls: bool = True,
) -> st.SearchStrategy[Reply]:
    """One model reply: a text, streamed or reasoning answer, or a round of tool calls.

    Calls name one of ``tools`` with a schema-valid input; with
    ``invalid_calls``, about one in ten names an unknown tool or has a
    non-object input (the executor turns those into error results).
    """
    if not calls:
        return _answers()
    return _answers() | _call_replies(_choices(tools), max_parallel, invalid_calls)


@st.composite
def _scripts(
    draw: st.DrawFn, tools: Sequence[ToolSpec], max_turns: int, max_rounds: int, invalid: bool
) -> list[Reply]:
    replies: list[Reply] = []
    choices = _choices(tools)
    for _ in range(draw(st.integers(1, max_turns))):
        for _ in range(draw(st.integers(0, max_rounds))):
            replies.append(draw(_call_replies(choices, 3, invalid)))
        replies.append(draw(_answers()))
    return replies


def model_scripts(
    tools: Sequence[ToolSpec] = (),
    *,
    max_turns: int = 3,
    max_rounds: int = 2,
    invalid_calls: bool = False,
) -> st.SearchStrategy[list[Reply]]:
    """Scripts for ``ScriptedModel``: per turn, tool-call replies, then an answer.

    Played by a driver that is fed one input per turn and approves every
    call, a script is used up exactly (``assert_complete()`` passes).
    """
    return _scripts(tuple(tools), max_turns, max_rounds, invalid_calls)


# -- host actions --------------------------------------------------------------------------


def _inputs() -> st.SearchStrategy[list[Item]]:
    kinds = st.sampled_from([ItemKind.USER, ItemKind.USER, ItemKind.NOTIFICATION, ItemKind.CONTEXT])
    item = st.builds(Item.text, kinds, _words)
    last = st.builds(Item.text, st.sampled_from([ItemKind.USER, ItemKind.NOTIFICATION]), _words)
    return st.builds(lambda head, tail: [*head, tail], st.lists(item, max_size=1), last)


_ARMED = [CancelPoint.MODEL, CancelPoint.TOOL, CancelPoint.MUTATOR, CancelPoint.HOST]


def host_actions(
    step: Step | type[Step] | None = None,
    *,
    approve_inputs: st.SearchStrategy[Any] | None = None,
) -> st.SearchStrategy[HostAction]:
    """What a host may do after ``step`` (any action when ``step`` is ``None``).

    After ``AwaitingInput``/``Finished``: submit, arm a cancel, continue.
    After ``ApprovalRequest``: approve, approve-with (``approve_inputs``,
    default JSON objects), deny, cancel at the approval, continue. After
    ``AfterToolResult``: interject, cancel at the pause, arm a cancel, continue.
    """
    kind = step if isinstance(step, type) or step is None else type(step)
    edited = (
        approve_inputs
        if approve_inputs is not None
        else st.dictionaries(
            st.sampled_from(["path", "value", "query"]), st.text(max_size=8), max_size=2
        )
    )
    idle: list[st.SearchStrategy[HostAction]] = [
        st.builds(Submit, _inputs()),
        st.builds(Cancel, st.sampled_from(_ARMED)),
        st.just(Continue()),
    ]
    approval: list[st.SearchStrategy[HostAction]] = [
        st.just(Approve()),
        st.builds(ApproveWith, edited),
        st.builds(DenyCall, st.none() | _words),
        st.just(Cancel(CancelPoint.APPROVAL)),
        st.just(Continue()),
    ]
    pause: list[st.SearchStrategy[HostAction]] = [
        st.builds(Interject, _inputs()),
        st.just(Cancel(CancelPoint.PAUSE)),
        st.builds(Cancel, st.sampled_from(_ARMED)),
        st.just(Continue()),
    ]
    if kind is None:
        return st.one_of(*idle, *approval, *pause)
    if issubclass(kind, ApprovalRequest):
        return st.one_of(*approval)
    if issubclass(kind, AfterToolResult):
        return st.one_of(*pause)
    if issubclass(kind, AwaitingInput | Finished):
        return st.one_of(*idle)
    raise TypeError(f"host_actions: expected a Step or Step type, got {step!r}")
