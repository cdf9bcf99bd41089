"""A compiled fast path for validating tool input against the common schemas.

:func:`compile_fast_check` turns a JSON Schema that uses only the keywords
``@tool`` generates (``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``prefixItems``, ``minItems``,
``maxItems``, ``enum``, ``anyOf``, plus the annotations ``title``,
``description`` and ``default``) into a plain function ``check(instance) ->
bool``. Any other keyword (or a ``$schema``) gives ``None``: the caller
validates with jsonschema alone.

jsonschema stays the reference: ``check`` is ``True`` only where jsonschema's
Draft 2020-12 validator accepts (``tests/tools/test_tool_fast_check.py`` proves the
same accept/reject decision by hypothesis, also through the executor), and
where it answers ``False`` the caller runs jsonschema, which both decides and
words the error messages. ``check`` is stricter than jsonschema where that is
simpler (e.g. ``str`` subclasses, non-JSON numbers, ``enum`` of containers):
such an instance merely takes the slow path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["FastCheck", "compile_fast_check"]

FastCheck = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"title", "description", "default"})
_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "anyOf",
}


class _Unsupported(Exception):
    """The schema uses something the fast path does not decide."""


def compile_fast_check(schema: Any) -> FastCheck | None:
    """``check(instance)`` for ``schema``, or ``None`` if the schema is outside the subset."""
    if isinstance(schema, dict) and "$schema" in schema:
        return None
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _always(_instance: Any) -> bool:
    return True


def _never(_instance: Any) -> bool:
    return False


def _is_object(value: Any) -> bool:
    return type(value) is dict


def _is_array(value: Any) -> bool:
    return type(value) is list


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_null(value: Any) -> bool:
    return value is None


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is float


def _is_integer(value: Any) -> bool:
    kind = type(value)
    return kind is int or (kind is float and value.is_integer())


_TYPES: dict[str, FastCheck] = {
    "object": _is_object,
    "array": _is_array,
    "string": _is_string,
    "boolean": _is_boolean,
    "null": _is_null,
    "number": _is_number,
    "integer": _is_integer,
}


def _compile(schema: Any) -> FastCheck:
    if schema is True:
        return _always
    if schema is False:
        return _never
    if type(schema) is not dict or any(key not in _KEYWORDS for key in schema):
        raise _Unsupported
    checks: list[FastCheck] = []
    if "type" in schema:
        checks.append(_type_check(schema["type"]))
    if "enum" in schema:
        checks.append(_enum_check(schema["enum"]))
    if "anyOf" in schema:
        checks.append(_any_of_check(schema["anyOf"]))
    object_check = _object_check(schema)
    if object_check is not None:
        checks.append(object_check)
    array_check = _array_check(schema)
    if array_check is not None:
        checks.append(array_check)
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # the usual object schema: its type and its properties
        first, second = checks
        return lambda instance: first(instance) and second(instance)
    every = tuple(checks)
    return lambda instance: all(check(instance) for check in every)


def _type_check(type_: Any) -> FastCheck:
    if type(type_) is str:
        if type_ not in _TYPES:
            raise _Unsupported
        return _TYPES[type_]
    if type(type_) is list and type_ and all(type(t) is str and t in _TYPES for t in type_):
        options = tuple(_TYPES[t] for t in type_)
        return lambda instance: any(check(instance) for check in options)
    raise _Unsupported


def _enum_check(values: Any) -> FastCheck:
    if type(values) is not list:
        raise _Unsupported
    # Only JSON scalars are decided here; containers take the slow path.
    scalars = [v for v in values if v is None or type(v) in (str, int, float, bool)]

    def check(instance: Any) -> bool:
        kind = type(instance)
        if instance is not None and kind not in (str, int, float, bool):
            return False
        for value in scalars:
            if kind is bool or type(value) is bool:
                if kind is type(value) and instance == value:
                    return True
            elif _is_number(instance) and _is_number(value):
                if instance == value:
                    return True
            elif kind is type(value) and instance == value:
                return True
        return False

    return check


def _any_of_check(options: Any) -> FastCheck:
    if type(options) is not list or not options:
        raise _Unsupported
    compiled = tuple(_compile(option) for option in options)
    return lambda instance: any(check(instance) for check in compiled)


def _object_check(schema: dict[str, Any]) -> FastCheck | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if type(properties) is not dict or type(required) is not list:
        raise _Unsupported
    if any(type(name) is not str for name in required):
        raise _Unsupported
    if not properties and not required and additional is True:
        return None
    by_name = {name: _compile(sub) for name, sub in properties.items()}
    names = tuple(required)
    extra = None if additional is True else _compile(additional)

    def check(instance: Any) -> bool:
        if type(instance) is not dict:
            # Object keywords apply to objects only; a dict subclass takes the slow path.
            return not isinstance(instance, dict)
        for name in names:
            if name not in instance:
                return False
        for key, value in instance.items():
            sub = by_name.get(key)
            if sub is not None:
                if not sub(value):
                    return False
            elif extra is not None and not extra(value):
                return False
        return True

    return check


def _array_check(schema: dict[str, Any]) -> FastCheck | None:
    keys = ("items", "prefixItems", "minItems", "maxItems")
    if not any(key in schema for key in keys):
        return None
    prefix_schemas = schema.get("prefixItems", [])
    if type(prefix_schemas) is not list:
        raise _Unsupported
    prefix = tuple(_compile(sub) for sub in prefix_schemas)
    items = _compile(schema["items"]) if "items" in schema else None
    low = schema.get("minItems", 0)
    high = schema.get("maxItems")
    for bound in (low, high):
        if bound is not None and (type(bound) is not int or bound < 0):
            raise _Unsupported

    def check(instance: Any) -> bool:
        if type(instance) is not list:
            # Array keywords apply to arrays only; a list subclass takes the slow path.
            return not isinstance(instance, list)
        count = len(instance)
        if count < low or (high is not None and count > high):
            return False
        for check_item, value in zip(prefix, instance, strict=False):
            if not check_item(value):
                return False
        if items is not None:
            for value in instance[len(prefix) :]:
                if not items(value):
                    return False
        return True

    return check
