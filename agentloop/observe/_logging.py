"""Events as log lines (structlog) and as a JSON Lines record."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import IO, Any, Literal, TextIO

import structlog

from ..loop._converter import unstructure
from ..loop._events import AgentEvent, ContentDelta, RunStarted, TurnStarted

__all__ = ["JsonlEventReporter", "StructlogObserver", "event_fields"]

_MAX_TEXT = 200


def event_fields(event: AgentEvent) -> dict[str, Any]:
    """A compact JSON view of ``event`` for a log line: item lists become counts and
    strings longer than 200 characters are cut (``JsonlEventReporter`` keeps everything)."""
    fields = unstructure(event)
    fields.pop("type", None)
    return {key: _compact(key, value) for key, value in fields.items()}


def _compact(key: str, value: Any) -> Any:
    if key == "items" and isinstance(value, list):
        return len(value)
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        return value[:_MAX_TEXT] + "..."
    if isinstance(value, dict):
        return {k: _compact(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact("", v) for v in value]
    return value


def _event_name(event: AgentEvent) -> str:
    return str(unstructure(event)["type"])


class StructlogObserver:
    """Logs one line per event through structlog (``event="agentloop.<type>"``).

    By default it logs to ``structlog.get_logger("agentloop")``, which stays
    as quiet or as loud as the host configured structlog. ``to_stream``
    makes one that writes its own lines (JSON or console) to a stream, with
    no global configuration. Streaming deltas are skipped unless ``deltas``.
    """

    def __init__(self, logger: Any = None, *, deltas: bool = False, level: str = "info") -> None:
        self.logger = logger if logger is not None else structlog.get_logger("agentloop")
        self.deltas = deltas
        self._log: Callable[..., Any] = getattr(self.logger, level)
        self._session: str | None = None

    @classmethod
    def to_stream(
        cls, stream: TextIO, *, format: Literal["json", "console"] = "json", deltas: bool = False
    ) -> StructlogObserver:
        """An observer writing its own lines to ``stream`` (``format`` json or console)."""
        renderer: Any = (
            structlog.processors.JSONRenderer(sort_keys=True)
            if format == "json"
            else structlog.dev.ConsoleRenderer(colors=False)
        )
        logger = structlog.wrap_logger(  # everything explicit: the host's config is not ours
            structlog.PrintLogger(stream),
            processors=[structlog.processors.TimeStamper(fmt="iso", utc=True), renderer],
            wrapper_class=structlog.BoundLogger,
            context_class=dict,
            cache_logger_on_first_use=False,
        )
        return cls(logger, deltas=deltas)

    def handle_event(self, event: AgentEvent) -> None:
        """Log ``event`` with its fields (and the session it belongs to)."""
        if isinstance(event, ContentDelta) and not self.deltas:
            return
        if isinstance(event, RunStarted | TurnStarted):
            self._session = event.session_id
        fields = event_fields(event)
        fields.setdefault("session_id", self._session)
        self._log(f"agentloop.{_event_name(event)}", **fields)


class JsonlEventReporter:
    """Writes every event as one JSON line: ``{"timestamp", "session_id", "event"}``.

    ``event`` is the full event (``agentloop.unstructure``), tagged with its
    ``type``; lines are flushed one by one unless ``flush=False``. Write
    errors never reach the driver: they are kept in :attr:`errors`.
    """

    def __init__(self, stream: IO[str], *, flush: bool = True, deltas: bool = True) -> None:
        self.stream = stream
        self.flush = flush
        self.deltas = deltas
        self.errors: list[Exception] = []
        self._session: str | None = None

    def handle_event(self, event: AgentEvent) -> None:
        """Append one line for ``event``."""
        if isinstance(event, ContentDelta) and not self.deltas:
            return
        if isinstance(event, RunStarted | TurnStarted):
            self._session = event.session_id
        try:
            line = json.dumps(
                {
                    "timestamp": time.time(),
                    "session_id": self._session,
                    "event": unstructure(event),
                },
                ensure_ascii=False,
                default=str,
            )
            self.stream.write(line + "\n")
            if self.flush:
                self.stream.flush()
        except Exception as error:
            self.errors.append(error)
