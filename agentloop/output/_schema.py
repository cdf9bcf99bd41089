"""Python types -> the JSON Schema of an agent's output.

Supported: attrs classes, dataclasses and ``TypedDict`` s (nested, not recursive),
``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``list``/``tuple``/``dict``
(and their ``Sequence``/``Mapping`` ABCs), ``Literal``, ``Enum``, unions and
``Annotated[X, "description"]``. Every field of a class is required and no other
property is allowed, so the schemas of attrs classes and dataclasses are accepted by
providers' strict modes (OpenAI's ``strict: true``, Anthropic's structured output).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin, is_typeddict

import attrs

__all__ = ["is_strict_schema", "schema_for_type", "strip_required", "typed_dict_hints"]

_NONE = type(None)
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    _NONE: {"type": "null"},
    None: {"type": "null"},
}


def schema_for_type(hint: Any) -> dict[str, Any]:
    """The JSON Schema of values of ``hint``; raises ``TypeError`` naming what is unsupported."""
    return _schema(hint, ())


def _schema(hint: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    if hint is Any:
        return {}
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *extras = get_args(hint)
        schema = _schema(inner, stack)
        texts = [extra for extra in extras if isinstance(extra, str)]
        if texts:
            schema["description"] = " ".join(texts)
        return schema
    if origin is Literal:
        return {"enum": list(get_args(hint))}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [_schema(arg, stack) for arg in get_args(hint)]}
    if hint in _SEQUENCES or origin in _SEQUENCES:
        return _sequence(hint, origin, stack)
    if hint in _MAPPINGS or origin in _MAPPINGS:
        args = get_args(hint)
        if args and args[0] is not str:
            raise TypeError(f"cannot describe {hint!r} in JSON Schema: object keys are strings")
        return {
            "type": "object",
            **({"additionalProperties": _schema(args[1], stack)} if args else {}),
        }
    if isinstance(hint, type) and issubclass(hint, Enum):
        return {"enum": [member.value for member in hint]}
    if isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
        return _class(hint, stack)
    if is_typeddict(hint):
        return _typed_dict(hint, stack)
    raise TypeError(
        f"cannot describe {hint!r} in JSON Schema: use an attrs class, a dataclass, a "
        "TypedDict, a plain type (str, int, float, bool, list, dict, Literal, Enum) or a "
        "JSON schema document"
    )


def _sequence(hint: Any, origin: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    args = get_args(hint)
    if (origin or hint) is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        items = [_schema(arg, stack) for arg in args]
        return {"type": "array", "prefixItems": items, "minItems": len(items),
                "maxItems": len(items)}  # fmt: skip
    return {"type": "array", **({"items": _schema(args[0], stack)} if args else {})}


def _enter(cls: type, stack: tuple[type, ...]) -> tuple[type, ...]:
    if cls in stack:
        raise TypeError(
            f"cannot describe {cls.__qualname__} in JSON Schema: it contains itself; "
            "recursive output types are not supported"
        )
    return (*stack, cls)


def _class(cls: type, stack: tuple[type, ...]) -> dict[str, Any]:
    inner = _enter(cls, stack)
    hints = typed_dict_hints(cls)
    if attrs.has(cls):
        names = [field.name for field in attrs.fields(cls) if field.init]
    else:
        names = [field.name for field in dataclasses.fields(cls) if field.init]
    properties = {name: _schema(hints[name], inner) for name in names}
    return _object(cls, properties, names)


def _typed_dict(cls: Any, stack: tuple[type, ...]) -> dict[str, Any]:
    inner = _enter(cls, stack)
    hints = typed_dict_hints(cls)
    properties = {name: _schema(strip_required(hint), inner) for name, hint in hints.items()}
    required = [name for name, hint in hints.items() if _is_required(cls, name, hint)]
    return _object(cls, properties, required)


def _is_required(cls: Any, name: str, hint: Any) -> bool:
    # Under ``from __future__ import annotations`` Python 3.11 cannot see NotRequired
    # when it builds ``__required_keys__``: the resolved hint says it.
    origin = get_origin(hint)
    if origin is typing.NotRequired:
        return False
    return origin is typing.Required or name in cls.__required_keys__


def typed_dict_hints(cls: Any) -> dict[str, Any]:
    """The resolved type hints of a class (``TypeError`` when one cannot be resolved)."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except NameError as error:
        raise TypeError(
            f"cannot resolve the type hints of {cls.__qualname__}: {error}; define the "
            "types at module level"
        ) from None


def strip_required(hint: Any) -> Any:
    """``hint`` without its ``Required``/``NotRequired`` wrapper."""
    origin = get_origin(hint)
    if origin is typing.Required or origin is typing.NotRequired:
        return get_args(hint)[0]
    return hint


def _object(cls: Any, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    doc = cls.__dict__.get("__doc__")
    if isinstance(doc, str) and doc.strip() and not doc.startswith(f"{cls.__name__}("):
        schema["description"] = " ".join(doc.split())
    schema["properties"] = properties
    schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def is_strict_schema(schema: Any) -> bool:
    """Whether every object in ``schema`` lists all its properties as required and
    forbids others (what strict modes accept)."""
    if isinstance(schema, list):
        return all(is_strict_schema(value) for value in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if sorted(schema.get("required", [])) != sorted(properties):
            return False
    return all(is_strict_schema(value) for key, value in schema.items() if key != "enum")
