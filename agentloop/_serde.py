"""All JSON conversion policy, in one cattrs converter.

``unstructure(value)`` turns items, parts, events, turn results, snapshots and
configs into JSON-compatible dicts; ``structure(data, cls)`` turns them back.
Unions are tagged with a ``"type"`` key. A ``ToolResultPart.output`` is
written as ``{"output_type": "text"|"json"|"parts", "output": ...}`` so text,
JSON values and part lists round-trip without guessing.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

import cattrs
from cattrs.strategies import configure_tagged_union

from .core._delta import AppendText, BeginPart, CommitPart, Delta
from .core._items import (
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
from .loop import _agent as _agent  # imports every enum of the core
from .loop import _events as events
from .loop._steps import AfterToolResult, ApprovalRequest, AwaitingInput, Finished, Step
from .model._config import (
    AutomaticCache,
    CacheBreakpoint,
    ExplicitCache,
    PromptCacheStrategy,
    ToolsEnd,
    TranscriptItemEnd,
    TranscriptPartEnd,
)

__all__ = ["converter", "structure", "unstructure"]

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)
"""The converter behind :func:`unstructure` and :func:`structure`."""


def _all_subclasses(cls: type) -> list[type]:
    found: list[type] = []
    subclasses: list[type] = cls.__subclasses__()
    for subclass in subclasses:
        found.append(subclass)
        found.extend(_all_subclasses(subclass))
    return found


# A StrEnum is also a str, whose hook would keep the enum member: register
# every enum of the package by exact class so it is written as its value.
for _enum in _all_subclasses(Enum):
    if _enum.__module__.startswith("agentloop."):
        converter.register_unstructure_hook(_enum, lambda member: member.value)

_PART_TAGS: dict[type, str] = {
    TextPart: "text",
    ReasoningPart: "reasoning",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
    StructuredPart: "structured",
    MediaPart: "media",
    FilePart: "file",
    CustomPart: "custom",
}
_DELTA_TAGS: dict[type, str] = {
    BeginPart: "begin_part",
    AppendText: "append_text",
    CommitPart: "commit_part",
}
_EVENT_TAGS: dict[type, str] = {
    events.RunStarted: "run_started",
    events.TurnStarted: "turn_started",
    events.InputAccepted: "input_accepted",
    events.ContentDelta: "content_delta",
    events.ToolCallRequested: "tool_call_requested",
    events.ToolExecutionStarted: "tool_execution_started",
    events.ToolExecutionFinished: "tool_execution_finished",
    events.ToolResultReceived: "tool_result_received",
    events.ApprovalRequired: "approval_required",
    events.ApprovalResolved: "approval_resolved",
    events.ToolCatalogChanged: "tool_catalog_changed",
    events.MutationStarted: "mutation_started",
    events.MutationFinished: "mutation_finished",
    events.UsageUpdated: "usage_updated",
    events.Warning: "warning",
    events.RunFailed: "run_failed",
    events.TurnFinished: "turn_finished",
}
_STEP_TAGS: dict[type, str] = {
    Finished: "finished",
    AwaitingInput: "awaiting_input",
    AfterToolResult: "after_tool_result",
    ApprovalRequest: "approval_request",
}
_BREAKPOINT_TAGS: dict[type, str] = {
    ToolsEnd: "tools_end",
    TranscriptItemEnd: "transcript_item_end",
    TranscriptPartEnd: "transcript_part_end",
}
_STRATEGY_TAGS: dict[type, str] = {AutomaticCache: "automatic", ExplicitCache: "explicit"}


def _tagger(tags: dict[type, str]) -> Any:
    return lambda cls: tags[cls]


def _union(members: dict[type, str]) -> Any:
    union: Any = None
    for member in members:
        union = member if union is None else union | member
    return union


_EVENT_UNION = _union(_EVENT_TAGS)
_STEP_UNION = _union(_STEP_TAGS)


def _unstructure_result(part: ToolResultPart) -> dict[str, Any]:
    output = part.output
    value: Any
    if isinstance(output, str):
        kind, value = "text", output
    elif isinstance(output, list | tuple) and output and all(type(p) in _PART_TAGS for p in output):
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


def _structure_result(data: Any, _cls: Any) -> ToolResultPart:
    kind = data.get("output_type")
    raw = data.get("output")
    if kind == "parts":
        output: Any = [converter.structure(p, Part) for p in raw]  # type: ignore[arg-type]
    elif kind in ("text", "json"):
        output = raw
    else:
        raise ValueError(f"unknown tool_result output_type {kind!r}")
    return ToolResultPart(
        data["call_id"],
        output,
        bool(data.get("is_error", False)),
        metadata=data.get("metadata", {}),
    )


# Fields typed with the abstract ``Delta`` carry their concrete subclass.
converter.register_unstructure_hook_func(
    lambda cls: cls is Delta, lambda value: converter.unstructure(value, _union(_DELTA_TAGS))
)
converter.register_structure_hook_func(
    lambda cls: cls is Delta, lambda data, _cls: converter.structure(data, _union(_DELTA_TAGS))
)

converter.register_unstructure_hook(ToolResultPart, _unstructure_result)
converter.register_structure_hook(ToolResultPart, _structure_result)

# Unbound interrupts: the private driver reference is never written or read.
for _cls in (AwaitingInput, AfterToolResult, ApprovalRequest):
    converter.register_unstructure_hook(
        _cls,
        cattrs.gen.make_dict_unstructure_fn(
            _cls, converter, _cattrs_omit_if_default=False, _driver=cattrs.gen.override(omit=True)
        ),
    )
    converter.register_structure_hook(
        _cls,
        cattrs.gen.make_dict_structure_fn(_cls, converter, _driver=cattrs.gen.override(omit=True)),
    )

configure_tagged_union(Part, converter, tag_generator=_tagger(_PART_TAGS), tag_name="type")
configure_tagged_union(
    _union(_DELTA_TAGS), converter, tag_generator=_tagger(_DELTA_TAGS), tag_name="type"
)
configure_tagged_union(
    CacheBreakpoint, converter, tag_generator=_tagger(_BREAKPOINT_TAGS), tag_name="type"
)
configure_tagged_union(
    PromptCacheStrategy, converter, tag_generator=_tagger(_STRATEGY_TAGS), tag_name="type"
)
configure_tagged_union(_EVENT_UNION, converter, tag_generator=_tagger(_EVENT_TAGS), tag_name="type")
configure_tagged_union(_STEP_UNION, converter, tag_generator=_tagger(_STEP_TAGS), tag_name="type")

_ABSTRACT = {Delta: _union(_DELTA_TAGS), events.AgentEvent: _EVENT_UNION}


def unstructure(value: Any) -> Any:
    """``value`` as JSON-compatible data (events and steps carry their ``type`` tag)."""
    cls = type(value)
    if cls in _EVENT_TAGS:
        return converter.unstructure(value, _EVENT_UNION)
    if cls in _STEP_TAGS:
        return converter.unstructure(value, _STEP_UNION)
    if cls in _PART_TAGS:
        return converter.unstructure(value, Part)
    if cls in _DELTA_TAGS:
        return converter.unstructure(value, _ABSTRACT[Delta])
    return converter.unstructure(value)


def structure(data: Any, cls: type[T] | Any) -> T:
    """Rebuild a value of ``cls`` (``AgentEvent``, ``Delta``, ``Part`` and ``Step`` work too)."""
    target = _ABSTRACT.get(cls, cls)
    if cls is Step:
        target = _STEP_UNION
    return converter.structure(data, target)  # type: ignore[no-any-return]
