"""Responses API stream events to model events (pure, no I/O).

Events as OpenAI documents them (``openai-python``'s ``types/responses/*_event.py``):
``response.created`` / ``in_progress`` / ``queued`` (the response's id and model),
``response.output_item.added`` / ``done`` (one output item each: ``message``,
``function_call``, ``reasoning``, or a type agentloop keeps whole), the deltas
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

import attrs

from ..core._errors import ProviderError, ProviderErrorKind
from ..core._items import CustomPart, FinishReason, PartKind, Usage
from ..model._protocol import ModelEvent
from ._accumulator import StreamAccumulator
from ._classify import classify, error_object
from ._config import shorten
from ._responses_render import (
    ANNOTATIONS_KEY,
    ENCRYPTED_CONTENT_KEY,
    ITEM_ID_KEY,
    PHASE_KEY,
    REASONING_ID_KEY,
    REASONING_TEXT_KEY,
    REFUSAL_KEY,
    SUMMARY_KEY,
)
from ._sse import ServerSentEvent, parse_json_data
from ._transport import PROVIDER_FINISH_KEY, compact_json
from ._wire import (
    get_index,
    get_list,
    get_mapping,
    get_str,
    malformed,
    require_mapping,
    usage_cost,
    usage_count,
)

__all__ = ["OpenAIResponsesStreamTranslator", "stream_failure"]

_P = "OpenAI"
_INVALID = ProviderErrorKind.INVALID_RESPONSE
_SEPARATOR = "\n\n"
_INCOMPLETE_REASONS = {
    "max_output_tokens": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.BLOCKED,
}
_STATUSES = {"cancelled": FinishReason.CANCELLED}
_CODE_KINDS = {
    "bio_policy": ProviderErrorKind.CONTENT_FILTER,
    "image_content_policy_violation": ProviderErrorKind.CONTENT_FILTER,
    "vector_store_timeout": ProviderErrorKind.RETRYABLE,
    **dict.fromkeys(
        (
            "data_residency_mismatch",
            "invalid_image",
            "invalid_image_format",
            "invalid_base64_image",
            "invalid_image_url",
            "image_too_large",
            "image_too_small",
            "image_parse_error",
            "invalid_image_mode",
            "image_file_too_large",
            "unsupported_image_media_type",
            "empty_image_file",
            "failed_to_download_image",
            "image_file_not_found",
        ),
        ProviderErrorKind.INVALID_REQUEST,
    ),
}


@attrs.define
class _OutputItem:
    """One announced output item: its type, id, the item as added, and how far it got."""

    type: str
    id: str | None
    item: dict[str, Any]
    done: bool = False
    text_keys: list[str] = attrs.field(factory=list)
    segment: tuple[str, int] | None = None


class OpenAIResponsesStreamTranslator:
    """Turns Responses API stream events into model events."""

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self._accumulator = StreamAccumulator(provider=_P, new_call_id=new_call_id)
        self._items: dict[int, _OutputItem] = {}
        self._streamed: dict[str, str] = {}
        self._done = False
        self._status: str | None = None
        self._incomplete: str | None = None
        self._refused = False
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
            self._accumulator.usage = _usage(usage, f"{where}.response.usage")
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
            item = require_mapping(item, f"{where}.output[{index}]", _P)
            events += self._add(index, item, f"{where}.output[{index}]")
            events += self._finish_item(index, item, f"{where}.output[{index}]")
        return events

    # -- output items ------------------------------------------------------------------------

    def _item_added(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.output_item.added"
        index = get_index(payload, "output_index", where, _P)
        return self._add(index, get_mapping(payload, "item", where, _P), f"{where}.item")

    def _add(self, index: int, item: dict[str, Any], where: str) -> list[ModelEvent]:
        if index in self._items:
            raise _protocol(f"{where}: output item {index} was announced twice")
        kind = get_str(item, "type", where, _P)
        if not kind:
            raise malformed(_P, f"{where}.type", "a string", item.get("type"))
        self._items[index] = _OutputItem(kind, get_str(item, "id", where, _P), dict(item))
        key = f"item-{index}"
        if kind == "function_call":
            return self._accumulator.tool_call(
                key,
                id=get_str(item, "call_id", where, _P),
                name=get_str(item, "name", where, _P),
                arguments=self._arguments(key, item, where),
            )
        if kind == "reasoning":
            return self._accumulator.begin(key, PartKind.REASONING)
        return []

    def _item_done(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.output_item.done"
        index = get_index(payload, "output_index", where, _P)
        item = require_mapping(payload.get("item"), f"{where}.item", _P)
        events = [] if index in self._items else self._add(index, item, f"{where}.item")
        return events + self._finish_item(index, item, f"{where}.item")

    def _finish_item(self, index: int, item: dict[str, Any], where: str) -> list[ModelEvent]:
        state = self._items[index]
        if state.done:
            raise _protocol(f"{where}: output item {index} was finished twice")
        kind = get_str(item, "type", where, _P)
        if kind != state.type:
            raise _protocol(f"{where}: output item {index} was announced as {state.type!r}")
        state.done = True
        finishers = {
            "message": self._message_done,
            "function_call": self._call_done,
            "reasoning": self._reasoning_done,
        }
        return finishers.get(kind, self._other_done)(index, state, item, where)

    def _message_done(
        self, index: int, state: _OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for position, content in enumerate(get_list(item, "content", where, _P)):
            content_where = f"{where}.content[{position}]"
            content = require_mapping(content, content_where, _P)
            kind = get_str(content, "type", content_where, _P)
            if kind not in ("output_text", "refusal"):
                continue
            field = "text" if kind == "output_text" else "refusal"
            final = get_str(content, field, content_where, _P) or ""
            events += self._settle_text(index, state, position, final, kind == "refusal")
            annotations = get_list(content, "annotations", content_where, _P)
            key = f"item-{index}-{position}"
            if annotations and self._accumulator.is_open(key):
                self._accumulator.update_metadata(key, {ANNOTATIONS_KEY: annotations})
        for key in state.text_keys:
            events += self._accumulator.commit(key)
        return events

    def _call_done(
        self, index: int, state: _OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        key = f"item-{index}"
        events = self._accumulator.tool_call(
            key, id=get_str(item, "call_id", where, _P), name=get_str(item, "name", where, _P)
        )
        events += self._settle_arguments(key, self._arguments(None, item, where), where)
        if state.id:
            self._accumulator.update_metadata(key, {ITEM_ID_KEY: state.id})
        return events + self._accumulator.commit(key)

    def _reasoning_done(
        self, index: int, state: _OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        key = f"item-{index}"
        summaries = _texts(item, "summary", "summary_text", where)
        contents = _texts(item, "content", "reasoning_text", where)
        metadata: dict[str, Any] = {REASONING_ID_KEY: state.id} if state.id else {}
        encrypted = get_str(item, "encrypted_content", where, _P)
        encrypted = encrypted or get_str(state.item, "encrypted_content", where, _P)
        if encrypted:  # the done item's: the added item's may be incomplete
            metadata[ENCRYPTED_CONTENT_KEY] = encrypted
        metadata[SUMMARY_KEY] = summaries
        if contents:
            metadata[REASONING_TEXT_KEY] = contents
        events: list[ModelEvent] = []
        if key not in self._streamed:  # nothing was streamed: the item's own text
            text = _SEPARATOR.join(text for text in contents or summaries if text)
            events += self._accumulator.reasoning(key, text)
        self._accumulator.update_metadata(key, metadata)
        return events + self._accumulator.commit(key)

    def _other_done(
        self, index: int, state: _OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        part = CustomPart(f"openai.{state.type}", dict(item))
        return self._accumulator.complete_part(f"item-{index}", part)

    # -- deltas ------------------------------------------------------------------------------

    def _text_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        return self._content_delta(payload, refusal=False)

    def _refusal_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        return self._content_delta(payload, refusal=True)

    def _content_delta(self, payload: dict[str, Any], *, refusal: bool) -> list[ModelEvent]:
        where = str(payload.get("type"))
        index, state = self._locate(payload, where, "message")
        position = get_index(payload, "content_index", where, _P)
        delta = get_str(payload, "delta", where, _P) or ""
        return self._append_text(index, state, position, delta, refusal)

    def _text_done(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = str(payload.get("type"))
        index, state = self._locate(payload, where, "message")
        position = get_index(payload, "content_index", where, _P)
        refusal = where == "response.refusal.done"
        final = get_str(payload, "refusal" if refusal else "text", where, _P) or ""
        return self._settle_text(index, state, position, final, refusal)

    def _arguments_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.function_call_arguments.delta"
        index, _state = self._locate(payload, where, "function_call")
        delta = get_str(payload, "delta", where, _P) or ""
        key = f"item-{index}"
        self._streamed[key] = self._streamed.get(key, "") + delta
        return self._accumulator.tool_call(key, arguments=delta)

    def _arguments_done(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.function_call_arguments.done"
        index, _state = self._locate(payload, where, "function_call")
        arguments = get_str(payload, "arguments", where, _P)
        if arguments is None:
            return []
        return self._settle_arguments(f"item-{index}", arguments, where)

    def _summary_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.reasoning_summary_text.delta"
        index, state = self._locate(payload, where, "reasoning")
        segment = ("summary", get_index(payload, "summary_index", where, _P))
        return self._append_reasoning(index, state, segment, get_str(payload, "delta", where, _P))

    def _reasoning_text_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        where = "response.reasoning_text.delta"
        index, state = self._locate(payload, where, "reasoning")
        segment = ("content", get_index(payload, "content_index", where, _P))
        return self._append_reasoning(index, state, segment, get_str(payload, "delta", where, _P))

    _handlers: ClassVar[dict[str | None, Callable[[Any, dict[str, Any]], list[ModelEvent]]]] = {
        "response.created": _started,
        "response.in_progress": _started,
        "response.queued": _started,
        "response.output_item.added": _item_added,
        "response.output_item.done": _item_done,
        "response.output_text.delta": _text_delta,
        "response.output_text.done": _text_done,
        "response.refusal.delta": _refusal_delta,
        "response.refusal.done": _text_done,
        "response.function_call_arguments.delta": _arguments_delta,
        "response.function_call_arguments.done": _arguments_done,
        "response.reasoning_summary_text.delta": _summary_delta,
        "response.reasoning_text.delta": _reasoning_text_delta,
        "response.completed": _completed,
        "response.incomplete": _incomplete_response,
        "response.failed": _failed,
        "error": _error,
    }

    # -- helpers -----------------------------------------------------------------------------

    def _locate(self, payload: dict[str, Any], where: str, kind: str) -> tuple[int, _OutputItem]:
        """The announced, unfinished output item of ``kind`` the event addresses."""
        if payload.get("output_index") is None and isinstance(payload.get("item_id"), str):
            found = [i for i, state in self._items.items() if state.id == payload["item_id"]]
            index = found[0] if found else -1
        else:
            index = get_index(payload, "output_index", where, _P)
        state = self._items.get(index)
        if state is None:
            raise _protocol(
                f"{where} for output item {payload.get('output_index', payload.get('item_id'))!r}, "
                "which the stream never announced with response.output_item.added"
            )
        if state.done:
            raise _protocol(f"{where} for output item {index} after its response.output_item.done")
        if state.type != kind:
            raise _protocol(f"{where} for output item {index}, which is a {state.type!r} item")
        return index, state

    def _append_text(
        self, index: int, state: _OutputItem, position: int, delta: str, refusal: bool
    ) -> list[ModelEvent]:
        key = f"item-{index}-{position}"
        if not delta:
            return []
        events: list[ModelEvent] = []
        if key not in state.text_keys:
            state.text_keys.append(key)
            events += self._accumulator.begin(key, PartKind.TEXT)
            metadata: dict[str, Any] = {ITEM_ID_KEY: state.id} if state.id else {}
            phase = state.item.get("phase")
            if isinstance(phase, str) and phase:
                metadata[PHASE_KEY] = phase
            if refusal:
                metadata[REFUSAL_KEY] = True
                self._refused = True
            self._accumulator.update_metadata(key, metadata)
        self._streamed[key] = self._streamed.get(key, "") + delta
        return events + self._accumulator.text(key, delta)

    def _settle_text(
        self, index: int, state: _OutputItem, position: int, final: str, refusal: bool
    ) -> list[ModelEvent]:
        """Append what ``final`` (a ``done`` event's whole text) adds to the deltas."""
        key = f"item-{index}-{position}"
        rest = _rest(self._streamed.get(key, ""), final, f"output item {index}'s text")
        return self._append_text(index, state, position, rest, refusal)

    def _settle_arguments(self, key: str, final: str, where: str) -> list[ModelEvent]:
        rest = _rest(self._streamed.get(key, ""), final, f"{where}'s arguments")
        if not rest:
            return []
        self._streamed[key] = final
        return self._accumulator.tool_call(key, arguments=rest)

    def _append_reasoning(
        self, index: int, state: _OutputItem, segment: tuple[str, int], delta: str | None
    ) -> list[ModelEvent]:
        """Stream reasoning text; each new summary part or content part starts a paragraph."""
        if not delta:
            return []
        key = f"item-{index}"
        if state.segment not in (None, segment) and self._streamed.get(key):
            delta = _SEPARATOR + delta
        state.segment = segment
        self._streamed[key] = self._streamed.get(key, "") + delta
        return self._accumulator.reasoning(key, delta)

    def _arguments(self, key: str | None, item: dict[str, Any], where: str) -> str:
        arguments = item.get("arguments")
        if arguments is None:
            return ""
        if isinstance(arguments, dict):
            arguments = compact_json(arguments)  # a few servers send the object itself
        if not isinstance(arguments, str):
            raise malformed(_P, f"{where}.arguments", "a string, an object or null", arguments)
        if key is not None and arguments:
            self._streamed[key] = arguments
        return arguments

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
        return self._accumulator.result(
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
        if self._accumulator.has_tool_calls:
            return FinishReason.TOOL_CALL
        return FinishReason.BLOCKED if self._refused else FinishReason.COMPLETED

    def cancel(self) -> list[ModelEvent]:
        """A cancelled result keeping the text so far."""
        return self._accumulator.cancelled(model=self._model, response_id=self._response_id)


def stream_failure(error: dict[str, Any]) -> ProviderError:
    """The ``ProviderError`` for a ``response.failed`` error or an ``error`` event.

    Classified as HTTP errors are, and by the Responses API's own codes
    (``ResponseError.code``): policy codes are ``CONTENT_FILTER``, image and
    residency codes ``INVALID_REQUEST``, ``invalid_prompt`` either (a flagged
    prompt, or another invalid one).
    """
    body = error_object({"error": error})
    code = error.get("code")
    code = code.lower() if isinstance(code, str) else ""
    kind = _CODE_KINDS.get(code) or classify(body.status, body.codes, body.message)
    if code == "invalid_prompt":
        flagged = any(word in body.message.lower() for word in ("flagged", "usage polic"))
        kind = ProviderErrorKind.CONTENT_FILTER if flagged else ProviderErrorKind.INVALID_REQUEST
    kind_text = f" ({body.error_type})" if body.error_type else ""
    return ProviderError(
        f"{_P}: stream error{kind_text}: {body.message}",
        status=body.status,
        error_type=body.error_type,
        kind=kind,
    )


def _protocol(problem: str) -> ProviderError:
    return ProviderError(
        f"{_P}: malformed response: {problem}", error_type="malformed_stream", kind=_INVALID
    )


def _rest(streamed: str, final: str, what: str) -> str:
    """What ``final`` adds to ``streamed``; a ``final`` that contradicts it is malformed."""
    if final.startswith(streamed):
        return final[len(streamed) :]
    raise _protocol(
        f"{what} is {shorten(final, 80)!r} at its end, but its deltas made "
        f"{shorten(streamed, 80)!r}"
    )


def _texts(item: dict[str, Any], field: str, kind: str, where: str) -> list[str]:
    texts: list[str] = []
    for position, entry in enumerate(get_list(item, field, where, _P)):
        entry_where = f"{where}.{field}[{position}]"
        entry = require_mapping(entry, entry_where, _P)
        if get_str(entry, "type", entry_where, _P) in (kind, None):
            texts.append(get_str(entry, "text", entry_where, _P) or "")
    return texts


def _usage(usage: dict[str, Any], where: str) -> Usage:
    inputs = get_mapping(usage, "input_tokens_details", where, _P)
    outputs = get_mapping(usage, "output_tokens_details", where, _P)
    return Usage(
        input_tokens=usage_count(usage, "input_tokens", _P),
        output_tokens=usage_count(usage, "output_tokens", _P),
        reasoning_tokens=usage_count(outputs, "reasoning_tokens", _P),
        cache_read_tokens=usage_count(inputs, "cached_tokens", _P),
        cache_write_tokens=usage_count(inputs, "cache_write_tokens", _P),
        cost=usage_cost(usage.get("cost"), _P),
    )
