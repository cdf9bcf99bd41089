"""Model adapters over httpx: OpenAI-compatible Chat Completions, Anthropic, Gemini.

Each adapter implements :class:`~agentloop.ModelAdapter` with streaming,
retries on 408/409/429/5xx and connection errors (never once streaming has
started), a request timeout, cancellation that closes the HTTP stream, and API
keys read from the usual environment variables and redacted everywhere
(``OpenAIChatModel(stream=False)`` reads whole responses instead)::

    from agentloop.providers import from_string

    model = from_string("anthropic:claude-sonnet-4-5")
    model = from_string("openai-compatible:http://127.0.0.1:8080/v1#qwen2.5")
"""

from ._accumulator import StreamAccumulator, parse_tool_arguments
from ._anthropic import AnthropicModel, AnthropicSession, AnthropicStreamTranslator
from ._config import DEFAULT_TIMEOUT, Secret
from ._from_string import from_string
from ._gemini import GeminiModel, GeminiSession, GeminiStreamTranslator
from ._openai import (
    OpenAIChatModel,
    OpenAIChatSession,
    OpenAICompletionTranslator,
    OpenAIStreamTranslator,
)
from ._retry import RetryPolicy

__all__ = [
    "DEFAULT_TIMEOUT",
    "AnthropicModel",
    "AnthropicSession",
    "AnthropicStreamTranslator",
    "GeminiModel",
    "GeminiSession",
    "GeminiStreamTranslator",
    "OpenAIChatModel",
    "OpenAIChatSession",
    "OpenAICompletionTranslator",
    "OpenAIStreamTranslator",
    "RetryPolicy",
    "Secret",
    "StreamAccumulator",
    "from_string",
    "parse_tool_arguments",
]
