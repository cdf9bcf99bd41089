"""What the spans need from the model seam: the adapter's labels and each call's answer.

``OtelObserver.attach`` wraps the builder's adapter in :class:`WatchedModel`, which
forwards everything and reports, per model call, the tools offered (for
``gen_ai.tool.description``) and the closing ``ModelTurnResult`` (the model that
answered and the response id, which a non-HTTP adapter stamps on no item).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol
from urllib.parse import urlsplit

import attrs

from ..core._cancellation import TurnCancellation
from ..model._protocol import (
    ModelAdapter,
    ModelEvent,
    ModelSession,
    ModelTurnResult,
    TurnRequest,
    describe_model,
)
from ..model._session_config import SessionConfig

__all__ = ["AdapterLabels", "CallWatcher", "WatchedModel", "adapter_labels"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@attrs.frozen
class AdapterLabels:
    """The adapter's telemetry labels: ``describe_model`` and its ``base_url`` (if HTTP)."""

    provider: str | None = None
    model: str | None = None
    server_address: str | None = None
    server_port: int | None = None


def adapter_labels(adapter: Any) -> AdapterLabels:
    """The labels ``adapter`` declares; a non-string value counts as not declared."""
    provider, model = describe_model(adapter)
    address: str | None = None
    port: int | None = None
    base_url = getattr(adapter, "base_url", None)
    if isinstance(base_url, str):
        parts = urlsplit(base_url)
        if parts.scheme in _DEFAULT_PORTS and parts.hostname:
            address = parts.hostname
            try:
                port = parts.port or _DEFAULT_PORTS[parts.scheme]
            except ValueError:  # an out-of-range port: leave the port out
                port = None
    return AdapterLabels(
        provider=provider if isinstance(provider, str) and provider else None,
        model=model if isinstance(model, str) and model else None,
        server_address=address,
        server_port=port,
    )


class CallWatcher(Protocol):
    """Told about each model call (implemented by ``OtelObserver``)."""

    def model_called(self, request: TurnRequest) -> None:
        """A model call with ``request`` is starting."""
        ...

    def model_answered(self, session_id: str, result: ModelTurnResult) -> None:
        """The call's stream closed with ``result``."""
        ...


class WatchedModel:
    """``adapter`` as it is, with each session's calls reported to ``watcher``."""

    def __init__(self, adapter: ModelAdapter, watcher: CallWatcher) -> None:
        self.adapter = adapter
        self._watcher = watcher
        labels = adapter_labels(adapter)
        self.provider_name = labels.provider
        self.model_name = labels.model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)  # base_url, options... as the adapter has them

    def __repr__(self) -> str:
        return f"WatchedModel({self.adapter!r})"

    async def start_session(self, config: SessionConfig) -> ModelSession:
        """The adapter's session, watched."""
        return _WatchedSession(await self.adapter.start_session(config), self._watcher)


class _WatchedSession:
    def __init__(self, session: ModelSession, watcher: CallWatcher) -> None:
        self.session = session
        self._watcher = watcher

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)  # model_name, as the session has it

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        self._watcher.model_called(request)
        events = await self.session.begin_turn(request, cancellation)
        return _watched(events, request.session_id, self._watcher)


async def _watched(
    events: AsyncIterator[ModelEvent], session_id: str, watcher: CallWatcher
) -> AsyncIterator[ModelEvent]:
    try:
        async for event in events:
            if isinstance(event, ModelTurnResult):
                watcher.model_answered(session_id, event)
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
