"""``OpenAIChatModel``: the Chat Completions API (and every server that copies it).

Streams with ``stream_options.include_usage``; assembles tool-call fragments
by index (parallel calls); reads ``reasoning_content`` / ``reasoning`` where a
server sends it. Works with vLLM, Ollama, llama.cpp, LM Studio, OpenRouter...
through ``base_url``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx

from ..core._cancellation import TurnCancellation
from ..core._errors import InvalidInputError, ProviderError
from ..core._items import (
    FilePart,
    FinishReason,
    Item,
    ItemKind,
    MediaPart,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..model._config import (
    ExplicitCache,
    PromptCacheMode,
    PromptCacheRequest,
    PromptCacheRetention,
    SessionConfig,
)
from ..model._protocol import ModelEvent, TurnRequest
from ._accumulator import StreamAccumulator
from ._config import DEFAULT_TIMEOUT, Secret, resolve_api_key
from ._render import (
    data_uri,
    item_text,
    raw_arguments,
    reminder,
    text_parts,
    tool_output_text,
    unsupported_part,
)
from ._retry import RetryPolicy
from ._sse import ServerSentEvent, parse_json_data
from ._transport import Endpoint, require_mapping, stream_error, stream_turn

__all__ = ["OPENAI_BASE_URL", "OpenAIChatModel", "OpenAIChatSession"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
PROVIDER_FINISH_KEY = "agentloop.provider_finish_reason"

_FINISH_REASONS = {
    "stop": FinishReason.COMPLETED,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "length": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.BLOCKED,
    "cancelled": FinishReason.CANCELLED,
}
_TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


class OpenAIChatModel:
    """A model behind the Chat Completions API (``POST {base_url}/chat/completions``).

    ``api_key`` defaults to ``OPENAI_API_KEY``; it is required for the default
    ``base_url`` and optional for any other (local servers rarely check it).
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or a tool name,
    and is sent only when the request has tools. ``extra_body`` is merged into
    every request body last (its keys win). Give ``http_client`` to pool
    connections across turns (you close it); otherwise each turn uses its own.
    ``developer_role`` is the role developer items are sent with (``"system"``
    by default, which every compatible server accepts).
    """

    provider_name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        tool_choice: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        parallel_tool_calls: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        developer_role: str = "system",
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        new_call_id: Callable[[], str] | None = None,
    ) -> None:
        if not model:
            raise InvalidInputError("OpenAIChatModel: model must be a non-empty string")
        self.model_name = model
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self._api_key = resolve_api_key(
            api_key,
            ("OPENAI_API_KEY",),
            owner="OpenAIChatModel",
            required=self.base_url == OPENAI_BASE_URL,
        )
        self.tool_choice = tool_choice
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.parallel_tool_calls = parallel_tool_calls
        self.extra_body = dict(extra_body or {})
        self.developer_role = developer_role
        self._headers = dict(headers or {})
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._retry = retry or RetryPolicy()
        self._http_client = http_client
        self._new_call_id = new_call_id

    def __repr__(self) -> str:
        key = "set" if self._api_key is not None else "none"
        return (
            f"OpenAIChatModel(model={self.model_name!r}, base_url={self.base_url!r}, api_key={key})"
        )

    async def start_session(self, config: SessionConfig) -> OpenAIChatSession:
        """Open a session; sessions are cheap and hold no connection."""
        return OpenAIChatSession(self, config)

    def endpoint(self) -> Endpoint:
        """The URL, headers, timeout and retry policy requests go out with."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **self._headers,
        }
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.reveal()}"
        return Endpoint(
            provider="OpenAI",
            url=f"{self.base_url}/chat/completions",
            headers=headers,
            timeout=self._timeout,
            retry=self._retry,
            client=self._http_client,
            secrets=(self._api_key,),
        )

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (raises ``ProviderError`` if it can't be sent)."""
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": self._messages(request.transcript),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.available_tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": spec.input_schema,
                    },
                }
                for spec in request.available_tools
            ]
            if self.tool_choice is not None:
                body["tool_choice"] = _tool_choice(self.tool_choice)
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(_cache_fields(request.cache))
        body.update(self.extra_body)
        return body

    # -- transcript -> messages ------------------------------------------------------------

    def _messages(self, transcript: Any) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for index, item in enumerate(transcript):
            messages.extend(self._render_item(index, item))
        return messages

    def _render_item(self, index: int, item: Item) -> list[dict[str, Any]]:
        kind = item.kind
        if kind in (ItemKind.SYSTEM, ItemKind.CONTEXT):
            return [{"role": "system", "content": item_text(item, "OpenAI", index=index)}]
        if kind is ItemKind.DEVELOPER:
            text = item_text(item, "OpenAI", index=index)
            return [{"role": self.developer_role, "content": text}]
        if kind is ItemKind.NOTIFICATION:
            return [{"role": "user", "content": reminder(item_text(item, "OpenAI", index=index))}]
        if kind is ItemKind.USER:
            return [{"role": "user", "content": _user_content(index, item)}]
        if kind is ItemKind.ASSISTANT:
            return _assistant_message(index, item)
        return _tool_messages(index, item)


def _tool_choice(choice: str) -> Any:
    if choice in _TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def _cache_fields(cache: PromptCacheRequest | None) -> dict[str, Any]:
    if cache is None or not cache.is_enabled:
        return {}
    if isinstance(cache.strategy, ExplicitCache) and cache.mode is PromptCacheMode.REQUIRED:
        raise ProviderError(
            "OpenAI: cannot honour a required explicit prompt cache: Chat Completions caches "
            "prefixes automatically and takes no breakpoints; use PromptCacheRequest.automatic()"
        )
    fields: dict[str, Any] = {}
    if cache.key is not None:
        fields["prompt_cache_key"] = cache.key
    if cache.retention is PromptCacheRetention.EXTENDED:
        fields["prompt_cache_retention"] = "24h"
    return fields


def _user_content(index: int, item: Item) -> Any:
    entries: list[dict[str, Any]] = []
    for part in item.parts:
        if isinstance(part, TextPart):
            entries.append({"type": "text", "text": part.text})
        elif isinstance(part, StructuredPart):
            entries.append({"type": "text", "text": tool_output_text(part.value)})
        elif isinstance(part, MediaPart) and part.mime_type.startswith("image/"):
            url = part.uri or data_uri(part.mime_type, part.data or "")
            entries.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(part, MediaPart) and part.mime_type.startswith("audio/") and part.data:
            audio_format = part.mime_type.split("/", 1)[1]
            entries.append(
                {"type": "input_audio", "input_audio": {"data": part.data, "format": audio_format}}
            )
        elif isinstance(part, FilePart) and part.data:
            mime = part.mime_type or "application/octet-stream"
            file: dict[str, Any] = {"file_data": data_uri(mime, part.data)}
            if part.name:
                file["filename"] = part.name
            entries.append({"type": "file", "file": file})
        elif isinstance(part, ReasoningPart):
            continue
        else:
            raise unsupported_part("OpenAI", item, index, part)
    if len(entries) == 1 and entries[0]["type"] == "text":
        return entries[0]["text"]
    return entries


def _assistant_message(index: int, item: Item) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for part in item.parts:
        if isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": part.id,
                    "type": "function",
                    "function": {"name": part.name, "arguments": raw_arguments(part)},
                }
            )
        elif not isinstance(part, TextPart | StructuredPart | ReasoningPart):
            raise unsupported_part("OpenAI", item, index, part)
    text = "\n".join(text_parts(item.parts))
    if not text and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _tool_messages(index: int, item: Item) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for part in item.parts:
        if not isinstance(part, ToolResultPart):
            raise unsupported_part("OpenAI", item, index, part)
        messages.append(
            {"role": "tool", "tool_call_id": part.call_id, "content": tool_output_text(part.output)}
        )
    return messages


# -- stream -> events ----------------------------------------------------------------------


class OpenAIChatSession:
    """One conversation with an :class:`OpenAIChatModel`."""

    def __init__(self, model: OpenAIChatModel, config: SessionConfig) -> None:
        self.model = model
        self.config = config

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        """Build the request body now; the HTTP request starts when the stream is read."""
        body = self.model.request_body(request)
        translator = OpenAIStreamTranslator(new_call_id=self.model._new_call_id)
        return stream_turn(self.model.endpoint(), body, translator, cancellation)


class OpenAIStreamTranslator:
    """Turns ``chat.completion.chunk`` events into model events (choice 0 only)."""

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self._accumulator = StreamAccumulator(provider="OpenAI", new_call_id=new_call_id)
        self._done = False
        self._finish: str | None = None
        self._model: str | None = None
        self._response_id: str | None = None

    @property
    def done(self) -> bool:
        """Whether ``data: [DONE]`` was seen."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The events for one SSE record."""
        if event.data.strip() == "[DONE]":
            self._done = True
            return []
        if event.event == "error":
            raise stream_error("OpenAI", parse_json_data(event, "OpenAI"))
        chunk = require_mapping(parse_json_data(event, "OpenAI"), "a stream chunk", "OpenAI")
        if chunk.get("error") is not None:
            raise stream_error("OpenAI", chunk)
        self._model = chunk.get("model") or self._model
        self._response_id = chunk.get("id") or self._response_id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._accumulator.usage = _usage(usage)
        events: list[ModelEvent] = []
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                events.extend(self._choice(choice))
        return events

    def _choice(self, choice: dict[str, Any]) -> list[ModelEvent]:
        accumulator = self._accumulator
        events: list[ModelEvent] = []
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str):
            events.extend(accumulator.reasoning("reasoning", reasoning))
        content = delta.get("content")
        if isinstance(content, str):
            events.extend(accumulator.text("content", content))
        for position, call in enumerate(delta.get("tool_calls") or ()):
            function = call.get("function") or {}
            events.extend(
                accumulator.tool_call(
                    f"tool-{call.get('index', position)}",
                    id=call.get("id"),
                    name=function.get("name"),
                    arguments=function.get("arguments") or "",
                )
            )
        reason = choice.get("finish_reason")
        if reason:
            self._finish = str(reason)
            events.extend(accumulator.commit_all())
        return events

    def finish(self) -> list[ModelEvent]:
        """The closing events; a stream without ``[DONE]`` is a ``ProviderError``."""
        if not self._done:
            raise ProviderError(
                "OpenAI: the stream ended before 'data: [DONE]' (the connection closed "
                "mid-response); the turn is incomplete",
                error_type="incomplete_stream",
            )
        reason = _FINISH_REASONS.get(self._finish or "stop", FinishReason.OTHER)
        if reason is FinishReason.COMPLETED and self._accumulator.has_tool_calls:
            reason = FinishReason.TOOL_CALL
        metadata = {PROVIDER_FINISH_KEY: self._finish} if self._finish else {}
        return self._accumulator.result(
            reason, model=self._model, response_id=self._response_id, metadata=metadata
        )

    def cancel(self) -> list[ModelEvent]:
        """A cancelled result keeping the text so far."""
        return self._accumulator.cancelled(model=self._model, response_id=self._response_id)


def _usage(usage: dict[str, Any]) -> Usage:
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    cost = usage.get("cost")
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        reasoning_tokens=int(completion.get("reasoning_tokens") or 0),
        cache_read_tokens=int(prompt.get("cached_tokens") or 0),
        cache_write_tokens=int(prompt.get("cache_write_tokens") or 0),
        cost=float(cost) if isinstance(cost, int | float) else None,
    )
