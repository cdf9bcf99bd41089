"""Rendering helpers shared by the adapters' request builders (pure functions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core._errors import ProviderError
from ..core._items import (
    CustomPart,
    FilePart,
    Item,
    MediaPart,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core._synthesized_results import RAW_ARGUMENTS_KEY
from ..model._admission import PROVIDER_CALL_ID_KEY

__all__ = [
    "PROVIDER_CALL_ID_KEY",
    "REMINDER_CLOSE",
    "REMINDER_OPEN",
    "call_wire_id",
    "data_uri",
    "item_text",
    "raw_arguments",
    "reminder",
    "text_parts",
    "tool_output_text",
    "unsupported_part",
]

REMINDER_OPEN = "<system-reminder>"
REMINDER_CLOSE = "</system-reminder>"


def reminder(text: str) -> str:
    """A notification's text wrapped in ``<system-reminder>`` tags, on its own lines."""
    return f"{REMINDER_OPEN}\n{text}\n{REMINDER_CLOSE}"


def item_text(item: Item, provider: str, *, index: int) -> str:
    """The text of a system-like item: text parts as-is, structured parts as pretty JSON."""
    chunks: list[str] = []
    for part in item.parts:
        if isinstance(part, TextPart):
            chunks.append(part.text)
        elif isinstance(part, StructuredPart):
            chunks.append(json.dumps(part.value, ensure_ascii=False, indent=2))
        else:
            raise unsupported_part(provider, item, index, part)
    return "\n".join(chunks)


def tool_output_text(output: Any) -> str:
    """A tool result's output as text: ``str`` as-is, parts by their text, JSON compact."""
    if isinstance(output, str):
        return output
    if isinstance(output, list | tuple) and all(_is_part(value) for value in output):
        return "\n".join(_part_text(part) for part in output)
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)


def raw_arguments(call: ToolCallPart) -> str:
    """The argument text to send back for ``call``: the raw text if it never parsed."""
    raw = call.metadata.get(RAW_ARGUMENTS_KEY)
    if isinstance(raw, str):
        return raw
    return json.dumps(call.input, ensure_ascii=False, separators=(",", ":"))


def call_wire_id(call: ToolCallPart) -> str:
    """The id to send for ``call``: the provider's own id if admission renamed the call."""
    original = call.metadata.get(PROVIDER_CALL_ID_KEY)
    return original if isinstance(original, str) and original else call.id


def data_uri(mime_type: str, data: str) -> str:
    """A ``data:`` URI for base64 ``data``."""
    return f"data:{mime_type};base64,{data}"


def unsupported_part(provider: str, item: Item, index: int, part: Part) -> ProviderError:
    """The error for a part the provider cannot take in this kind of item."""
    return ProviderError(
        f"{provider}: cannot send transcript item {index} ({item.kind.value}): it holds a "
        f"{type(part).__name__}, which a {item.kind.value} message cannot carry for this "
        "provider; drop or convert the part with a mutator"
    )


def _is_part(value: Any) -> bool:
    return isinstance(
        value,
        TextPart
        | ReasoningPart
        | ToolCallPart
        | ToolResultPart
        | StructuredPart
        | MediaPart
        | FilePart
        | CustomPart,
    )


def _part_text(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, StructuredPart):
        return json.dumps(part.value, ensure_ascii=False, separators=(",", ":"))
    from ..loop._converter import unstructure

    return json.dumps(unstructure(part), ensure_ascii=False, separators=(",", ":"))


def text_parts(parts: Sequence[Part]) -> list[str]:
    """The texts of ``parts`` that are text or structured (compact JSON)."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, TextPart) and part.text:
            out.append(part.text)
        elif isinstance(part, StructuredPart):
            out.append(json.dumps(part.value, ensure_ascii=False, separators=(",", ":")))
    return out
