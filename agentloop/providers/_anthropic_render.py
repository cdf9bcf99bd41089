"""Anthropic request rendering: transcript items to ``system`` and ``messages`` blocks.

Consecutive same-role messages are merged as the Messages API requires, and
every block is remembered by item and part so ``_anthropic_cache`` can put
``cache_control`` breakpoints on them afterwards. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core._items import (
    CustomPart,
    FilePart,
    Item,
    ItemKind,
    MediaPart,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ._render import reminder, tool_output_text, unsupported_part
from ._transport import compact_json

__all__ = [
    "REDACTED_DATA_KEY",
    "SIGNATURE_KEY",
    "Block",
    "RenderedTranscript",
    "render_transcript",
]

SIGNATURE_KEY = "anthropic.thinking_signature"
"""ReasoningPart metadata: the signature Anthropic needs to accept the thinking back."""
REDACTED_DATA_KEY = "anthropic.redacted_data"
"""ReasoningPart metadata: the encrypted data of a ``redacted_thinking`` block."""
Block = dict[str, Any]


def render_transcript(transcript: Sequence[Item]) -> RenderedTranscript:
    """The system blocks and merged messages for ``transcript``."""
    return _Renderer().render(transcript)


class RenderedTranscript:
    """The system blocks and messages of a transcript, with where each item went.

    ``item_blocks[i]`` and ``part_blocks[(i, p)]`` are the very block dicts in
    ``system``/``messages``, so a cache breakpoint can be put on them after
    merging.
    """

    def __init__(self) -> None:
        self.system: list[Block] = []
        self.messages: list[dict[str, Any]] = []
        self.item_blocks: dict[int, list[Block]] = {}
        self.part_blocks: dict[tuple[int, int], Block] = {}


class _Renderer:
    def __init__(self) -> None:
        self.out = RenderedTranscript()

    def render(self, transcript: Sequence[Item]) -> RenderedTranscript:
        for index, item in enumerate(transcript):
            self._item(index, item)
        for message in self.out.messages:
            if message["role"] == "user":
                # tool_result blocks must open a user message
                message["content"].sort(key=lambda block: block.get("type") != "tool_result")
        return self.out

    def _add(self, index: int, part_index: int, block: Block) -> Block:
        self.out.item_blocks.setdefault(index, []).append(block)
        self.out.part_blocks[(index, part_index)] = block
        return block

    def _message(self, role: str, blocks: list[Block]) -> None:
        if not blocks:
            return
        messages = self.out.messages
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    def _item(self, index: int, item: Item) -> None:
        kind = item.kind
        if kind in (ItemKind.SYSTEM, ItemKind.DEVELOPER, ItemKind.CONTEXT):
            for position, part in enumerate(item.parts):
                text = _plain_text(item, index, part)
                if text:
                    self.out.system.append(self._add(index, position, _text(text)))
        elif kind is ItemKind.NOTIFICATION:
            text = "\n".join(_plain_text(item, index, part) for part in item.parts)
            self._message("user", [self._add(index, 0, _text(reminder(text)))])
        elif kind is ItemKind.USER:
            blocks = [
                self._add(index, position, block)
                for position, part in enumerate(item.parts)
                if (block := _user_block(item, index, part)) is not None
            ]
            self._message("user", blocks)
        elif kind is ItemKind.ASSISTANT:
            pairs = [
                (position, block)
                for position, part in enumerate(item.parts)
                if (block := _assistant_block(item, index, part)) is not None
            ]
            pairs.sort(key=lambda pair: pair[1]["type"] not in ("thinking", "redacted_thinking"))
            self._message("assistant", [self._add(index, p, block) for p, block in pairs])
        else:
            blocks = []
            for position, part in enumerate(item.parts):
                if not isinstance(part, ToolResultPart):
                    raise unsupported_part("Anthropic", item, index, part)
                blocks.append(self._add(index, position, _tool_result(part)))
            self._message("user", blocks)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _plain_text(item: Item, index: int, part: Any) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, StructuredPart):
        return tool_output_text(part.value)
    raise unsupported_part("Anthropic", item, index, part)


def _media_block(part: MediaPart | FilePart) -> Block | None:
    mime = part.mime_type or ""
    kind = "image" if mime.startswith("image/") else "document"
    if kind == "document" and mime != "application/pdf":
        return None
    if part.data:
        return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": part.data}}
    if part.uri:
        return {"type": kind, "source": {"type": "url", "url": part.uri}}
    return None


def _user_block(item: Item, index: int, part: Any) -> Block | None:
    if isinstance(part, TextPart | StructuredPart):
        text = _plain_text(item, index, part)
        return _text(text) if text else None
    if isinstance(part, ReasoningPart):
        return None
    if isinstance(part, MediaPart | FilePart):
        block = _media_block(part)
        if block is not None:
            return block
    raise unsupported_part("Anthropic", item, index, part)


def _assistant_block(item: Item, index: int, part: Any) -> Block | None:
    if isinstance(part, TextPart | StructuredPart):
        text = part.text if isinstance(part, TextPart) else compact_json(part.value)
        return _text(text) if text else None
    if isinstance(part, ReasoningPart):
        redacted = part.metadata.get(REDACTED_DATA_KEY)
        if isinstance(redacted, str):
            return {"type": "redacted_thinking", "data": redacted}
        signature = part.metadata.get(SIGNATURE_KEY)
        if isinstance(signature, str):
            return {"type": "thinking", "thinking": part.text, "signature": signature}
        return None  # unsigned thinking (e.g. from another provider) is not accepted back
    if isinstance(part, ToolCallPart):
        call_input = part.input if isinstance(part.input, dict) else {}
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": call_input}
    if isinstance(part, CustomPart) and part.kind.startswith("anthropic.") and part.value:
        return dict(part.value)
    raise unsupported_part("Anthropic", item, index, part)


def _tool_result(part: ToolResultPart) -> Block:
    output = part.output
    content: Any
    if isinstance(output, list | tuple) and any(isinstance(p, MediaPart) for p in output):
        content = []
        for value in output:
            media = _media_block(value) if isinstance(value, MediaPart) else None
            content.append(media or _text(tool_output_text([value])))
    else:
        content = tool_output_text(output)
    block: Block = {"type": "tool_result", "tool_use_id": part.call_id, "content": content}
    if part.is_error:
        block["is_error"] = True
    return block
