"""``GeminiModel``: the Gemini API's ``streamGenerateContent?alt=sse``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from ..core._errors import InvalidInputError, ProviderError, ProviderErrorKind
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
from ..model._accumulator import StreamAccumulator, _new_call_id
from ..model._protocol import ModelEvent, TurnRequest
from ..model._session_config import (
    ExplicitCache,
    PromptCacheMode,
    PromptCacheRequest,
    SessionConfig,
)
from ._classify import stream_error
from ._config import (
    DEFAULT_TIMEOUT,
    CallDeadline,
    Secret,
    check_base_url,
    is_own_host,
    resolve_api_key,
)
from ._render import call_wire_id, reminder, tool_output_text, unsupported_part
from ._retry import RetryPolicy
from ._session import HttpSession
from ._sse import ServerSentEvent, parse_json_data
from ._transport import PROVIDER_FINISH_KEY, Connection, Endpoint, StreamTranslator, compact_json
from ._wire import (
    get_bool,
    get_index,
    get_list,
    get_mapping,
    get_str,
    require_mapping,
    usage_count,
)

__all__ = [
    "GEMINI_BASE_URL",
    "GENERATED_ID_KEY",
    "THOUGHT_SIGNATURE_KEY",
    "GeminiModel",
    "GeminiSession",
    "GeminiStreamTranslator",
]

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
_P = "Gemini"
THOUGHT_SIGNATURE_KEY = "gemini.thought_signature"
"""Part metadata: the ``thoughtSignature`` Gemini wants back with the part."""
GENERATED_ID_KEY = "gemini.generated_id"
"""ToolCallPart metadata: the call id was made by agentloop, so it is not sent back."""

_FINISH_REASONS = {
    "STOP": FinishReason.COMPLETED,
    "MAX_TOKENS": FinishReason.MAX_TOKENS,
    "SAFETY": FinishReason.BLOCKED,
    "RECITATION": FinishReason.BLOCKED,
    "BLOCKLIST": FinishReason.BLOCKED,
    "PROHIBITED_CONTENT": FinishReason.BLOCKED,
    "SPII": FinishReason.BLOCKED,
    "IMAGE_SAFETY": FinishReason.BLOCKED,
    "MALFORMED_FUNCTION_CALL": FinishReason.ERROR,
}


class GeminiModel:
    """A Gemini model (``POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse``).

    ``api_key`` defaults to ``GEMINI_API_KEY``, then ``GOOGLE_API_KEY``, read
    only when ``base_url`` is Google's own (or ``use_env_key=True``); it goes
    in the ``x-goog-api-key`` header, never in the URL. ``deadline`` bounds
    the whole call.
    ``thinking_budget`` sets ``thinkingConfig.thinkingBudget`` and asks for
    thought summaries. ``tool_choice`` is ``"auto"``, ``"none"``,
    ``"required"`` (mode ``ANY``) or a tool name. Tool schemas are sent as
    ``parametersJsonSchema`` (full JSON Schema).
    """

    provider_name = "gemini"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | Secret | None = None,
        base_url: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        thinking_budget: int | None = None,
        tool_choice: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        new_call_id: Callable[[], str] | None = None,
        use_env_key: bool | None = None,
        deadline: CallDeadline | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInputError("GeminiModel: model must be a non-empty string")
        if any(
            character in "?#/%" or not character.isprintable() or character.isspace()
            for character in model.removeprefix("models/")
        ):
            raise InvalidInputError(
                f"GeminiModel: model {model!r} cannot go in the request URL: it must not "
                "contain '/', '?', '#', '%', spaces or control characters"
            )
        self.model_name = model.removeprefix("models/")
        self.base_url = check_base_url(
            GEMINI_BASE_URL if base_url is None else base_url, "GeminiModel"
        )
        own_host = is_own_host(self.base_url, GEMINI_BASE_URL)
        key = resolve_api_key(
            api_key,
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            owner="GeminiModel",
            required=own_host,
            use_env=own_host if use_env_key is None else use_env_key,
        )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.thinking_budget = thinking_budget
        self.tool_choice = tool_choice
        self.extra_body = dict(extra_body or {})
        self._connection = Connection.of(
            headers=headers,
            timeout=timeout,
            retry=retry,
            http_client=http_client,
            api_key=key,
            deadline=deadline,
        )
        self._new_call_id = new_call_id or _new_call_id

    def __repr__(self) -> str:
        key = "set" if self._connection.api_key is not None else "none"
        return f"GeminiModel(model={self.model_name!r}, base_url={self.base_url!r}, api_key={key})"

    async def start_session(self, config: SessionConfig) -> GeminiSession:
        """Open a session; sessions are cheap and hold no connection."""
        return GeminiSession(self, config)

    def stream_translator(self) -> StreamTranslator:
        """A new translator for one turn's stream."""
        return GeminiStreamTranslator(new_call_id=self._new_call_id)

    def endpoint(self) -> Endpoint:
        """The URL, headers, timeout and retry policy requests go out with."""
        api_key = self._connection.api_key
        return self._connection.endpoint(
            "Gemini",
            f"{self.base_url}/v1beta/models/{self.model_name}:streamGenerateContent?alt=sse",
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
            auth_headers={} if api_key is None else {"x-goog-api-key": api_key.reveal()},
            provider_name=self.provider_name,
            model=self.model_name,
        )

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (raises ``ProviderError`` if it can't be sent)."""
        _check_cache(request.cache)
        system, contents = _render(request.transcript)
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": system}
        if request.available_tools:
            declarations = [
                {
                    "name": spec.name,
                    "description": spec.description,
                    "parametersJsonSchema": spec.input_schema,
                }
                for spec in request.available_tools
            ]
            body["tools"] = [{"functionDeclarations": declarations}]
            if self.tool_choice is not None:
                body["toolConfig"] = {"functionCallingConfig": _tool_choice(self.tool_choice)}
        generation: dict[str, Any] = {}
        if self.max_tokens is not None:
            generation["maxOutputTokens"] = self.max_tokens
        if self.temperature is not None:
            generation["temperature"] = self.temperature
        if self.thinking_budget is not None:
            generation["thinkingConfig"] = {
                "thinkingBudget": self.thinking_budget,
                "includeThoughts": True,
            }
        if generation:
            body["generationConfig"] = generation
        body.update(self.extra_body)
        return body


def _tool_choice(choice: str) -> dict[str, Any]:
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY", "any": "ANY"}
    if choice in modes:
        return {"mode": modes[choice]}
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


def _check_cache(cache: PromptCacheRequest | None) -> None:
    if cache is None or not cache.is_enabled:
        return
    if isinstance(cache.strategy, ExplicitCache) and cache.mode is PromptCacheMode.REQUIRED:
        raise ProviderError(
            "Gemini: cannot honour a required explicit prompt cache: streamGenerateContent "
            "caches implicitly and takes no breakpoints; use PromptCacheRequest.automatic()",
            error_type="cache_unsupported",
        )


def _render(transcript: Sequence[Item]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    calls: dict[str, ToolCallPart] = {}

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for index, item in enumerate(transcript):
        kind = item.kind
        if kind in (ItemKind.SYSTEM, ItemKind.DEVELOPER, ItemKind.CONTEXT):
            system.extend({"text": _plain(item, index, part)} for part in item.parts)
        elif kind is ItemKind.NOTIFICATION:
            text = "\n".join(_plain(item, index, part) for part in item.parts)
            add("user", [{"text": reminder(text)}])
        elif kind is ItemKind.USER:
            add("user", [p for part in item.parts if (p := _user_part(item, index, part))])
        elif kind is ItemKind.ASSISTANT:
            for call in item.tool_calls():
                calls[call.id] = call
            add("model", [p for part in item.parts if (p := _model_part(item, index, part))])
        else:
            add("user", [_function_response(item, index, part, calls) for part in item.parts])
    return system, contents


def _plain(item: Item, index: int, part: Any) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, StructuredPart):
        return tool_output_text(part.value)
    raise unsupported_part("Gemini", item, index, part)


def _signed(part: Any, value: dict[str, Any]) -> dict[str, Any]:
    signature = part.metadata.get(THOUGHT_SIGNATURE_KEY)
    if isinstance(signature, str):
        value["thoughtSignature"] = signature
    return value


def _user_part(item: Item, index: int, part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart | StructuredPart):
        text = _plain(item, index, part)
        return {"text": text} if text else None
    if isinstance(part, ReasoningPart):
        return None
    if isinstance(part, MediaPart | FilePart) and part.mime_type:
        if part.data:
            return {"inlineData": {"mimeType": part.mime_type, "data": part.data}}
        if part.uri:
            return {"fileData": {"mimeType": part.mime_type, "fileUri": part.uri}}
    raise unsupported_part("Gemini", item, index, part)


def _model_part(item: Item, index: int, part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        if not part.text and THOUGHT_SIGNATURE_KEY not in part.metadata:
            return None
        return _signed(part, {"text": part.text})
    if isinstance(part, StructuredPart):
        return {"text": compact_json(part.value)}
    if isinstance(part, ReasoningPart):
        if THOUGHT_SIGNATURE_KEY not in part.metadata:
            return None  # thought summaries need not go back; signed ones must
        return _signed(part, {"text": part.text, "thought": True})
    if isinstance(part, ToolCallPart):
        call: dict[str, Any] = {
            "name": part.name,
            "args": part.input if isinstance(part.input, dict) else {},
        }
        if not part.metadata.get(GENERATED_ID_KEY):
            call["id"] = call_wire_id(part)
        return _signed(part, {"functionCall": call})
    if isinstance(part, CustomPart) and part.kind.startswith("gemini.") and part.value:
        return dict(part.value)
    raise unsupported_part("Gemini", item, index, part)


def _function_response(
    item: Item, index: int, part: Any, calls: dict[str, ToolCallPart]
) -> dict[str, Any]:
    if not isinstance(part, ToolResultPart):
        raise unsupported_part("Gemini", item, index, part)
    call = calls.get(part.call_id)
    if call is None:
        raise ProviderError(
            f"Gemini: cannot send transcript item {index}: the result for call "
            f"{part.call_id!r} has no earlier tool call, and Gemini needs the function name"
        )
    output = part.output
    value = output if isinstance(output, dict | str) else tool_output_text(output)
    response: dict[str, Any] = {
        "name": call.name,
        "response": {"error" if part.is_error else "output": value},
    }
    if not call.metadata.get(GENERATED_ID_KEY):
        response["id"] = call_wire_id(call)
    return {"functionResponse": response}


# -- stream -> events ----------------------------------------------------------------------


class GeminiSession(HttpSession[GeminiModel]):
    """One conversation with a :class:`GeminiModel`."""


class GeminiStreamTranslator:
    """Turns ``GenerateContentResponse`` chunks into model events (candidate 0 only).

    Gemini sends no end-of-stream marker: the stream is complete when the body
    ended after a chunk with a ``finishReason`` (or a prompt block).
    """

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self._new_call_id = new_call_id or _new_call_id
        self._accumulator = StreamAccumulator(provider="Gemini")
        self._finish: str | None = None
        self._blocked: str | None = None
        self._model: str | None = None
        self._response_id: str | None = None
        self._segment = 0
        self._last_kind: str | None = None
        self._calls = 0

    @property
    def done(self) -> bool:
        """Always ``False``: Gemini ends a stream by closing the body."""
        return False

    def feed(self, event: ServerSentEvent) -> list[ModelEvent]:
        """The events for one SSE record."""
        payload = parse_json_data(event, "Gemini")
        if isinstance(payload, list) and payload:
            payload = payload[0]
        chunk = require_mapping(payload, "a stream chunk", _P)
        if chunk.get("error") is not None:
            raise stream_error("Gemini", chunk)
        self._model = get_str(chunk, "modelVersion", "chunk", _P) or self._model
        self._response_id = get_str(chunk, "responseId", "chunk", _P) or self._response_id
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._accumulator.usage = _usage(require_mapping(usage, "chunk.usageMetadata", _P))
        feedback = get_mapping(chunk, "promptFeedback", "chunk", _P)
        blocked = get_str(feedback, "blockReason", "chunk.promptFeedback", _P)
        if blocked:
            self._blocked = blocked
        events: list[ModelEvent] = []
        for position, candidate in enumerate(get_list(chunk, "candidates", "chunk", _P)):
            where = f"chunk.candidates[{position}]"
            candidate = require_mapping(candidate, where, _P)
            if get_index(candidate, "index", where, _P) != 0:
                continue
            content = get_mapping(candidate, "content", where, _P)
            for index, part in enumerate(get_list(content, "parts", f"{where}.content", _P)):
                part_where = f"{where}.content.parts[{index}]"
                events.extend(self._part(require_mapping(part, part_where, _P), part_where))
            finish = get_str(candidate, "finishReason", where, _P)
            if finish:
                self._finish = finish
        return events

    def _key(self, kind: str) -> str:
        if self._last_kind != kind:
            self._segment += 1
            self._last_kind = kind
        return f"{kind}-{self._segment}"

    def _part(self, part: dict[str, Any], where: str) -> list[ModelEvent]:
        accumulator = self._accumulator
        signature = get_str(part, "thoughtSignature", where, _P)
        events: list[ModelEvent] = []
        previous = f"{self._last_kind}-{self._segment}"
        if "functionCall" in part:
            call_where = f"{where}.functionCall"
            call = get_mapping(part, "functionCall", where, _P)
            key = f"call-{self._calls}"
            self._calls += 1
            self._last_kind = "call"
            events.extend(accumulator.commit(previous))
            metadata: dict[str, Any] = {}
            call_id = get_str(call, "id", call_where, _P)
            if not call_id:
                call_id = self._new_call_id()
                metadata[GENERATED_ID_KEY] = True
            if signature:
                metadata[THOUGHT_SIGNATURE_KEY] = signature
            events.extend(
                accumulator.tool_call(
                    key,
                    id=call_id,
                    name=get_str(call, "name", call_where, _P),
                    arguments=compact_json(get_mapping(call, "args", call_where, _P)),
                )
            )
            if metadata:
                accumulator.update_metadata(key, metadata)
            return events + accumulator.commit(key)
        if "text" in part:
            thought = get_bool(part, "thought", where, _P)
            text = get_str(part, "text", where, _P) or ""
            key = self._key("thought" if thought else "text")
            if key != previous:
                events.extend(accumulator.commit(previous))
            if thought:
                events.extend(accumulator.reasoning(key, text))
            else:
                events.extend(accumulator.text(key, text))
            if signature:
                events.extend(
                    accumulator.begin(key, PartKind.REASONING if thought else PartKind.TEXT)
                )
                accumulator.update_metadata(key, {THOUGHT_SIGNATURE_KEY: signature})
            return events
        self._last_kind = "custom"
        events.extend(accumulator.commit(previous))
        name = next(iter(part), "part")
        key = f"custom-{self._calls}-{self._segment}"
        self._segment += 1
        return events + accumulator.complete_part(key, CustomPart(f"gemini.{name}", dict(part)))

    def finish(self) -> list[ModelEvent]:
        """The closing events; a stream without a ``finishReason`` is a ``ProviderError``."""
        if self._blocked is not None and self._finish is None:
            metadata = {PROVIDER_FINISH_KEY: self._blocked}
            return self._accumulator.result(
                FinishReason.BLOCKED,
                model=self._model,
                response_id=self._response_id,
                metadata=metadata,
            )
        if self._finish is None:
            raise ProviderError(
                "Gemini: the stream ended before a chunk with a finishReason (the connection "
                "closed mid-response); the turn is incomplete",
                error_type="incomplete_stream",
                kind=ProviderErrorKind.RETRYABLE,
            )
        reason = _FINISH_REASONS.get(self._finish, FinishReason.OTHER)
        if reason is FinishReason.COMPLETED and self._accumulator.has_tool_calls:
            reason = FinishReason.TOOL_CALL
        return self._accumulator.result(
            reason,
            model=self._model,
            response_id=self._response_id,
            metadata={PROVIDER_FINISH_KEY: self._finish},
        )

    def cancel(self) -> list[ModelEvent]:
        """A cancelled result keeping the text so far."""
        return self._accumulator.cancelled(model=self._model, response_id=self._response_id)


def _usage(usage: dict[str, Any]) -> Usage:
    thoughts = usage_count(usage, "thoughtsTokenCount", _P)
    return Usage(
        input_tokens=usage_count(usage, "promptTokenCount", _P)
        + usage_count(usage, "toolUsePromptTokenCount", _P),
        output_tokens=usage_count(usage, "candidatesTokenCount", _P) + thoughts,
        reasoning_tokens=thoughts,
        cache_read_tokens=usage_count(usage, "cachedContentTokenCount", _P),
    )
