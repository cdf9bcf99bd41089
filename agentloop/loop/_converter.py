"""The loop layer's conversion hooks, and the package's configured converter.

``unstructure(value)`` turns items, parts, events, turn results, steps,
snapshots and configs into JSON-compatible data; ``structure(data, cls)``
turns them back. The converter is built from the layers below
(``core._converter.make_converter``, ``model._config_codec.configure_model``) plus
:func:`configure_loop`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import cattrs

from ..core._converter import (
    DELTA_TAGS,
    DELTA_UNION,
    PART_TAGS,
    configure_tagged,
    make_converter,
    union_of,
)
from ..core._delta import Delta
from ..core._errors import ModelProtocolError, ProviderError, ProviderErrorKind
from ..core._items import Part
from ..model._config_codec import configure_model
from . import _events as events
from ._state import STEP_KINDS
from ._steps import ApprovalRequest, Interrupt, Step

__all__ = [
    "configure_loop",
    "converter",
    "provider_error_document",
    "structure",
    "structure_provider_error",
    "unstructure",
]

T = TypeVar("T")

_EVENT_TAGS: dict[type, str] = {
    events.RunStarted: "run_started",
    events.TurnStarted: "turn_started",
    events.InputAccepted: "input_accepted",
    events.ContentDelta: "content_delta",
    events.ToolCallRequested: "tool_call_requested",
    events.ToolExecutionStarted: "tool_execution_started",
    events.ToolExecutionFinished: "tool_execution_finished",
    events.ToolResultReceived: "tool_result_received",
    events.ApprovalRequested: "approval_required",
    events.ApprovalAnswered: "approval_resolved",
    events.QuestionAsked: "question_asked",
    events.QuestionAnswered: "question_answered",
    events.ToolCatalogChanged: "tool_catalog_changed",
    events.MutationStarted: "mutation_started",
    events.MutationFinished: "mutation_finished",
    events.UsageUpdated: "usage_updated",
    events.LoopWarning: "warning",
    events.RunFailed: "run_failed",
    events.TurnFinished: "turn_finished",
    events.ModelCallStarted: "model_call_started",
    events.ModelCallFinished: "model_call_finished",
    events.ModelCallFailed: "model_call_failed",
    events.AgentEnded: "agent_ended",
}
_STEP_TAGS: dict[type, str] = {kind.step: kind.tag for kind in STEP_KINDS}
_EVENT_UNION = union_of(_EVENT_TAGS)
_STEP_UNION = union_of(_STEP_TAGS)


def provider_error_document(error: ProviderError) -> dict[str, Any]:
    """A ``ProviderError`` as JSON-compatible data (its class, message, kind, status, type)."""
    return {
        "class": "ModelProtocolError" if isinstance(error, ModelProtocolError) else "ProviderError",
        "message": str(error),
        "kind": error.kind.value,
        "status": error.status,
        "error_type": error.error_type,
    }


def structure_provider_error(data: Any, _cls: Any = None) -> ProviderError:
    """The ``ProviderError`` :func:`provider_error_document` wrote."""
    message = str(data["message"])
    if data["class"] == "ModelProtocolError":
        return ModelProtocolError(message, error_type=data["error_type"])
    if data["class"] != "ProviderError":
        raise ValueError(f"{data['class']!r} is not a provider error class")
    status = data["status"]
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
        raise ValueError(f"error status must be an int or null, got {status!r}")
    error_type = data["error_type"]
    return ProviderError(
        message,
        status=status,
        error_type=None if error_type is None else str(error_type),
        kind=ProviderErrorKind(data["kind"]),
    )


def configure_loop(converter: cattrs.Converter) -> None:
    """Tag events and steps; interrupts are written without their driver reference."""
    converter.register_unstructure_hook(ProviderError, provider_error_document)
    converter.register_structure_hook(ProviderError, structure_provider_error)
    for cls in (kind.step for kind in STEP_KINDS if issubclass(kind.step, Interrupt)):
        converter.register_unstructure_hook(
            cls,
            cattrs.gen.make_dict_unstructure_fn(
                cls,
                converter,
                _cattrs_omit_if_default=False,
                _driver=cattrs.gen.override(omit=True),
            ),
        )
        converter.register_structure_hook(
            cls,
            cattrs.gen.make_dict_structure_fn(
                cls, converter, _driver=cattrs.gen.override(omit=True)
            ),
        )
    # An approval listing no requests (restored from a document written before
    # approvals listed them) is written back as it was read.
    converter.register_unstructure_hook(
        ApprovalRequest,
        cattrs.gen.make_dict_unstructure_fn(
            ApprovalRequest,
            converter,
            _cattrs_omit_if_default=False,
            _driver=cattrs.gen.override(omit=True),
            requests=cattrs.gen.override(omit_if_default=True),
        ),
    )
    # A turn without structured output is written as before ``output`` existed.
    converter.register_unstructure_hook(
        events.TurnResult,
        cattrs.gen.make_dict_unstructure_fn(
            events.TurnResult,
            converter,
            _cattrs_omit_if_default=False,
            output=cattrs.gen.override(omit_if_default=True),
        ),
    )
    configure_tagged(converter, _EVENT_UNION, _EVENT_TAGS)
    configure_tagged(converter, _STEP_UNION, _STEP_TAGS)


converter = make_converter()
"""The converter behind :func:`unstructure` and :func:`structure` (every layer's hooks)."""
configure_model(converter)
configure_loop(converter)

# Concrete classes written as a member of their tagged union (with the ``type`` key).
_UNION_OF: dict[type, Any] = {
    **dict.fromkeys(_EVENT_TAGS, _EVENT_UNION),
    **dict.fromkeys(_STEP_TAGS, _STEP_UNION),
    **dict.fromkeys(PART_TAGS, Part),
    **dict.fromkeys(DELTA_TAGS, DELTA_UNION),
}
# Abstract names accepted by ``structure``.
_ABSTRACT: dict[Any, Any] = {Delta: DELTA_UNION, events.AgentEvent: _EVENT_UNION, Step: _STEP_UNION}


def unstructure(value: Any) -> Any:
    """``value`` as JSON-compatible data (events and steps carry their ``type`` tag)."""
    union = _UNION_OF.get(type(value))
    if union is not None:
        return converter.unstructure(value, union)
    return converter.unstructure(value)


def structure(data: Any, cls: type[T] | Any) -> T:
    """Rebuild a value of ``cls`` (``AgentEvent``, ``Delta``, ``Part`` and ``Step`` work too)."""
    return converter.structure(data, _ABSTRACT.get(cls, cls))  # type: ignore[no-any-return]
