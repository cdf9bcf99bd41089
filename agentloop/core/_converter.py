"""JSON conversion policy, layer by layer (cattrs' ``preconf`` style).

:func:`make_converter` returns a converter that knows the core's types (items,
parts, deltas, usage); each layer above adds its own hooks with its
``configure_*`` function (``model._config_codec.configure_model``,
``loop._converter.configure_loop``). Unions are tagged with a ``"type"`` key. A
``ToolResultPart.output`` is written as ``{"output_type": "text"|"json"|"parts",
"output": ...}`` so text, JSON values and part lists round-trip without guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import cattrs
from cattrs.strategies import configure_tagged_union

from ._delta import AppendText, BeginPart, CommitPart, Delta
from ._items import (
    CustomPart,
    FilePart,
    MediaPart,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "DELTA_TAGS",
    "DELTA_UNION",
    "PART_TAGS",
    "configure_core",
    "configure_tagged",
    "make_converter",
    "union_of",
]

PART_TAGS: dict[type, str] = {
    TextPart: "text",
    ReasoningPart: "reasoning",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
    StructuredPart: "structured",
    MediaPart: "media",
    FilePart: "file",
    CustomPart: "custom",
}
DELTA_TAGS: dict[type, str] = {
    BeginPart: "begin_part",
    AppendText: "append_text",
    CommitPart: "commit_part",
}


def union_of(members: dict[type, str]) -> Any:
    """The union type of the tagged classes in ``members``."""
    union: Any = None
    for member in members:
        union = member if union is None else union | member
    return union


DELTA_UNION = union_of(DELTA_TAGS)


def configure_tagged(converter: cattrs.Converter, union: Any, tags: dict[type, str]) -> None:
    """Tag the members of ``union`` with ``tags`` under the ``"type"`` key."""
    configure_tagged_union(union, converter, tag_generator=tags.__getitem__, tag_name="type")


def make_converter() -> cattrs.Converter:
    """A fresh converter configured for the core's types (see :func:`configure_core`)."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    configure_core(converter)
    return converter


def configure_core(converter: cattrs.Converter) -> None:
    """Register the core's hooks: enums by value, tagged parts and deltas, tool results."""
    # A StrEnum is also a str, whose hook would keep the enum member: write its value.
    converter.register_unstructure_hook(StrEnum, lambda member: member.value)
    # Fields typed with the abstract ``Delta`` carry their concrete subclass.
    converter.register_unstructure_hook_func(
        lambda cls: cls is Delta, lambda value: converter.unstructure(value, DELTA_UNION)
    )
    converter.register_structure_hook_func(
        lambda cls: cls is Delta, lambda data, _cls: converter.structure(data, DELTA_UNION)
    )
    converter.register_unstructure_hook(
        ToolResultPart, lambda part: _unstructure_result(converter, part)
    )
    converter.register_structure_hook(
        ToolResultPart, lambda data, _cls: _structure_result(converter, data)
    )
    configure_tagged(converter, Part, PART_TAGS)
    configure_tagged(converter, DELTA_UNION, DELTA_TAGS)


def _unstructure_result(converter: cattrs.Converter, part: ToolResultPart) -> dict[str, Any]:
    output = part.output
    value: Any
    if isinstance(output, str):
        kind, value = "text", output
    elif isinstance(output, list | tuple) and output and all(type(p) in PART_TAGS for p in output):
        kind, value = "parts", [converter.unstructure(p, Part) for p in output]
    else:
        kind, value = "json", output
    return {
        "call_id": part.call_id,
        "output_type": kind,
        "output": value,
        "is_error": part.is_error,
        "metadata": dict(part.metadata),
    }


_RESULT_KEYS = frozenset({"type", "call_id", "output_type", "output", "is_error", "metadata"})


def _structure_result(converter: cattrs.Converter, data: Any) -> ToolResultPart:
    if not isinstance(data, Mapping):
        raise TypeError(f"a tool_result must be an object, got {type(data).__name__}")
    if extra := sorted(set(data) - _RESULT_KEYS):
        raise ValueError(f"unknown tool_result fields {extra}")
    kind = data.get("output_type")
    raw = data.get("output")
    if kind == "parts":
        if not isinstance(raw, list):
            raise TypeError(f"tool_result parts output must be a list, got {type(raw).__name__}")
        output: Any = [converter.structure(p, Part) for p in raw]  # type: ignore[arg-type]
    elif kind == "text":
        if not isinstance(raw, str):
            raise TypeError(f"tool_result text output must be a str, got {type(raw).__name__}")
        output = raw
    elif kind == "json":
        output = raw
    else:
        raise ValueError(f"unknown tool_result output_type {kind!r}")
    call_id = data["call_id"]
    is_error = data.get("is_error", False)
    metadata = data.get("metadata", {})
    if not isinstance(call_id, str):
        raise TypeError(f"tool_result call_id must be a str, got {call_id!r}")
    if not isinstance(is_error, bool):
        raise TypeError(f"tool_result is_error must be a bool, got {is_error!r}")
    if not isinstance(metadata, dict):
        raise TypeError(f"tool_result metadata must be an object, got {metadata!r}")
    return ToolResultPart(call_id, output, is_error, metadata=metadata)
