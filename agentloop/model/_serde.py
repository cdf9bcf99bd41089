"""The model layer's conversion hooks: prompt-cache breakpoints and strategies."""

from __future__ import annotations

import cattrs

from ..core._serde import configure_tagged
from ._config import (
    AutomaticCache,
    CacheBreakpoint,
    ExplicitCache,
    PromptCacheStrategy,
    ToolsEnd,
    TranscriptItemEnd,
    TranscriptPartEnd,
)

__all__ = ["configure_model"]

_BREAKPOINT_TAGS: dict[type, str] = {
    ToolsEnd: "tools_end",
    TranscriptItemEnd: "transcript_item_end",
    TranscriptPartEnd: "transcript_part_end",
}
_STRATEGY_TAGS: dict[type, str] = {AutomaticCache: "automatic", ExplicitCache: "explicit"}


def configure_model(converter: cattrs.Converter) -> None:
    """Tag the cache breakpoint and strategy unions (on top of ``configure_core``)."""
    configure_tagged(converter, CacheBreakpoint, _BREAKPOINT_TAGS)
    configure_tagged(converter, PromptCacheStrategy, _STRATEGY_TAGS)
