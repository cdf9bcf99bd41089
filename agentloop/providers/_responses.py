"""``OpenAIResponsesModel``: OpenAI's Responses API (``POST {base_url}/responses``), streamed.

Stateless like the other adapters: ``store: false`` by default, the whole transcript
is sent each turn (never ``previous_response_id``), and reasoning travels in the
transcript as encrypted reasoning items (``include: ["reasoning.encrypted_content"]``)
that are sent back. Rendering lives in ``_responses_render`` (tools in
``_responses_tools``), stream translation in ``_responses_stream``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from ..core._errors import InvalidInputError
from ..model._protocol import TurnRequest
from ..model._session_config import SessionConfig
from ._config import (
    DEFAULT_TIMEOUT,
    CallDeadline,
    Secret,
    check_base_url,
    is_own_host,
    resolve_api_key,
)
from ._openai import OPENAI_BASE_URL
from ._responses_render import cache_fields, check_option, render_input
from ._responses_stream import OpenAIResponsesStreamTranslator
from ._responses_tools import check_tool_choice, tool_choice_field, tools_field
from ._retry import RetryPolicy
from ._session import HttpSession
from ._transport import Connection, Endpoint, StreamTranslator

__all__ = [
    "ENCRYPTED_REASONING_INCLUDE",
    "OpenAIResponsesModel",
    "OpenAIResponsesSession",
    "OpenAIResponsesStreamTranslator",
]

ENCRYPTED_REASONING_INCLUDE = "reasoning.encrypted_content"
_OWNER = "OpenAIResponsesModel"
# OpenAI's reasoning models: the o-series and gpt-5 (but gpt-5-chat), codex; after any
# "vendor/" prefix a router puts in front (openai/o3)
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5(?!-chat)|codex)", re.IGNORECASE)


class OpenAIResponsesModel:
    """A model behind OpenAI's Responses API (``POST {base_url}/responses``, streamed).

    Keys and URLs as :class:`~agentloop.providers.OpenAIChatModel`: ``api_key``
    defaults to ``OPENAI_API_KEY``, read only for OpenAI's own ``base_url`` (or
    ``use_env_key=True``), required there and optional elsewhere. ``tool_choice`` is
    ``"auto"``, ``"none"``, ``"required"`` or a tool name (a plain attribute, sent
    only with tools). ``max_tokens`` is sent as ``max_output_tokens``.
    ``reasoning_effort`` / ``reasoning_summary`` make the ``reasoning`` object.
    ``store`` is ``False`` (stateless: nothing kept at OpenAI, reasoning sent back
    encrypted). ``encrypted_reasoning`` asks for ``include:
    ["reasoning.encrypted_content"]``; ``None`` asks for it when ``store`` is off
    and the model reasons (reasoning options set, or an o-series / gpt-5 / codex
    name), since other models refuse it. ``strict_tools=None`` marks each tool
    strict when its schema fits strict mode. ``extra_body`` is merged into every
    body last (its keys win).
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
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        store: bool = False,
        encrypted_reasoning: bool | None = None,
        strict_tools: bool | None = None,
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
            raise InvalidInputError(f"{_OWNER}: model must be a non-empty string")
        self.model_name = model
        self.base_url = check_base_url(OPENAI_BASE_URL if base_url is None else base_url, _OWNER)
        own_host = is_own_host(self.base_url, OPENAI_BASE_URL)
        key = resolve_api_key(
            api_key,
            ("OPENAI_API_KEY",),
            owner=_OWNER,
            required=own_host,
            use_env=own_host if use_env_key is None else use_env_key,
        )
        self.tool_choice = check_tool_choice(_OWNER, tool_choice)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.parallel_tool_calls = parallel_tool_calls
        self.reasoning_effort = check_option(_OWNER, "reasoning_effort", reasoning_effort)
        self.reasoning_summary = check_option(_OWNER, "reasoning_summary", reasoning_summary)
        self.store = store
        self.encrypted_reasoning = encrypted_reasoning
        self.strict_tools = strict_tools
        self.extra_body = dict(extra_body or {})
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
        return f"{_OWNER}(model={self.model_name!r}, base_url={self.base_url!r}, api_key={key})"

    async def start_session(self, config: SessionConfig) -> OpenAIResponsesSession:
        """Open a session; sessions are cheap and hold no connection."""
        return OpenAIResponsesSession(self, config)

    def endpoint(self) -> Endpoint:
        """The URL, headers, timeout and retry policy requests go out with."""
        api_key = self._connection.api_key
        auth = {} if api_key is None else {"Authorization": f"Bearer {api_key.reveal()}"}
        return self._connection.endpoint(
            "OpenAI",
            f"{self.base_url}/responses",
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
            auth_headers=auth,
            provider_name=self.provider_name,
            model=self.model_name,
        )

    def stream_translator(self) -> StreamTranslator:
        """A new translator for one turn's stream."""
        return OpenAIResponsesStreamTranslator(new_call_id=self._new_call_id)

    @property
    def sends_encrypted_reasoning(self) -> bool:
        """Whether requests ask for ``reasoning.encrypted_content`` (see the class doc)."""
        if self.encrypted_reasoning is not None:
            return self.encrypted_reasoning
        if self.store:
            return False
        if self.reasoning_effort is not None or self.reasoning_summary is not None:
            return True
        return bool(_REASONING_MODEL.match(self.model_name.rsplit("/", 1)[-1]))

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (raises ``ProviderError`` if it can't be sent)."""
        rendered = render_input(request.transcript, store=self.store)
        body: dict[str, Any] = {"model": self.model_name}
        if rendered.instructions is not None:
            body["instructions"] = rendered.instructions
        body["input"] = rendered.input
        if request.available_tools:
            body["tools"] = tools_field(request.available_tools, strict=self.strict_tools)
            tool_choice = check_tool_choice(_OWNER, self.tool_choice)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice_field(tool_choice, request.available_tools)
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.max_tokens is not None:
            body["max_output_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        reasoning = {"effort": self.reasoning_effort, "summary": self.reasoning_summary}
        if any(value is not None for value in reasoning.values()):
            body["reasoning"] = {name: value for name, value in reasoning.items() if value}
        body["store"] = self.store
        if self.sends_encrypted_reasoning:
            body["include"] = [ENCRYPTED_REASONING_INCLUDE]
        body.update(cache_fields(request.cache))
        body["stream"] = True
        body.update(self.extra_body)
        return body


class OpenAIResponsesSession(HttpSession[OpenAIResponsesModel]):
    """One conversation with an :class:`OpenAIResponsesModel`."""
