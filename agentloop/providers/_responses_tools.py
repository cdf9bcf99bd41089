"""Responses API function tools: ``tools``, ``tool_choice`` and strict mode (pure functions).

A Responses function tool is ``{"type": "function", "name", "description",
"parameters", "strict"}``, flat (Chat Completions nests it under ``function``).
The API makes ``strict`` default to true, and a strict tool whose schema is not in
OpenAI's strict subset is refused with HTTP 400; so ``strict=None`` (the adapter's
default) sends ``strict: true`` only for schemas that fit: every object closed
(``additionalProperties: false``) with all its properties required, and only
keywords the subset takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core._errors import InvalidInputError, ProviderError
from ..core._tool_spec import ToolSpec

__all__ = [
    "TOOL_CHOICE_MODES",
    "check_tool_choice",
    "is_strict_schema",
    "tool_choice_field",
    "tools_field",
]

TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})

_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_MAX_DEPTH = 64


def tools_field(specs: Sequence[ToolSpec], *, strict: bool | None) -> list[dict[str, Any]]:
    """The ``tools`` array for ``specs``; ``strict=None`` decides per schema."""
    return [
        {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
            "strict": is_strict_schema(spec.input_schema) if strict is None else strict,
        }
        for spec in specs
    ]


def is_strict_schema(schema: Any, depth: int = 0) -> bool:
    """Whether ``schema`` fits OpenAI's strict subset (conservatively: ``False`` if unsure)."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return False
    if not set(schema) <= _STRICT_KEYWORDS:
        return False
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if not isinstance(properties, dict) or schema.get("additionalProperties") is not False:
            return False
        required = schema.get("required", [])
        if not isinstance(required, list) or set(required) != set(properties):
            return False
        if not all(is_strict_schema(value, depth + 1) for value in properties.values()):
            return False
    return all(is_strict_schema(value, depth + 1) for value in _subschemas(schema))


def _subschemas(schema: dict[str, Any]) -> list[Any]:
    found: list[Any] = []
    items = schema.get("items")
    if items is not None:
        found.append(items)
    for key in ("anyOf",):
        if key in schema:
            options = schema[key]
            found.extend(options if isinstance(options, list) else [None])
    for key in ("$defs", "definitions"):
        if key in schema:
            table = schema[key]
            found.extend(table.values() if isinstance(table, dict) else [None])
    return found


def check_tool_choice(owner: str, choice: object) -> str | None:
    """``choice`` if it is ``None``, a mode or a tool name; else ``InvalidInputError``."""
    if choice is None or (isinstance(choice, str) and choice.strip() == choice and choice):
        return choice
    raise InvalidInputError(
        f"{owner}: tool_choice must be 'auto', 'none', 'required' or a tool name, got {choice!r}"
    )


def tool_choice_field(choice: str, specs: Sequence[ToolSpec]) -> Any:
    """The wire ``tool_choice``: a mode as-is, a name as ``{"type": "function", "name"}``.

    A name that is none of the request's tools is a ``ProviderError``, raised
    before anything is sent.
    """
    if choice in TOOL_CHOICE_MODES:
        return choice
    names = [spec.name for spec in specs]
    if choice not in names:
        raise ProviderError(
            f"OpenAI: tool_choice names tool {choice!r}, which is not among this turn's tools "
            f"{names}; name one of them or use 'auto', 'none' or 'required'"
        )
    return {"type": "function", "name": choice}
