"""The session every HTTP adapter shares: body, endpoint and translator per turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Generic, Protocol, TypeVar

from ..core._cancellation import TurnCancellation
from ..model._protocol import ModelEvent, TurnRequest
from ..model._session_config import SessionConfig
from ._output_modes import add_output_fields, has_native_output
from ._transport import Endpoint, StreamTranslator, stream_turn

__all__ = ["HttpModel", "HttpSession"]


class HttpModel(Protocol):
    """What an adapter gives its sessions: a body, an endpoint, a fresh translator."""

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body for ``request``."""
        ...

    def endpoint(self) -> Endpoint:
        """Where the body goes."""
        ...

    def stream_translator(self) -> StreamTranslator:
        """A new translator for one turn's response."""
        ...


ModelT = TypeVar("ModelT", bound=HttpModel)


class HttpSession(Generic[ModelT]):
    """One conversation with an HTTP adapter; sessions are cheap and hold no connection."""

    def __init__(self, model: ModelT, config: SessionConfig) -> None:
        self.model = model
        self.config = config

    @property
    def native_output(self) -> bool:
        """Whether the adapter has a native structured-output mode (``OutputMode.AUTO``
        picks it)."""
        return has_native_output(self.model)

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        """Build the request body now; the HTTP request starts when the stream is read."""
        body = add_output_fields(self.model, request, self.model.request_body(request))
        translator = self.model.stream_translator()
        return stream_turn(self.model.endpoint(), body, translator, cancellation)
