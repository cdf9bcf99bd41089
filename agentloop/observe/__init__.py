"""What a driver reports and who listens: the events, the observer protocols, and
ready observers (OpenTelemetry GenAI spans, structlog lines, JSON Lines, usage).

A :class:`LoopObserver` gets every :class:`AgentEvent` (``AgentBuilder.observer``);
``stream()`` yields the same events between the steps.

:class:`OtelObserver` needs ``pip install 'agentloop-runtime[otel]'`` and is imported on
first use; the rest needs nothing extra. See ``docs/observability.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._extras import install_command
from ..loop._events import (
    AgentEnded,
    AgentEvent,
    ApprovalAnswered,
    ApprovalRequested,
    ContentDelta,
    InputAccepted,
    LoopObserver,
    LoopWarning,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    MutationFinished,
    MutationStarted,
    QuestionAnswered,
    QuestionAsked,
    RunFailed,
    RunStarted,
    ToolCallRequested,
    ToolCatalogChanged,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolResultReceived,
    TranscriptObserver,
    TurnFinished,
    TurnStarted,
    UsageUpdated,
)
from ._logging import JsonlEventReporter, StructlogObserver, event_fields
from ._usage import SessionUsage, UsageTotals

if TYPE_CHECKING:
    from ._otel import MODEL_KEY, PROVIDER_KEY, RESPONSE_ID_KEY, OtelObserver

__all__ = [
    "MODEL_KEY",
    "PROVIDER_KEY",
    "RESPONSE_ID_KEY",
    "AgentEnded",
    "AgentEvent",
    "ApprovalAnswered",
    "ApprovalRequested",
    "ContentDelta",
    "InputAccepted",
    "JsonlEventReporter",
    "LoopObserver",
    "LoopWarning",
    "ModelCallFailed",
    "ModelCallFinished",
    "ModelCallStarted",
    "MutationFinished",
    "MutationStarted",
    "OtelObserver",
    "QuestionAnswered",
    "QuestionAsked",
    "RunFailed",
    "RunStarted",
    "SessionUsage",
    "StructlogObserver",
    "ToolCallRequested",
    "ToolCatalogChanged",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
    "ToolResultReceived",
    "TranscriptObserver",
    "TurnFinished",
    "TurnStarted",
    "UsageTotals",
    "UsageUpdated",
    "event_fields",
]

_OTEL = {"MODEL_KEY", "PROVIDER_KEY", "RESPONSE_ID_KEY", "OtelObserver"}


def __getattr__(name: str) -> Any:
    if name in _OTEL:
        try:
            from . import _otel
        except ImportError as error:  # pragma: no cover (the dev extra installs it)
            raise ImportError(
                f"agentloop.observe.{name} needs OpenTelemetry: {install_command('otel')}"
            ) from error
        return getattr(_otel, name)
    raise AttributeError(f"module 'agentloop.observe' has no attribute {name!r}")
