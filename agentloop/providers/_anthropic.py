"""``AnthropicModel``: the Messages API with streaming, thinking and prompt caching.

Rendering is in ``_anthropic_render``, cache breakpoints in
``_anthropic_cache`` and stream translation in ``_anthropic_stream``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ..core._errors import InvalidInputError
from ..model._protocol import TurnRequest
from ..model._session_config import SessionConfig
from ._anthropic_cache import apply_cache
from ._anthropic_render import REDACTED_DATA_KEY, SIGNATURE_KEY, render_transcript
from ._anthropic_stream import AnthropicStreamTranslator
from ._config import (
    DEFAULT_TIMEOUT,
    CallDeadline,
    Secret,
    check_base_url,
    is_own_host,
    resolve_api_key,
)
from ._retry import RetryPolicy
from ._session import HttpSession
from ._transport import Connection, Endpoint, StreamTranslator

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


class AnthropicModel:
    """A Claude model behind the Messages API (``POST {base_url}/v1/messages``).

    ``api_key`` defaults to ``ANTHROPIC_API_KEY``, read only when ``base_url``
    is Anthropic's own (or ``use_env_key=True``); it is required there and
    optional for another ``base_url`` (a proxy), which never receives the
    environment's key unless asked. ``deadline`` bounds the whole call.
    ``thinking_budget`` turns on
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
        use_env_key: bool | None = None,
        deadline: CallDeadline | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInputError("AnthropicModel: model must be a non-empty string")
        if thinking_budget is not None and thinking_budget >= max_tokens:
            raise InvalidInputError(
                f"AnthropicModel: max_tokens ({max_tokens}) must exceed thinking_budget "
                f"({thinking_budget}); raise max_tokens"
            )
        self.model_name = model
        self.base_url = check_base_url(
            ANTHROPIC_BASE_URL if base_url is None else base_url, "AnthropicModel"
        )
        own_host = is_own_host(self.base_url, ANTHROPIC_BASE_URL)
        key = resolve_api_key(
            api_key,
            ("ANTHROPIC_API_KEY",),
            owner="AnthropicModel",
            required=own_host,
            use_env=own_host if use_env_key is None else use_env_key,
        )
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.tool_choice = tool_choice
        self.temperature = temperature
        self.betas = tuple(betas)
        self.extra_body = dict(extra_body or {})
        self._connection = Connection.of(
            headers=headers,
            timeout=timeout,
            retry=retry,
            http_client=http_client,
            api_key=key,
            deadline=deadline,
        )

    def __repr__(self) -> str:
        key = "set" if self._connection.api_key is not None else "none"
        return (
            f"AnthropicModel(model={self.model_name!r}, base_url={self.base_url!r}, api_key={key})"
        )

    async def start_session(self, config: SessionConfig) -> AnthropicSession:
        """Open a session; sessions are cheap and hold no connection."""
        return AnthropicSession(self, config)

    def stream_translator(self) -> StreamTranslator:
        """A new translator for one turn's stream."""
        return AnthropicStreamTranslator()

    def endpoint(self) -> Endpoint:
        """The URL, headers, timeout and retry policy requests go out with."""
        auth: dict[str, str] = {}
        if self._connection.api_key is not None:
            auth["x-api-key"] = self._connection.api_key.reveal()
        if self.betas:
            auth["anthropic-beta"] = ",".join(self.betas)
        return self._connection.endpoint(
            "Anthropic",
            f"{self.base_url}/v1/messages",
            headers={
                "Content-Type": "application/json",
                "Accept": "text/event-stream",
                "anthropic-version": ANTHROPIC_VERSION,
            },
            auth_headers=auth,
            provider_name=self.provider_name,
            model=self.model_name,
        )

    def request_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (raises ``ProviderError`` if it can't be sent)."""
        rendered = render_transcript(request.transcript)
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


class AnthropicSession(HttpSession[AnthropicModel]):
    """One conversation with an :class:`AnthropicModel`."""
