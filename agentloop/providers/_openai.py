"""``OpenAIChatModel``: the Chat Completions API (and every server that copies it).

Streams with ``stream_options.include_usage`` (or, with ``stream=False``, reads
one ``chat.completion``); assembles tool-call fragments by index (parallel
calls); reads ``reasoning_content`` / ``reasoning`` where a server sends it.
Works with vLLM, Ollama, llama.cpp, LM Studio, OpenRouter... through
``base_url``. Request rendering lives in ``_openai_render``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from ..core._errors import InvalidInputError, ProviderError, ProviderErrorKind
from ..core._items import FinishReason, PartKind, Usage
from ..model._accumulator import StreamAccumulator
from ..model._protocol import ModelEvent, TurnRequest
from ..model._session_config import SessionConfig
from ._classify import stream_error
from ._config import (
    DEFAULT_TIMEOUT,
    CallDeadline,
    Secret,
    check_base_url,
    is_own_host,
    resolve_api_key,
)
from ._openai_render import (
    GOOGLE_SIGNATURE_KEY,
    REASONING_ENCRYPTED_KEY,
    REASONING_FORMAT_KEY,
    REASONING_SIGNATURE_KEY,
    cache_fields,
    check_tool_choice,
    merge_same_role,
    render_messages,
    tool_choice_field,
    tools_field,
)
from ._retry import RetryPolicy
from ._session import HttpSession
from ._sse import ServerSentEvent, parse_json_data
from ._transport import PROVIDER_FINISH_KEY, Connection, Endpoint, StreamTranslator, compact_json
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

__all__ = [
    "OPENAI_BASE_URL",
    "OpenAIChatModel",
    "OpenAIChatSession",
    "OpenAICompletionTranslator",
    "OpenAIStreamTranslator",
]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_P = "OpenAI"

_FINISH_REASONS = {
    "stop": FinishReason.COMPLETED,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "length": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.BLOCKED,
    "cancelled": FinishReason.CANCELLED,
}


class OpenAIChatModel:
    """A model behind the Chat Completions API (``POST {base_url}/chat/completions``).

    ``api_key`` defaults to ``OPENAI_API_KEY``, read only when ``base_url`` is
    OpenAI's own (``https://api.openai.com``): the environment's key is never
    sent to another server unless ``use_env_key=True`` asks for it
    (``use_env_key=False`` never reads it). A key is required for OpenAI's own
    host and optional for any other (local servers rarely check it).
    ``base_url`` must be an absolute ``http(s)://`` URL (checked here).
    ``deadline`` bounds the whole call (:class:`~agentloop.providers.CallDeadline`).
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or a tool name,
    and is sent only when the request has tools; it is a plain attribute, so a
    host may change it between turns. ``stream=False`` asks for one JSON
    ``chat.completion`` instead of SSE (the same events come out, all at
    once). ``merge_same_role=True`` merges consecutive messages of one role,
    for servers whose chat template demands strict alternation.
    ``extra_body`` is merged into every request body last (its keys win).
    Give ``http_client`` to pool connections across turns (you close it);
    otherwise each turn uses its own. ``developer_role`` is the role developer
    items are sent with (``"system"`` by default, which every compatible
    server accepts).
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
        stream: bool = True,
        merge_same_role: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        developer_role: str = "system",
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        new_call_id: Callable[[], str] | None = None,
        use_env_key: bool | None = None,
        deadline: CallDeadline | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInputError("OpenAIChatModel: model must be a non-empty string")
        self.model_name = model
        self.base_url = check_base_url(
            OPENAI_BASE_URL if base_url is None else base_url, "OpenAIChatModel"
        )
        own_host = is_own_host(self.base_url, OPENAI_BASE_URL)
        key = resolve_api_key(
            api_key,
            ("OPENAI_API_KEY",),
            owner="OpenAIChatModel",
            required=own_host,
            use_env=own_host if use_env_key is None else use_env_key,
        )
        self.tool_choice = check_tool_choice(tool_choice)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.parallel_tool_calls = parallel_tool_calls
        self.stream = stream
        self.merge_same_role = merge_same_role
        self.extra_body = dict(extra_body or {})
        self.developer_role = developer_role
        self._connection = Connection.of(
            headers=headers,
            timeout=timeout,
            retry=retry,
            http_client=http_client,
            api_key=key,
            deadline=deadline,
        )
        self._new_call_id = new_call_id

    def __repr__(self) -> str:
        key = "set" if self._connection.api_key is not None else "none"
        return (
            f"OpenAIChatModel(model={self.model_name!r}, base_url={self.base_url!r}, api_key={key})"
        )

    async def start_session(self, config: SessionConfig) -> OpenAIChatSession:
        """Open a session; sessions are cheap and hold no connection."""
        return OpenAIChatSession(self, config)

    def endpoint(self) -> Endpoint:
        """The URL, headers, timeout and retry policy requests go out with."""
        api_key = self._connection.api_key
        auth = {} if api_key is None else {"Authorization": f"Bearer {api_key.reveal()}"}
        return self._connection.endpoint(
            "OpenAI",
            f"{self.base_url}/chat/completions",
            headers={
                "Content-Type": "application/json",
                "Accept": "text/event-stream" if self.stream else "application/json",
            },
            auth_headers=auth,
            streaming=self.stream,
            provider_name=self.provider_name,
            model=self.model_name,
        )

    def stream_translator(self) -> StreamTranslator:
        """A new translator for one turn's response (SSE chunks or one completion)."""
        if self.stream:
            return OpenAIStreamTranslator(new_call_id=self._new_call_id)
        return OpenAICompletionTranslator(new_call_id=self._new_call_id)

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (raises ``ProviderError`` if it can't be sent)."""
        messages = render_messages(request.transcript, developer_role=self.developer_role)
        if self.merge_same_role:
            messages = merge_same_role(messages)
        body: dict[str, Any] = {"model": self.model_name, "messages": messages}
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        else:
            body["stream"] = False
        if request.available_tools:
            body["tools"] = tools_field(request.available_tools)
            tool_choice = check_tool_choice(self.tool_choice)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice_field(tool_choice, request.available_tools)
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(cache_fields(request.cache))
        body.update(self.extra_body)
        return body


# -- response -> events ----------------------------------------------------------------------


class OpenAIChatSession(HttpSession[OpenAIChatModel]):
    """One conversation with an :class:`OpenAIChatModel`."""


class OpenAIStreamTranslator:
    """Turns ``chat.completion.chunk`` events into model events (choice 0 only)."""

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self._accumulator = StreamAccumulator(provider="OpenAI", new_call_id=new_call_id)
        self._done = False
        self._finish: str | None = None
        self._model: str | None = None
        self._response_id: str | None = None
        self._encrypted: list[dict[str, Any]] = []

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
        return self._chunk(chunk)

    def _chunk(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        if chunk.get("error") is not None:
            raise stream_error("OpenAI", chunk)
        self._model = get_str(chunk, "model", "chunk", _P) or self._model
        self._response_id = get_str(chunk, "id", "chunk", _P) or self._response_id
        usage = chunk.get("usage")
        if usage is not None:
            self._accumulator.usage = _usage(require_mapping(usage, "chunk.usage", _P))
        events: list[ModelEvent] = []
        for position, choice in enumerate(get_list(chunk, "choices", "chunk", _P)):
            where = f"chunk.choices[{position}]"
            choice = require_mapping(choice, where, _P)
            if get_index(choice, "index", where, _P) == 0:
                events.extend(self._choice(choice, where))
        return events

    def _choice(self, choice: dict[str, Any], where: str) -> list[ModelEvent]:
        accumulator = self._accumulator
        events: list[ModelEvent] = []
        delta = get_mapping(choice, "delta", where, _P)
        where = f"{where}.delta"
        reasoning = get_str(delta, "reasoning_content", where, _P) or get_str(
            delta, "reasoning", where, _P
        )
        if reasoning:
            events.extend(accumulator.reasoning("reasoning", reasoning))
        events.extend(self._reasoning_signatures(delta, where))
        content = get_str(delta, "content", where, _P)
        if content:
            events.extend(accumulator.text("content", content))
        signature = _google_signature(delta, where)
        if signature:
            key = "reasoning" if accumulator.is_open("reasoning") else "content"
            kind = PartKind.REASONING if key == "reasoning" else PartKind.TEXT
            events.extend(accumulator.begin(key, kind))
            accumulator.update_metadata(key, {GOOGLE_SIGNATURE_KEY: signature})
        for position, call in enumerate(get_list(delta, "tool_calls", where, _P)):
            call_where = f"{where}.tool_calls[{position}]"
            call = require_mapping(call, call_where, _P)
            function = get_mapping(call, "function", call_where, _P)
            key = f"tool-{get_index(call, 'index', call_where, _P, default=position)}"
            events.extend(
                accumulator.tool_call(
                    key,
                    id=get_str(call, "id", call_where, _P),
                    name=get_str(function, "name", f"{call_where}.function", _P),
                    arguments=_arguments(function, f"{call_where}.function"),
                )
            )
            signature = _google_signature(call, call_where)
            if signature:
                accumulator.update_metadata(key, {GOOGLE_SIGNATURE_KEY: signature})
        reason = get_str(choice, "finish_reason", where.removesuffix(".delta"), _P)
        if reason:
            self._finish = reason
            events.extend(accumulator.commit_all())
        return events

    def _reasoning_signatures(self, delta: dict[str, Any], where: str) -> list[ModelEvent]:
        """Keep ``reasoning_details[].signature`` (and ``format``) on the reasoning part,
        and each ``reasoning.encrypted`` detail whole (its ``data``, ``id``, ``format``)."""
        events: list[ModelEvent] = []
        for position, detail in enumerate(get_list(delta, "reasoning_details", where, _P)):
            detail_where = f"{where}.reasoning_details[{position}]"
            detail = require_mapping(detail, detail_where, _P)
            if get_str(detail, "type", detail_where, _P) == "reasoning.encrypted":
                events.extend(self._encrypted_reasoning(detail, detail_where))
                continue
            signature = get_str(detail, "signature", detail_where, _P)
            if not signature:
                continue
            metadata = {REASONING_SIGNATURE_KEY: signature}
            format_ = get_str(detail, "format", detail_where, _P)
            if format_:
                metadata[REASONING_FORMAT_KEY] = format_
            events.extend(self._accumulator.begin("reasoning", PartKind.REASONING))
            self._accumulator.update_metadata("reasoning", metadata)
        return events

    def _encrypted_reasoning(self, detail: dict[str, Any], where: str) -> list[ModelEvent]:
        """A ``reasoning.encrypted`` detail, kept (without its ``index``) to be sent back."""
        if not get_str(detail, "data", where, _P):
            return []
        self._encrypted.append({name: value for name, value in detail.items() if name != "index"})
        events = self._accumulator.begin("reasoning", PartKind.REASONING)
        self._accumulator.update_metadata(
            "reasoning", {REASONING_ENCRYPTED_KEY: list(self._encrypted)}
        )
        return events

    def finish(self) -> list[ModelEvent]:
        """The closing events; a stream without ``[DONE]`` is a ``ProviderError``."""
        if not self._done:
            raise ProviderError(
                "OpenAI: the stream ended before 'data: [DONE]' (the connection closed "
                "mid-response); the turn is incomplete",
                error_type="incomplete_stream",
                kind=ProviderErrorKind.RETRYABLE,
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


class OpenAICompletionTranslator(OpenAIStreamTranslator):
    """Turns one non-streamed ``chat.completion`` into the same events as its stream.

    Each choice's ``message`` is read as one big ``delta`` (tool calls indexed
    by position), so streamed and non-streamed turns end in equal results.
    """

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The events for the whole response body."""
        completion = require_mapping(
            parse_json_data(event, "OpenAI"), "a chat completion", "OpenAI"
        )
        if completion.get("error") is not None:
            raise stream_error("OpenAI", completion)
        choices = [
            _choice_as_delta(
                require_mapping(choice, f"completion.choices[{position}]", _P), position
            )
            for position, choice in enumerate(get_list(completion, "choices", "completion", _P))
        ]
        events = self._chunk({**completion, "choices": choices})
        self._done = True
        return events

    def finish(self) -> list[ModelEvent]:
        """The closing events; an empty body is a ``ProviderError``."""
        if not self._done:
            raise ProviderError(
                "OpenAI: the response ended without a chat completion body",
                error_type="incomplete_stream",
                kind=ProviderErrorKind.RETRYABLE,
            )
        return super().finish()


def _choice_as_delta(value: Any, position: int) -> dict[str, Any]:
    where = f"completion.choices[{position}]"
    choice = require_mapping(value, where, _P)
    message = dict(get_mapping(choice, "message", where, _P))
    calls = get_list(message, "tool_calls", f"{where}.message", _P)
    message["tool_calls"] = [
        {**require_mapping(call, f"{where}.message.tool_calls[{index}]", _P), "index": index}
        for index, call in enumerate(calls)
    ]
    return {
        "index": choice.get("index", 0),
        "delta": message,
        "finish_reason": choice.get("finish_reason"),
    }


def _google_signature(value: dict[str, Any], where: str) -> str | None:
    """``extra_content.google.thought_signature`` of a delta or a tool call, if any."""
    extra = get_mapping(value, "extra_content", where, _P)
    google = get_mapping(extra, "google", f"{where}.extra_content", _P)
    return get_str(google, "thought_signature", f"{where}.extra_content.google", _P)


def _arguments(function: dict[str, Any], where: str) -> str:
    arguments = function.get("arguments")
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        return compact_json(arguments)  # a few servers send the object itself
    raise malformed(_P, f"{where}.arguments", "a string, an object or null", arguments)


def _usage(usage: dict[str, Any]) -> Usage:
    prompt = get_mapping(usage, "prompt_tokens_details", "chunk.usage", _P)
    completion = get_mapping(usage, "completion_tokens_details", "chunk.usage", _P)
    return Usage(
        input_tokens=usage_count(usage, "prompt_tokens", _P),
        output_tokens=usage_count(usage, "completion_tokens", _P),
        reasoning_tokens=usage_count(completion, "reasoning_tokens", _P),
        cache_read_tokens=usage_count(prompt, "cached_tokens", _P),
        cache_write_tokens=usage_count(prompt, "cache_write_tokens", _P),
        cost=usage_cost(usage.get("cost"), _P),
    )
