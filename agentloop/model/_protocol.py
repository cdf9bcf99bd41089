"""The model seam: adapters, sessions, turn requests and model events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from ..core._cancellation import TurnCancellation
from ..core._delta import Delta
from ..core._items import FinishReason, Item, Metadata, ToolCallPart, Usage, _empty_metadata
from ..core._tool_spec import ToolSpec
from ..output._spec import OutputSpec
from ._session_config import PromptCacheRequest, SessionConfig

__all__ = ["ModelAdapter", "ModelEvent", "ModelSession", "ModelTurnResult", "TurnRequest"]


@attrs.frozen
class TurnRequest:
    """Everything one model call needs.

    ``transcript`` is a read-only sequence; ``available_tools`` is sorted by
    name so request bytes are stable across runs and resumes. ``output`` is the
    agent's structured output: in ``OutputMode.NATIVE`` the adapter asks the
    provider for it (in ``TOOL`` mode its final-answer tool is among the tools).
    """

    session_id: str
    turn_id: str
    transcript: Sequence[Item]
    available_tools: tuple[ToolSpec, ...] = ()
    cache: PromptCacheRequest | None = None
    metadata: Metadata = attrs.field(default=_empty_metadata())
    output: OutputSpec[Any] | None = attrs.field(default=None, kw_only=True)


def _to_items(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class ModelTurnResult:
    """The closing event of a model turn: why it ended and the items it produced."""

    finish_reason: FinishReason
    output_items: tuple[Item, ...] = attrs.field(converter=_to_items)
    usage: Usage | None = None
    metadata: Metadata = attrs.field(default=_empty_metadata())
    model: str | None = None
    response_id: str | None = None


ModelEvent: TypeAlias = Delta | ToolCallPart | Usage | ModelTurnResult
"""What a model turn streams: deltas, requested calls, usage, and one closing result."""


@runtime_checkable
class ModelSession(Protocol):
    """One conversation with a model; ``begin_turn`` is called once per model call."""

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        """Start a model call and return the stream of its events.

        The stream must end with a :class:`ModelTurnResult`; one that ends
        without it is a ``ProviderError``.
        """
        ...


@runtime_checkable
class ModelAdapter(Protocol):
    """A model provider.

    Optional attributes ``provider_name`` and ``model_name`` label telemetry.
    """

    async def start_session(self, config: SessionConfig) -> ModelSession:
        """Open a session for ``config``."""
        ...


def describe_model(adapter: Any) -> tuple[str | None, str | None]:
    """The adapter's ``(provider_name, model_name)`` if it declares them."""
    return getattr(adapter, "provider_name", None), getattr(adapter, "model_name", None)
