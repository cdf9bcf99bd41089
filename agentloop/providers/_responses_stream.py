"""Responses API stream events to model events (pure, no I/O).

Events as OpenAI documents them (``openai-python``'s ``types/responses/*_event.py``):
``response.created`` / ``in_progress`` / ``queued`` (the response's id and model),
``response.output_item.added`` / ``done`` (one output item each, assembled into parts
by :class:`~agentloop.providers._responses_items.OutputItems`), the deltas
(``output_text``, ``refusal``, ``function_call_arguments``,
``reasoning_summary_text``, ``reasoning_text``) addressed by ``output_index`` and
``content_index``, and the terminal ``response.completed`` / ``response.incomplete``
(usage, status) / ``response.failed`` and ``error``. Unknown event types are
ignored; an event that addresses an item the stream never announced, or one already
done, is a ``ProviderError`` of kind ``INVALID_RESPONSE``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..core._errors import ProviderError, ProviderErrorKind
from ..core._items import FinishReason
from ..model._protocol import ModelEvent
from ._responses_items import OutputItems
from ._responses_wire import stream_failure, usage_of
from ._sse import ServerSentEvent, parse_json_data
from ._transport import PROVIDER_FINISH_KEY
from ._wire import get_index, get_list, get_mapping, get_str, require_mapping

__all__ = ["OpenAIResponsesStreamTranslator"]

_P = "OpenAI"
_INCOMPLETE_REASONS = {
    "max_output_tokens": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.BLOCKED,
}
_STATUSES = {"cancelled": FinishReason.CANCELLED}
_Handler = Callable[[Any, dict[str, Any]], list[ModelEvent]]


class OpenAIResponsesStreamTranslator:
    """Turns Responses API stream events into model events."""

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self._items = OutputItems(new_call_id=new_call_id)
        self._done = False
        self._status: str | None = None
        self._incomplete: str | None = None
        self._model: str | None = None
        self._response_id: str | None = None

    @property
    def done(self) -> bool:
        """Whether ``response.completed`` or ``response.incomplete`` was seen."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The events for one SSE record (``data: [DONE]`` and unknown types are ignored)."""
        if event.data.strip() == "[DONE]":
            return []
        payload = require_mapping(parse_json_data(event, _P), "a stream event", _P)
        kind = get_str(payload, "type", "event", _P) or event.event
        handler = self._handlers.get(kind)
        return [] if handler is None else handler(self, payload)

    # -- the response ------------------------------------------------------------------------

    def _response(self, payload: dict[str, Any]) -> dict[str, Any]:
        where = str(payload.get("type"))
        response = get_mapping(payload, "response", where, _P)
        self._response_id = get_str(response, "id", f"{where}.response", _P) or self._response_id
        self._model = get_str(response, "model", f"{where}.response", _P) or self._model
        usage = response.get("usage")
        if usage is not None:
            usage = require_mapping(usage, f"{where}.response.usage", _P)
            self._items.accumulator.usage = usage_of(usage, f"{where}.response.usage")
        return response

    def _started(self, payload: dict[str, Any]) -> list[ModelEvent]:
        self._response(payload)
        return []

    def _completed(self, payload: dict[str, Any]) -> list[ModelEvent]:
        response = self._response(payload)
        self._status = get_str(response, "status", "response.completed.response", _P)
        self._done = True
        return self._backfill(response, "response.completed.response")

    def _incomplete_response(self, payload: dict[str, Any]) -> list[ModelEvent]:
        response = self._response(payload)
        where = "response.incomplete.response"
        details = get_mapping(response, "incomplete_details", where, _P)
        self._incomplete = get_str(details, "reason", f"{where}.incomplete_details", _P)
        self._status = "incomplete"
        self._done = True
        return self._backfill(response, where)

    def _failed(self, payload: dict[str, Any]) -> list[ModelEvent]:
        response = self._response(payload)
        error = get_mapping(response, "error", "response.failed.response", _P)
        raise stream_failure(error or {"message": "the response failed (no error object given)"})

    def _error(self, payload: dict[str, Any]) -> list[ModelEvent]:
        error = payload.get("error")
        if not isinstance(error, dict):
            error = {name: value for name, value in payload.items() if name != "type"}
        raise stream_failure(error)

    def _backfill(self, response: dict[str, Any], where: str) -> list[ModelEvent]:
        """The response's ``output`` items, when the stream announced none of them."""
        if self._items:
            return []
        events: list[ModelEvent] = []
        for index, item in enumerate(get_list(response, "output", where, _P)):
            item_where = f"{where}.output[{index}]"
            item = require_mapping(item, item_where, _P)
            events += self._items.add(index, item, item_where)
            events += self._items.finish(index, item, item_where)
        return events

    # -- output items and their deltas -------------------------------------------------------

    def _item_added(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.output_item.added"
        item = get_mapping(payload, "item", where, _P)
        index = self._index(payload, item, where, announcing=True)
        return self._items.add(index, item, f"{where}.item")

    def _item_done(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.output_item.done"
        item = require_mapping(payload.get("item"), f"{where}.item", _P)
        index = self._index(payload, item, where, announcing=False)
        events = [] if index in self._items else self._items.add(index, item, f"{where}.item")
        return events + self._items.finish(index, item, f"{where}.item")

    def _index(
        self, payload: dict[str, Any], item: dict[str, Any], where: str, *, announcing: bool
    ) -> int:
        """The event's ``output_index``; without one (llama.cpp sends none), the item's id."""
        if payload.get("output_index") is not None:
            return get_index(payload, "output_index", where, _P)
        item_id = get_str(item, "id", f"{where}.item", _P)
        return self._items.index_of(None if announcing else item_id)

    def _content_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = str(payload.get("type"))
        index, state = self._items.locate(payload, where, "message")
        position = get_index(payload, "content_index", where, _P)
        delta = get_str(payload, "delta", where, _P) or ""
        refusal = where == "response.refusal.delta"
        return self._items.append_text(index, state, position, delta, refusal)

    def _content_done(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = str(payload.get("type"))
        index, state = self._items.locate(payload, where, "message")
        position = get_index(payload, "content_index", where, _P)
        refusal = where == "response.refusal.done"
        final = get_str(payload, "refusal" if refusal else "text", where, _P) or ""
        return self._items.settle_text(index, state, position, final, refusal)

    def _arguments_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.function_call_arguments.delta"
        index, _state = self._items.locate(payload, where, "function_call")
        return self._items.append_arguments(index, get_str(payload, "delta", where, _P) or "")

    def _arguments_done(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.function_call_arguments.done"
        index, _state = self._items.locate(payload, where, "function_call")
        arguments = get_str(payload, "arguments", where, _P)
        return [] if arguments is None else self._items.settle_arguments(index, arguments, where)

    def _reasoning_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = str(payload.get("type"))
        index, state = self._items.locate(payload, where, "reasoning")
        field = "summary_index" if "summary" in where else "content_index"
        segment = (field, get_index(payload, field, where, _P))
        delta = get_str(payload, "delta", where, _P)
        return self._items.append_reasoning(index, state, segment, delta)

    _handlers: ClassVar[dict[str | None, _Handler]] = {
        "response.created": _started,
        "response.in_progress": _started,
        "response.queued": _started,
        "response.output_item.added": _item_added,
        "response.output_item.done": _item_done,
        "response.output_text.delta": _content_delta,
        "response.output_text.done": _content_done,
        "response.refusal.delta": _content_delta,
        "response.refusal.done": _content_done,
        "response.function_call_arguments.delta": _arguments_delta,
        "response.function_call_arguments.done": _arguments_done,
        "response.reasoning_summary_text.delta": _reasoning_delta,
        "response.reasoning_text.delta": _reasoning_delta,
        "response.completed": _completed,
        "response.incomplete": _incomplete_response,
        "response.failed": _failed,
        "error": _error,
    }

    # -- the end -----------------------------------------------------------------------------

    def finish(self) -> list[ModelEvent]:
        """The closing events; a stream without its terminal event is a ``ProviderError``."""
        if not self._done:
            raise ProviderError(
                "OpenAI: the stream ended before 'response.completed' (the connection closed "
                "mid-response); the turn is incomplete",
                error_type="incomplete_stream",
                kind=ProviderErrorKind.RETRYABLE,
            )
        wire = self._incomplete or self._status
        metadata = {PROVIDER_FINISH_KEY: wire} if wire else {}
        return self._items.accumulator.result(
            self._finish_reason(),
            model=self._model,
            response_id=self._response_id,
            metadata=metadata,
        )

    def _finish_reason(self) -> FinishReason:
        if self._status == "incomplete":
            return _INCOMPLETE_REASONS.get(self._incomplete or "", FinishReason.OTHER)
        if self._status not in (None, "completed"):
            return _STATUSES.get(self._status, FinishReason.OTHER)
        if self._items.accumulator.has_tool_calls:
            return FinishReason.TOOL_CALL
        return FinishReason.BLOCKED if self._items.refused else FinishReason.COMPLETED

    def cancel(self) -> list[ModelEvent]:
        """A cancelled result keeping the text so far."""
        return self._items.accumulator.cancelled(model=self._model, response_id=self._response_id)
