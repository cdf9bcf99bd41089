"""Anthropic Messages API stream events to model events (pure, no I/O)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from ..core._errors import ProviderError, ProviderErrorKind
from ..core._items import CustomPart, FinishReason, PartKind, ReasoningPart, Usage
from ..model._accumulator import StreamAccumulator
from ..model._protocol import ModelEvent
from ._anthropic_render import REDACTED_DATA_KEY, SIGNATURE_KEY
from ._classify import stream_error
from ._sse import ServerSentEvent, parse_json_data
from ._transport import PROVIDER_FINISH_KEY, compact_json
from ._wire import get_index, get_mapping, get_str, malformed, require_mapping, usage_count

__all__ = ["DELTAS_KEY", "AnthropicStreamTranslator"]

DELTAS_KEY = "anthropic.deltas"
"""CustomPart metadata: the deltas of an unknown block that could not be folded into it."""

_P = "Anthropic"
_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

_STOP_REASONS = {
    "end_turn": FinishReason.COMPLETED,
    "stop_sequence": FinishReason.COMPLETED,
    "tool_use": FinishReason.TOOL_CALL,
    "max_tokens": FinishReason.MAX_TOKENS,
    "model_context_window_exceeded": FinishReason.MAX_TOKENS,
    "refusal": FinishReason.BLOCKED,
}


class AnthropicStreamTranslator:
    """Turns Messages API stream events into model events."""

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self._accumulator = StreamAccumulator(provider="Anthropic", new_call_id=new_call_id)
        self._done = False
        self._stop_reason: str | None = None
        self._model: str | None = None
        self._response_id: str | None = None
        self._usage: dict[str, int] = {}
        self._signatures: dict[str, str] = {}
        self._custom: dict[str, _CustomBlock] = {}

    @property
    def done(self) -> bool:
        """Whether ``message_stop`` was seen."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The events for one SSE record."""
        payload = require_mapping(parse_json_data(event, "Anthropic"), "an event", "Anthropic")
        kind = get_str(payload, "type", "event", _P) or event.event
        handler = self._handlers.get(kind)
        if handler is None:
            return []  # ping and future event types
        return handler(self, payload)

    def _error(self, payload: dict[str, Any]) -> list[ModelEvent]:
        raise stream_error("Anthropic", payload)

    def _message_start(self, payload: dict[str, Any]) -> list[ModelEvent]:
        message = get_mapping(payload, "message", "message_start", _P)
        self._model = get_str(message, "model", "message_start.message", _P)
        self._response_id = get_str(message, "id", "message_start.message", _P)
        self._merge_usage(message.get("usage"), "message_start.message.usage")
        return []

    def _block_start(self, payload: dict[str, Any]) -> list[ModelEvent]:
        key = f"block-{get_index(payload, 'index', 'content_block_start', _P)}"
        where = "content_block_start.content_block"
        block = get_mapping(payload, "content_block", "content_block_start", _P)
        kind = get_str(block, "type", where, _P)
        accumulator = self._accumulator
        if kind == "text":
            return accumulator.text(key, get_str(block, "text", where, _P) or "")
        if kind == "thinking":
            events = accumulator.begin(key, PartKind.REASONING)
            events += accumulator.reasoning(key, get_str(block, "thinking", where, _P) or "")
            signature = get_str(block, "signature", where, _P)
            if signature:
                self._signature(key, signature)
            return events
        if kind == "redacted_thinking":
            data = get_str(block, "data", where, _P)
            part = ReasoningPart("", redacted=True, metadata={REDACTED_DATA_KEY: data})
            return accumulator.complete_part(key, part)
        if kind == "tool_use":
            start_input = block.get("input")
            if start_input is not None and not isinstance(start_input, dict):
                raise malformed(_P, f"{where}.input", "an object", start_input)
            arguments = compact_json(start_input) if start_input else ""
            return accumulator.tool_call(
                key,
                id=get_str(block, "id", where, _P),
                name=get_str(block, "name", where, _P),
                arguments=arguments,
            )
        self._custom[key] = _CustomBlock(dict(block))
        return []

    def _block_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        key = f"block-{get_index(payload, 'index', 'content_block_delta', _P)}"
        where = "content_block_delta.delta"
        delta = get_mapping(payload, "delta", "content_block_delta", _P)
        kind = get_str(delta, "type", where, _P)
        accumulator = self._accumulator
        if key in self._custom:
            self._custom[key].add(delta, kind, where)
            return []
        if kind == "text_delta":
            return accumulator.text(key, get_str(delta, "text", where, _P) or "")
        if kind == "thinking_delta":
            return accumulator.reasoning(key, get_str(delta, "thinking", where, _P) or "")
        if kind == "signature_delta":
            self._signature(key, get_str(delta, "signature", where, _P) or "")
            return []
        if kind == "input_json_delta":
            partial = get_str(delta, "partial_json", where, _P) or ""
            return accumulator.tool_call(key, arguments=partial)
        return []  # citations_delta and future delta types

    def _block_stop(self, payload: dict[str, Any]) -> list[ModelEvent]:
        key = f"block-{get_index(payload, 'index', 'content_block_stop', _P)}"
        if key in self._custom:
            return self._accumulator.complete_part(key, self._custom.pop(key).part())
        return self._accumulator.commit(key)

    def _message_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        delta = get_mapping(payload, "delta", "message_delta", _P)
        stop_reason = get_str(delta, "stop_reason", "message_delta.delta", _P)
        if stop_reason:
            self._stop_reason = stop_reason
        self._merge_usage(payload.get("usage"), "message_delta.usage")
        return []

    def _message_stop(self, _payload: dict[str, Any]) -> list[ModelEvent]:
        self._done = True
        return []

    _handlers: ClassVar[dict[str, Callable[[Any, dict[str, Any]], list[ModelEvent]]]] = {
        "error": _error,
        "message_start": _message_start,
        "content_block_start": _block_start,
        "content_block_delta": _block_delta,
        "content_block_stop": _block_stop,
        "message_delta": _message_delta,
        "message_stop": _message_stop,
    }

    def _signature(self, key: str, fragment: str) -> None:
        self._signatures[key] = self._signatures.get(key, "") + fragment
        self._accumulator.update_metadata(key, {SIGNATURE_KEY: self._signatures[key]})

    def _merge_usage(self, usage: Any, where: str) -> None:
        if usage is None:
            return
        usage = require_mapping(usage, where, _P)
        for name in _USAGE_FIELDS:
            if usage.get(name) is not None:
                self._usage[name] = usage_count(usage, name, _P)
        read = self._usage.get("cache_read_input_tokens", 0)
        written = self._usage.get("cache_creation_input_tokens", 0)
        self._accumulator.usage = Usage(
            input_tokens=self._usage.get("input_tokens", 0) + read + written,
            output_tokens=self._usage.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=written,
        )

    def finish(self) -> list[ModelEvent]:
        """The closing events; a stream without ``message_stop`` is a ``ProviderError``."""
        if not self._done:
            raise ProviderError(
                "Anthropic: the stream ended before 'message_stop' (the connection closed "
                "mid-response); the turn is incomplete",
                error_type="incomplete_stream",
                kind=ProviderErrorKind.RETRYABLE,
            )
        reason = _STOP_REASONS.get(self._stop_reason or "end_turn", FinishReason.OTHER)
        metadata = {PROVIDER_FINISH_KEY: self._stop_reason} if self._stop_reason else {}
        return self._accumulator.result(
            reason, model=self._model, response_id=self._response_id, metadata=metadata
        )

    def cancel(self) -> list[ModelEvent]:
        """A cancelled result keeping the text so far."""
        return self._accumulator.cancelled(model=self._model, response_id=self._response_id)


class _CustomBlock:
    """A content block of a type agentloop does not model, and every delta it got.

    ``input_json_delta`` pieces become the block's ``input``; each string field
    of another delta (``compaction_delta``'s ``content``, a ``text_delta``'s
    ``text``) is appended to the block's field of that name, so the finished
    block can be sent back as it was streamed; deltas whose fields cannot be
    folded in (not text, or the block holds a non-string there) are kept whole
    in the part's metadata (``anthropic.deltas``), never dropped.
    """

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = block
        self.json_chunks: list[str] = []
        self.unfolded: list[dict[str, Any]] = []

    def add(self, delta: dict[str, Any], kind: str | None, where: str) -> None:
        if kind == "input_json_delta":
            self.json_chunks.append(get_str(delta, "partial_json", where, _P) or "")
            return
        fields = {name: value for name, value in delta.items() if name != "type"}
        if fields and all(
            isinstance(value, str) and isinstance(self.block.get(name, ""), str | None)
            for name, value in fields.items()
        ):
            for name, value in fields.items():
                self.block[name] = (self.block.get(name) or "") + value
        elif fields:
            self.unfolded.append(dict(delta))

    def part(self) -> CustomPart:
        block = self.block
        if self.json_chunks:
            block["input"] = _json_or_text("".join(self.json_chunks))
        kind = f"anthropic.{block.get('type', 'block')}"
        metadata = {DELTAS_KEY: list(self.unfolded)} if self.unfolded else {}
        return CustomPart(kind, block, metadata=metadata)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
