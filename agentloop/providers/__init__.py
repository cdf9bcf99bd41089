"""Model adapters over httpx: OpenAI Chat Completions and Responses, Anthropic, Gemini.

Each adapter implements :class:`~agentloop.ModelAdapter` with streaming,
retries on 408/409/429/5xx and connection errors (never once streaming has
started), a request timeout and an overall deadline per call, cancellation that
closes the HTTP stream, errors classified by :class:`ProviderErrorKind`, and
API keys validated, read from the usual environment variables (only for the
provider's own host) and redacted everywhere (``OpenAIChatModel(stream=False)``
reads whole responses instead)::

    from agentloop.providers import from_string

    model = from_string("anthropic:claude-sonnet-4-5")
    model = from_string("openai-responses:gpt-5")
    model = from_string("openai-compatible:http://127.0.0.1:8080/v1#qwen2.5")
"""

from ..core._errors import ModelProtocolError, ProviderErrorKind
from ._anthropic import AnthropicModel, AnthropicSession, AnthropicStreamTranslator
from ._config import DEFAULT_DEADLINE, DEFAULT_TIMEOUT, CallDeadline, Secret
from ._from_string import from_string
from ._gemini import GeminiModel, GeminiSession, GeminiStreamTranslator
from ._openai import (
    OpenAIChatModel,
    OpenAIChatSession,
    OpenAICompletionTranslator,
    OpenAIStreamTranslator,
)
from ._responses import (
    OpenAIResponsesModel,
    OpenAIResponsesSession,
    OpenAIResponsesStreamTranslator,
)
from ._retry import RetryPolicy
from ._transport import (
    MODEL_KEY,
    PROVIDER_FINISH_KEY,
    PROVIDER_KEY,
    RESPONSE_ID_KEY,
    RESPONSE_MODEL_KEY,
)

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_TIMEOUT",
    "MODEL_KEY",
    "PROVIDER_FINISH_KEY",
    "PROVIDER_KEY",
    "RESPONSE_ID_KEY",
    "RESPONSE_MODEL_KEY",
    "AnthropicModel",
    "AnthropicSession",
    "AnthropicStreamTranslator",
    "CallDeadline",
    "GeminiModel",
    "GeminiSession",
    "GeminiStreamTranslator",
    "ModelProtocolError",
    "OpenAIChatModel",
    "OpenAIChatSession",
    "OpenAICompletionTranslator",
    "OpenAIResponsesModel",
    "OpenAIResponsesSession",
    "OpenAIResponsesStreamTranslator",
    "OpenAIStreamTranslator",
    "ProviderErrorKind",
    "RetryPolicy",
    "Secret",
    "from_string",
]
