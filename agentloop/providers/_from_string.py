"""``from_string``: one line from a model name to an adapter."""

from __future__ import annotations

from typing import Any

from ..core._errors import InvalidInputError
from ._anthropic import AnthropicModel
from ._gemini import GeminiModel
from ._openai import OpenAIChatModel
from ._responses import OpenAIResponsesModel

__all__ = ["from_string"]

_FORMS = (
    "'openai:MODEL', 'openai-responses:MODEL', 'anthropic:MODEL', 'gemini:MODEL', "
    "'openai-compatible:BASE_URL#MODEL' (e.g. 'openai-compatible:http://127.0.0.1:8080/v1#qwen') "
    "or 'openai-responses:BASE_URL#MODEL'"
)

Adapter = OpenAIChatModel | OpenAIResponsesModel | AnthropicModel | GeminiModel


def from_string(spec: str, **options: Any) -> Adapter:
    """An adapter from ``"provider:model"``; ``options`` go to its constructor.

    Forms: ``openai:gpt-4o-mini``, ``openai-responses:gpt-5`` (the Responses
    API), ``anthropic:claude-sonnet-4-5``, ``gemini:gemini-2.5-flash``
    (``google:`` works too), ``openai-compatible:http://127.0.0.1:8080/v1#MODEL``
    for any server that speaks Chat Completions and
    ``openai-responses:https://openrouter.ai/api/v1#MODEL`` for one that speaks
    Responses. API keys come from ``options`` or the usual environment variables.
    """
    provider, separator, rest = spec.partition(":")
    if not separator or not rest:
        raise InvalidInputError(f"from_string: cannot read {spec!r}; expected {_FORMS}")
    provider = provider.strip().lower()
    if provider == "openai":
        return OpenAIChatModel(rest, **options)
    if provider == "anthropic":
        return AnthropicModel(rest, **options)
    if provider in ("gemini", "google"):
        return GeminiModel(rest, **options)
    if provider == "openai-responses":
        return _responses(spec, rest, options)
    if provider == "openai-compatible":
        base_url, hash_mark, model = rest.rpartition("#")
        if not hash_mark or not base_url or not model:
            raise InvalidInputError(
                f"from_string: {spec!r} names no model; expected 'openai-compatible:BASE_URL#MODEL'"
            )
        return OpenAIChatModel(model, base_url=base_url, **options)
    raise InvalidInputError(
        f"from_string: unknown provider {provider!r} in {spec!r}; expected {_FORMS}"
    )


def _responses(spec: str, rest: str, options: dict[str, Any]) -> OpenAIResponsesModel:
    """``openai-responses:MODEL`` or ``openai-responses:BASE_URL#MODEL``."""
    if not rest.lower().startswith(("http://", "https://")):
        return OpenAIResponsesModel(rest, **options)
    base_url, hash_mark, model = rest.rpartition("#")
    if not hash_mark or not base_url or not model:
        raise InvalidInputError(
            f"from_string: {spec!r} names no model; expected 'openai-responses:MODEL' or "
            "'openai-responses:BASE_URL#MODEL'"
        )
    return OpenAIResponsesModel(model, base_url=base_url, **options)
