"""Type hints -> JSON Schema, and the strict converter that agrees with it.

The two halves describe one argument model, so they live together: every JSON
value the schema of a type accepts is structured by :data:`argument_converter`
into that type, and every value the schema rejects the converter rejects too.
Structuring is strict, as JSON Schema is: no ``"5"`` -> ``5``, no ``True`` ->
``1``, no string -> list of characters. The one leniency is JSON's own: a
number with no fractional part (``1.0``) is an integer.

Supported: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
``pathlib`` paths (as strings), ``list``/``tuple``/``dict`` (and the
``Sequence``/``Mapping`` ABCs), ``Literal``, ``Enum``, unions (``X | None``),
attrs classes (nested, not recursive) and ``Annotated[X, "description"]``.
"""

from __future__ import annotations

import collections.abc
import inspect
import pathlib
import types
import typing
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from ..core._errors import InvalidInputError

__all__ = ["argument_converter", "json_schema_for", "structure_value"]

_NONE_TYPE = type(None)
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_MISSING = object()

MISSING_PROPERTY = "required property is missing"


def unexpected_properties(names: typing.Iterable[str]) -> str:
    """The problem text for properties an object schema does not allow."""
    return "unexpected properties " + ", ".join(repr(name) for name in names)


# -- JSON Schema ------------------------------------------------------------------------


def json_schema_for(hint: Any) -> dict[str, Any]:
    """The JSON Schema of values of type ``hint``; raises ``TypeError`` for an unsupported type."""
    return _schema(hint, ())


def _schema(hint: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    if get_origin(hint) is Annotated:
        inner, *extras = get_args(hint)
        schema = dict(_schema(inner, stack))
        for extra in extras:
            if isinstance(extra, str):
                schema["description"] = extra
        return schema
    if hint is Any:
        return {}
    if hint is None or hint is _NONE_TYPE:
        return {"type": "null"}
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum_schema([member.value for member in hint], hint)
    if hint in (str, bool, int, float):
        return {"type": _JSON_TYPES[hint]}
    if isinstance(hint, type) and issubclass(hint, pathlib.PurePath):
        return {"type": "string"}
    origin = get_origin(hint)
    if origin is Literal:
        return _enum_schema([_literal_value(value) for value in get_args(hint)], hint)
    if _is_union(hint):
        return {"anyOf": [_schema(member, stack) for member in get_args(hint)]}
    if hint in _SEQUENCES or origin in _SEQUENCES:
        return _sequence_schema(hint, origin or hint, stack)
    if hint in _MAPPINGS or origin in _MAPPINGS:
        return _mapping_schema(hint, stack)
    if isinstance(hint, type) and attrs.has(hint):
        return _attrs_schema(hint, stack)
    raise TypeError(
        f"cannot describe type {_name(hint)} in JSON Schema; use str, int, float, bool, None, "
        "list, tuple, dict, Literal, an Enum, a union, an attrs class or Annotated"
    )


_JSON_TYPES: dict[Any, str] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    _NONE_TYPE: "null",
}


def _enum_schema(values: list[Any], hint: Any) -> dict[str, Any]:
    if not values:
        raise TypeError(f"cannot describe {_name(hint)} in JSON Schema: it has no values")
    kinds = set()
    for value in values:
        if type(value) not in _JSON_TYPES:
            raise TypeError(
                f"cannot describe {_name(hint)} in JSON Schema: value {value!r} is not a JSON "
                "string, number, boolean or null"
            )
        kinds.add(_JSON_TYPES[type(value)])
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _literal_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _sequence_schema(hint: Any, origin: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    args = get_args(hint)
    schema: dict[str, Any] = {"type": "array"}
    if _is_empty_tuple(hint):
        return {"type": "array", "maxItems": 0}
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        schema["prefixItems"] = [_schema(arg, stack) for arg in args]
        schema["items"] = False
        schema["minItems"] = schema["maxItems"] = len(args)
    elif args:
        schema["items"] = _schema(args[0], stack)
    return schema


def _is_empty_tuple(hint: Any) -> bool:
    """``tuple[()]`` (whose ``get_args`` is ``()`` or ``((),)`` by Python version)."""
    return hint is not tuple and get_origin(hint) is tuple and get_args(hint) in ((), ((),))


def _mapping_schema(hint: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    args = get_args(hint)
    if args and args[0] not in (str, Any):
        raise TypeError(
            f"cannot describe {_name(hint)} in JSON Schema: JSON object keys are strings; "
            "use dict[str, ...]"
        )
    schema: dict[str, Any] = {"type": "object"}
    if args:
        schema["additionalProperties"] = _schema(args[1], stack)
    return schema


def _attrs_schema(cls: type, stack: tuple[type, ...]) -> dict[str, Any]:
    if cls in stack:
        raise TypeError(
            f"cannot describe {cls.__qualname__} in JSON Schema: it contains itself; "
            "recursive attrs classes are not supported"
        )
    return object_schema(
        [(field.name, field.type, field.default) for field in _init_fields(cls)],
        description=_own_doc(cls),
        stack=(*stack, cls),
    )


def object_schema(
    fields: list[tuple[str, Any, Any]],
    *,
    description: str | None = None,
    stack: tuple[type, ...] = (),
) -> dict[str, Any]:
    """An object schema for ``(name, type hint, default or attrs.NOTHING)`` fields;
    extra properties are forbidden."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, default in fields:
        prop = _schema(hint, stack)
        if default is attrs.NOTHING or default is inspect.Parameter.empty:
            required.append(name)
        elif (json_default := _json_default(default)) is not _MISSING:
            prop = {**prop, "default": json_default}
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _init_fields(cls: type) -> list[attrs.Attribute[Any]]:
    attrs.resolve_types(cls)
    fields = [field for field in attrs.fields(cls) if field.init]
    for field in fields:
        if field.type is None:
            raise TypeError(
                f"cannot describe {cls.__qualname__} in JSON Schema: field {field.name!r} "
                "has no type annotation"
            )
    return fields


def _own_doc(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else None


def _json_default(value: Any) -> Any:
    if isinstance(value, Enum):
        return _json_default(value.value)
    if value is None or type(value) in (str, bool, int, float):
        return value
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if isinstance(value, list | tuple):
        items = [_json_default(item) for item in value]
        return _MISSING if any(item is _MISSING for item in items) else items
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        mapped = {key: _json_default(item) for key, item in value.items()}
        return _MISSING if any(item is _MISSING for item in mapped.values()) else mapped
    return _MISSING


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def _name(hint: Any) -> str:
    if isinstance(hint, type) and not get_args(hint):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


# -- the strict converter ---------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema's ``enum`` sees it: booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    return type(a) is type(b) and a == b


def _structure_scalar(value: Any, cls: type) -> Any:
    if issubclass(cls, Enum):
        for member in cls:
            if _json_equal(member.value, value):
                return member
        allowed = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"expected one of {allowed}, got {value!r}")
    if issubclass(cls, bool):
        if isinstance(value, bool):
            return value
        raise ValueError(f"expected boolean, got {_kind(value)}")
    if issubclass(cls, int):
        if _is_number(value) and (isinstance(value, int) or float(value).is_integer()):
            return int(value)
        raise ValueError(f"expected integer, got {_kind(value)}")
    if issubclass(cls, float):
        if not _is_number(value):
            raise ValueError(f"expected number, got {_kind(value)}")
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"number {value} is too large for a float") from None
    if isinstance(value, str):
        return value if cls is str else typing.cast(Any, cls)(value)  # a pathlib path
    raise ValueError(f"expected string, got {_kind(value)}")


def _structure_none(value: Any, _cls: Any) -> None:
    if value is not None:
        raise ValueError(f"expected null, got {_kind(value)}")


def _structure_literal(value: Any, hint: Any) -> Any:
    for option in get_args(hint):
        if _json_equal(_literal_value(option), value):
            return option
    allowed = ", ".join(repr(_literal_value(option)) for option in get_args(hint))
    raise ValueError(f"expected one of {allowed}, got {value!r}")


def _structure_union(value: Any, hint: Any) -> Any:
    for member in get_args(hint):
        try:
            return argument_converter.structure(value, member)
        except (ValueError, TypeError, KeyError, cattrs.BaseValidationError):
            continue
    raise ValueError(f"expected {_name(hint)}, got {_kind(value)}")


def _structure_annotated(value: Any, hint: Any) -> Any:
    return argument_converter.structure(value, get_args(hint)[0])


def _structure_sequence(value: Any, hint: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected array, got {_kind(value)}")
    origin = get_origin(hint) or hint
    args = get_args(hint)
    if _is_empty_tuple(hint) or (
        origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis)
    ):
        wanted = () if _is_empty_tuple(hint) else args
        if len(value) != len(wanted):
            raise ValueError(f"expected an array of {len(wanted)} items, got {len(value)}")
        pairs = enumerate(zip(value, wanted, strict=True))
        return tuple(_at(index, item, arg) for index, (item, arg) in pairs)
    item_type = args[0] if args else Any
    items = [_at(index, item, item_type) for index, item in enumerate(value)]
    return tuple(items) if origin is tuple else items


def _structure_mapping(value: Any, hint: Any) -> Any:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"expected object, got {_kind(value)}")
    args = get_args(hint)
    value_type = args[1] if args else Any
    return {key: _at(key, item, value_type) for key, item in value.items()}


class _ItemError(ValueError):
    """A problem inside an array or object, carrying the item's index or key."""

    def __init__(self, where: int | str, problem: str) -> None:
        super().__init__(problem)
        self.where = where
        self.problem = problem


def _at(where: int | str, value: Any, hint: Any) -> Any:
    """``value`` (an item of an array or object) structured as ``hint``."""
    try:
        return argument_converter.structure(value, hint)
    except InvalidInputError:
        raise
    except (ValueError, TypeError, KeyError, cattrs.BaseValidationError) as error:
        raise _ItemError(where, _problem_text(error)) from error


def _attrs_hook(cls: type) -> typing.Callable[[Any, Any], Any]:
    attrs.resolve_types(cls)
    inner: typing.Callable[[Any, Any], Any] = make_dict_structure_fn(
        cls, argument_converter, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True
    )

    def structure(value: Any, _cls: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(f"expected object, got {_kind(value)}")
        return inner(value, cls)

    return structure


def _build_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for cls in (str, int, float, bool, Enum, pathlib.PurePath):
        converter.register_structure_hook(cls, _structure_scalar)
    predicates: list[tuple[typing.Callable[[Any], bool], typing.Callable[[Any, Any], Any]]] = [
        (lambda hint: hint is None or hint is _NONE_TYPE, _structure_none),
        (lambda hint: get_origin(hint) is Literal, _structure_literal),
        (_is_union, _structure_union),
        (lambda hint: hint in _SEQUENCES or get_origin(hint) in _SEQUENCES, _structure_sequence),
        (lambda hint: hint in _MAPPINGS or get_origin(hint) in _MAPPINGS, _structure_mapping),
        (lambda hint: get_origin(hint) is Annotated, _structure_annotated),
    ]
    for predicate, hook in predicates:
        converter.register_structure_hook_func(predicate, hook)
    converter.register_structure_hook_factory(
        lambda hint: isinstance(hint, type) and attrs.has(hint), _attrs_hook
    )
    return converter


argument_converter = _build_converter()
"""The strict converter for tool arguments (agrees with :func:`json_schema_for`)."""


def structure_value(value: Any, hint: Any) -> Any:
    """``value`` (a JSON value) as ``hint``; raises ``InvalidInputError`` listing every
    problem with its JSON path."""
    try:
        return argument_converter.structure(value, hint)
    except InvalidInputError:
        raise
    except (ValueError, TypeError, KeyError, cattrs.BaseValidationError) as error:
        raise InvalidInputError("; ".join(_problems(error, "$"))) from error


def _problems(error: BaseException, path: str) -> list[str]:
    if isinstance(error, _ItemError):
        step = f"[{error.where}]" if isinstance(error.where, int) else f".{error.where}"
        cause = error.__cause__
        if isinstance(cause, cattrs.BaseValidationError | _ItemError):
            return _problems(cause, path + step)
        return [f"at {path + step}: {error.problem}"]
    if isinstance(error, cattrs.BaseValidationError):
        out: list[str] = []
        for inner in error.exceptions:
            note = _note_for(inner)
            out.extend(_problems(inner, path + note))
        return out or [f"at {path}: {error}"]
    return [f"at {path}: {_problem_text(error)}"]


def _note_for(error: BaseException) -> str:
    for note in getattr(error, "__notes__", []):
        name = getattr(note, "name", None)
        if isinstance(name, str):
            return f".{name}"
        index = getattr(note, "index", None)
        if isinstance(index, int):
            return f"[{index}]"
    return ""


def _problem_text(error: BaseException) -> str:
    if isinstance(error, ForbiddenExtraKeysError):
        return unexpected_properties(sorted(error.extra_fields))
    if isinstance(error, KeyError):
        return MISSING_PROPERTY
    if isinstance(error, _ItemError):
        return error.problem
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(_problems(error, "$"))
    return str(error)
