"""The model seam: the adapter protocol, a model call's request and stream, prompt
caching, prices, and the accumulator an adapter builds its answer with.

Ready adapters live in :mod:`agentloop.providers`; a scripted one for tests in
:mod:`agentloop.testing`. The session's configuration (:class:`~agentloop.SessionConfig`,
:class:`~agentloop.LoopLimits`) is exported by :mod:`agentloop` itself.
"""

from ._accumulator import StreamAccumulator, parse_tool_arguments
from ._pricing import DEFAULT_PRICES, ModelPrice, PriceTable
from ._protocol import ModelAdapter, ModelEvent, ModelSession, ModelTurnResult, TurnRequest
from ._session_config import (
    AfterItem,
    AfterPart,
    AfterTools,
    AutomaticCache,
    CacheBreakpoint,
    ExplicitCache,
    PromptCacheMode,
    PromptCacheRequest,
    PromptCacheRetention,
    PromptCacheStrategy,
)

__all__ = [
    "DEFAULT_PRICES",
    "AfterItem",
    "AfterPart",
    "AfterTools",
    "AutomaticCache",
    "CacheBreakpoint",
    "ExplicitCache",
    "ModelAdapter",
    "ModelEvent",
    "ModelPrice",
    "ModelSession",
    "ModelTurnResult",
    "PriceTable",
    "PromptCacheMode",
    "PromptCacheRequest",
    "PromptCacheRetention",
    "PromptCacheStrategy",
    "StreamAccumulator",
    "TurnRequest",
    "parse_tool_arguments",
]
