"""Transcript content as the GenAI conventions' message JSON (used only when capture is on)."""

from __future__ import annotations

import json
from typing import Any

from ..core._items import Item, ItemKind, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["item_message", "json_text"]

_ROLES = {
    ItemKind.SYSTEM: "system",
    ItemKind.DEVELOPER: "system",
    ItemKind.USER: "user",
    ItemKind.ASSISTANT: "assistant",
    ItemKind.TOOL: "tool",
    ItemKind.CONTEXT: "user",
    ItemKind.NOTIFICATION: "user",
}


def item_message(item: Item) -> dict[str, Any]:
    """``{"role": ..., "parts": [...]}`` for one transcript item."""
    return {"role": _ROLES[item.kind], "parts": [_part(part) for part in item.parts]}


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ReasoningPart):
        return {"type": "reasoning", "content": "" if part.redacted else part.text}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.input}
    if isinstance(part, ToolResultPart):
        return {
            "type": "tool_call_response",
            "id": part.call_id,
            "response": _jsonable(part.output),
        }
    return {"type": type(part).__name__}


def _jsonable(value: Any) -> Any:
    from ..loop._converter import unstructure

    return (
        unstructure(value)
        if not isinstance(value, str | int | float | bool | type(None))
        else value
    )


def json_text(value: Any) -> str:
    """``value`` as compact JSON (agentloop values unstructured first)."""
    return json.dumps(_jsonable(value), ensure_ascii=False, default=str, separators=(",", ":"))
