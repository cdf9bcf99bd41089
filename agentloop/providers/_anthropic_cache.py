"""Mapping a ``PromptCacheRequest`` onto Anthropic ``cache_control`` breakpoints.

Automatic: the last tool (when there are tools) and the last cacheable block of
the last message (the system prompt when there are no messages). Explicit:
each listed breakpoint on the exact block its item or part was rendered to
(tracked through role merging, so skipped items do not shift later ones).
Anthropic takes at most 4 breakpoints; thinking blocks cannot carry one.
A breakpoint that cannot be honoured is an error in ``REQUIRED`` mode and is
dropped otherwise (keeping the last 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core._errors import ProviderError
from ..model._session_config import (
    AfterItem,
    AfterTools,
    AutomaticCache,
    CacheBreakpoint,
    PromptCacheMode,
    PromptCacheRequest,
    PromptCacheRetention,
)

if TYPE_CHECKING:
    from ._anthropic_render import RenderedTranscript

__all__ = ["MAX_BREAKPOINTS", "apply_cache"]

MAX_BREAKPOINTS = 4
Block = dict[str, Any]


def apply_cache(
    cache: PromptCacheRequest | None, tools: list[Block], rendered: RenderedTranscript
) -> None:
    """Put ``cache_control`` on the blocks ``cache`` asks for (mutates them in place)."""
    if cache is None or not cache.is_enabled:
        return
    required = cache.mode is PromptCacheMode.REQUIRED
    targets: list[Block] = []
    problems: list[str] = []
    if isinstance(cache.strategy, AutomaticCache):
        if tools:
            targets.append(tools[-1])
        last = _last_cacheable(rendered)
        if last is None:
            problems.append("the request has no text block to cache")
        else:
            targets.append(last)
    else:
        for breakpoint_ in cache.strategy.breakpoints:
            block = _resolve(breakpoint_, tools, rendered)
            if block is None or not _cacheable(block):
                problems.append(f"{breakpoint_!r} names no cacheable block")
            else:
                targets.append(block)
    unique = list({id(block): block for block in targets}.values())
    if len(unique) > MAX_BREAKPOINTS:
        problems.append(f"{len(unique)} breakpoints asked for; Anthropic takes at most 4")
        unique = unique[-MAX_BREAKPOINTS:]
    if problems and required:
        raise ProviderError(
            "Anthropic: cannot honour the required prompt cache: "
            + "; ".join(problems)
            + " (use a best-effort PromptCacheRequest to drop what cannot be cached)",
            error_type="cache_unsupported",
        )
    control: dict[str, Any] = {"type": "ephemeral"}
    if cache.retention is PromptCacheRetention.EXTENDED:
        control["ttl"] = "1h"
    for block in unique:
        block["cache_control"] = dict(control)


def _cacheable(block: Block) -> bool:
    kind = block.get("type")
    if kind in ("thinking", "redacted_thinking"):
        return False
    return not (kind == "text" and not block.get("text"))


def _last_cacheable(rendered: RenderedTranscript) -> Block | None:
    for message in reversed(rendered.messages):
        content: list[Block] = message["content"]
        for block in reversed(content):
            if _cacheable(block):
                return block
    return rendered.system[-1] if rendered.system else None


def _resolve(
    breakpoint_: CacheBreakpoint, tools: list[Block], rendered: RenderedTranscript
) -> Block | None:
    if isinstance(breakpoint_, AfterTools):
        return tools[-1] if tools else None
    if isinstance(breakpoint_, AfterItem):
        blocks = [b for b in rendered.item_blocks.get(breakpoint_.index, []) if _cacheable(b)]
        return blocks[-1] if blocks else None
    block: Block | None = rendered.part_blocks.get((breakpoint_.item_index, breakpoint_.part_index))
    return block
