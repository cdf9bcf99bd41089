"""``AnthropicModel``: the Messages API with streaming, thinking and prompt caching."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, ClassVar

import httpx

from ..core._cancellation import TurnCancellation
from ..core._errors import InvalidInputError, ProviderError
from ..core._items import (
    CustomPart,
    FilePart,
    FinishReason,
    Item,
    ItemKind,
    MediaPart,
    PartKind,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..model._config import SessionConfig
from ..model._protocol import ModelEvent, TurnRequest
from ._accumulator import StreamAccumulator
from ._anthropic_cache import apply_cache
from ._config import DEFAULT_TIMEOUT, Secret, resolve_api_key
from ._render import reminder, tool_output_text, unsupported_part
from ._retry import RetryPolicy
from ._sse import ServerSentEvent, parse_json_data
from ._transport import Endpoint, compact_json, require_mapping, stream_error, stream_turn

__all__ = [
    "ANTHROPIC_BASE_URL",
    "REDACTED_DATA_KEY",
    "SIGNATURE_KEY",
    "AnthropicModel",
    "AnthropicSession",
    "AnthropicStreamTranslator",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
SIGNATURE_KEY = "anthropic.thinking_signature"
"""ReasoningPart metadata: the signature Anthropic needs to accept the thinking back."""
REDACTED_DATA_KEY = "anthropic.redacted_data"
"""ReasoningPart metadata: the encrypted data of a ``redacted_thinking`` block."""
PROVIDER_FINISH_KEY = "agentloop.provider_finish_reason"

_STOP_REASONS = {
    "end_turn": FinishReason.COMPLETED,
    "stop_sequence": FinishReason.COMPLETED,
    "tool_use": FinishReason.TOOL_CALL,
    "max_tokens": FinishReason.MAX_TOKENS,
    "model_context_window_exceeded": FinishReason.MAX_TOKENS,
    "refusal": FinishReason.BLOCKED,
}
Block = dict[str, Any]


class AnthropicModel:
    """A Claude model behind the Messages API (``POST {base_url}/v1/messages``).

    ``api_key`` defaults to ``ANTHROPIC_API_KEY``. ``thinking_budget`` turns on
    extended thinking (``max_tokens`` must exceed it). ``tool_choice`` is
    ``"auto"``, ``"none"``, ``"required"`` (sent as ``any``) or a tool name.
    ``betas`` go in the ``anthropic-beta`` header. ``extra_body`` is merged
    into the body last.
    """

    provider_name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | Secret | None = None,
        max_tokens: int = 4096,
        base_url: str | None = None,
        thinking_budget: int | None = None,
        tool_choice: str | None = None,
        temperature: float | None = None,
        betas: Sequence[str] = (),
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not model:
            raise InvalidInputError("AnthropicModel: model must be a non-empty string")
        if thinking_budget is not None and thinking_budget >= max_tokens:
            raise InvalidInputError(
                f"AnthropicModel: max_tokens ({max_tokens}) must exceed thinking_budget "
                f"({thinking_budget}); raise max_tokens"
            )
        self.model_name = model
        self.base_url = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        self._api_key = resolve_api_key(
            api_key, ("ANTHROPIC_API_KEY",), owner="AnthropicModel", required=True
        )
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.tool_choice = tool_choice
        self.temperature = temperature
        self.betas = tuple(betas)
        self.extra_body = dict(extra_body or {})
        self._headers = dict(headers or {})
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._retry = retry or RetryPolicy()
        self._http_client = http_client

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self.model_name!r}, base_url={self.base_url!r}, api_key=set)"

    async def start_session(self, config: SessionConfig) -> AnthropicSession:
        """Open a session; sessions are cheap and hold no connection."""
        return AnthropicSession(self, config)

    def endpoint(self) -> Endpoint:
        """The URL, headers, timeout and retry policy requests go out with."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
            **self._headers,
        }
        if self._api_key is not None:
            headers["x-api-key"] = self._api_key.reveal()
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        return Endpoint(
            provider="Anthropic",
            url=f"{self.base_url}/v1/messages",
            headers=headers,
            timeout=self._timeout,
            retry=self._retry,
            client=self._http_client,
            secrets=(self._api_key,),
        )

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (raises ``ProviderError`` if it can't be sent)."""
        rendered = _Renderer().render(request.transcript)
        body: dict[str, Any] = {"model": self.model_name, "max_tokens": self.max_tokens}
        if rendered.system:
            body["system"] = rendered.system
        body["messages"] = rendered.messages
        tools = [
            {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
            for spec in request.available_tools
        ]
        if tools:
            body["tools"] = tools
            if self.tool_choice is not None:
                body["tool_choice"] = _tool_choice(self.tool_choice)
        if self.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body["stream"] = True
        apply_cache(request.cache, tools, rendered)
        body.update(self.extra_body)
        return body


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "none":
        return {"type": "none"}
    if choice in ("required", "any"):
        return {"type": "any"}
    return {"type": "tool", "name": choice}


class RenderedTranscript:
    """The system blocks and messages of a transcript, with where each item went.

    ``item_blocks[i]`` and ``part_blocks[(i, p)]`` are the very block dicts in
    ``system``/``messages``, so a cache breakpoint can be put on them after
    merging.
    """

    def __init__(self) -> None:
        self.system: list[Block] = []
        self.messages: list[dict[str, Any]] = []
        self.item_blocks: dict[int, list[Block]] = {}
        self.part_blocks: dict[tuple[int, int], Block] = {}


class _Renderer:
    def __init__(self) -> None:
        self.out = RenderedTranscript()

    def render(self, transcript: Sequence[Item]) -> RenderedTranscript:
        for index, item in enumerate(transcript):
            self._item(index, item)
        for message in self.out.messages:
            if message["role"] == "user":
                # tool_result blocks must open a user message
                message["content"].sort(key=lambda block: block.get("type") != "tool_result")
        return self.out

    def _add(self, index: int, part_index: int, block: Block) -> Block:
        self.out.item_blocks.setdefault(index, []).append(block)
        self.out.part_blocks[(index, part_index)] = block
        return block

    def _message(self, role: str, blocks: list[Block]) -> None:
        if not blocks:
            return
        messages = self.out.messages
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    def _item(self, index: int, item: Item) -> None:
        kind = item.kind
        if kind in (ItemKind.SYSTEM, ItemKind.DEVELOPER, ItemKind.CONTEXT):
            for position, part in enumerate(item.parts):
                text = _plain_text(item, index, part)
                if text:
                    self.out.system.append(self._add(index, position, _text(text)))
        elif kind is ItemKind.NOTIFICATION:
            text = "\n".join(_plain_text(item, index, part) for part in item.parts)
            self._message("user", [self._add(index, 0, _text(reminder(text)))])
        elif kind is ItemKind.USER:
            blocks = [
                self._add(index, position, block)
                for position, part in enumerate(item.parts)
                if (block := _user_block(item, index, part)) is not None
            ]
            self._message("user", blocks)
        elif kind is ItemKind.ASSISTANT:
            pairs = [
                (position, block)
                for position, part in enumerate(item.parts)
                if (block := _assistant_block(item, index, part)) is not None
            ]
            pairs.sort(key=lambda pair: pair[1]["type"] not in ("thinking", "redacted_thinking"))
            self._message("assistant", [self._add(index, p, block) for p, block in pairs])
        else:
            blocks = []
            for position, part in enumerate(item.parts):
                if not isinstance(part, ToolResultPart):
                    raise unsupported_part("Anthropic", item, index, part)
                blocks.append(self._add(index, position, _tool_result(part)))
            self._message("user", blocks)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _plain_text(item: Item, index: int, part: Any) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, StructuredPart):
        return tool_output_text(part.value)
    raise unsupported_part("Anthropic", item, index, part)


def _media_block(part: MediaPart | FilePart) -> Block | None:
    mime = part.mime_type or ""
    kind = "image" if mime.startswith("image/") else "document"
    if kind == "document" and mime != "application/pdf":
        return None
    if part.data:
        return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": part.data}}
    if part.uri:
        return {"type": kind, "source": {"type": "url", "url": part.uri}}
    return None


def _user_block(item: Item, index: int, part: Any) -> Block | None:
    if isinstance(part, TextPart | StructuredPart):
        text = _plain_text(item, index, part)
        return _text(text) if text else None
    if isinstance(part, ReasoningPart):
        return None
    if isinstance(part, MediaPart | FilePart):
        block = _media_block(part)
        if block is not None:
            return block
    raise unsupported_part("Anthropic", item, index, part)


def _assistant_block(item: Item, index: int, part: Any) -> Block | None:
    if isinstance(part, TextPart | StructuredPart):
        text = part.text if isinstance(part, TextPart) else compact_json(part.value)
        return _text(text) if text else None
    if isinstance(part, ReasoningPart):
        redacted = part.metadata.get(REDACTED_DATA_KEY)
        if isinstance(redacted, str):
            return {"type": "redacted_thinking", "data": redacted}
        signature = part.metadata.get(SIGNATURE_KEY)
        if isinstance(signature, str):
            return {"type": "thinking", "thinking": part.text, "signature": signature}
        return None  # unsigned thinking (e.g. from another provider) is not accepted back
    if isinstance(part, ToolCallPart):
        call_input = part.input if isinstance(part.input, dict) else {}
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": call_input}
    if isinstance(part, CustomPart) and part.kind.startswith("anthropic.") and part.value:
        return dict(part.value)
    raise unsupported_part("Anthropic", item, index, part)


def _tool_result(part: ToolResultPart) -> Block:
    output = part.output
    content: Any
    if isinstance(output, list | tuple) and any(isinstance(p, MediaPart) for p in output):
        content = []
        for value in output:
            media = _media_block(value) if isinstance(value, MediaPart) else None
            content.append(media or _text(tool_output_text([value])))
    else:
        content = tool_output_text(output)
    block: Block = {"type": "tool_result", "tool_use_id": part.call_id, "content": content}
    if part.is_error:
        block["is_error"] = True
    return block


# -- stream -> events ----------------------------------------------------------------------


class AnthropicSession:
    """One conversation with an :class:`AnthropicModel`."""

    def __init__(self, model: AnthropicModel, config: SessionConfig) -> None:
        self.model = model
        self.config = config

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        """Build the request body now; the HTTP request starts when the stream is read."""
        body = self.model.request_body(request)
        return stream_turn(self.model.endpoint(), body, AnthropicStreamTranslator(), cancellation)


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
        self._custom: dict[str, tuple[dict[str, Any], list[str]]] = {}

    @property
    def done(self) -> bool:
        """Whether ``message_stop`` was seen."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The events for one SSE record."""
        payload = require_mapping(parse_json_data(event, "Anthropic"), "an event", "Anthropic")
        kind = payload.get("type") or event.event
        handler = self._handlers.get(str(kind))
        if handler is None:
            return []  # ping and future event types
        return handler(self, payload)

    def _error(self, payload: dict[str, Any]) -> list[ModelEvent]:
        raise stream_error("Anthropic", payload)

    def _message_start(self, payload: dict[str, Any]) -> list[ModelEvent]:
        message = payload.get("message") or {}
        self._model = message.get("model")
        self._response_id = message.get("id")
        self._merge_usage(message.get("usage"))
        return []

    def _block_start(self, payload: dict[str, Any]) -> list[ModelEvent]:
        key = f"block-{payload.get('index', 0)}"
        block = payload.get("content_block") or {}
        kind = block.get("type")
        accumulator = self._accumulator
        if kind == "text":
            return accumulator.text(key, block.get("text") or "")
        if kind == "thinking":
            events = accumulator.begin(key, PartKind.REASONING)
            events += accumulator.reasoning(key, block.get("thinking") or "")
            if block.get("signature"):
                self._signature(key, str(block["signature"]))
            return events
        if kind == "redacted_thinking":
            part = ReasoningPart("", redacted=True, metadata={REDACTED_DATA_KEY: block.get("data")})
            return accumulator.complete_part(key, part)
        if kind == "tool_use":
            start_input = block.get("input")
            arguments = compact_json(start_input) if start_input else ""
            return accumulator.tool_call(
                key, id=block.get("id"), name=block.get("name"), arguments=arguments
            )
        self._custom[key] = (dict(block), [])
        return []

    def _block_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        key = f"block-{payload.get('index', 0)}"
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        accumulator = self._accumulator
        if key in self._custom:
            if kind == "input_json_delta":
                self._custom[key][1].append(delta.get("partial_json") or "")
            return []
        if kind == "text_delta":
            return accumulator.text(key, delta.get("text") or "")
        if kind == "thinking_delta":
            return accumulator.reasoning(key, delta.get("thinking") or "")
        if kind == "signature_delta":
            self._signature(key, str(delta.get("signature") or ""))
            return []
        if kind == "input_json_delta":
            return accumulator.tool_call(key, arguments=delta.get("partial_json") or "")
        return []  # citations_delta and future delta types

    def _block_stop(self, payload: dict[str, Any]) -> list[ModelEvent]:
        key = f"block-{payload.get('index', 0)}"
        if key in self._custom:
            block, chunks = self._custom.pop(key)
            if chunks:
                block["input"] = _json_or_text("".join(chunks))
            kind = f"anthropic.{block.get('type', 'block')}"
            return self._accumulator.complete_part(key, CustomPart(kind, block))
        return self._accumulator.commit(key)

    def _message_delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        delta = payload.get("delta") or {}
        if delta.get("stop_reason"):
            self._stop_reason = str(delta["stop_reason"])
        self._merge_usage(payload.get("usage"))
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

    def _merge_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for name, value in usage.items():
            if isinstance(value, int):
                self._usage[name] = value
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
            )
        reason = _STOP_REASONS.get(self._stop_reason or "end_turn", FinishReason.OTHER)
        metadata = {PROVIDER_FINISH_KEY: self._stop_reason} if self._stop_reason else {}
        return self._accumulator.result(
            reason, model=self._model, response_id=self._response_id, metadata=metadata
        )

    def cancel(self) -> list[ModelEvent]:
        """A cancelled result keeping the text so far."""
        return self._accumulator.cancelled(model=self._model, response_id=self._response_id)


def _json_or_text(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
