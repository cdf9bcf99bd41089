"""Transcript items as AG-UI messages, and AG-UI input messages as items.

One id scheme serves the stream and the snapshot: an item keeps its own id
(a user message the client sent keeps the client's id); an item without one
is ``agentloop-N``, N its index in the transcript. An assistant item's first
text part is that message; a later text part is ``agentloop-N-K`` (K its
position among the item's text parts); its reasoning parts are
``agentloop-N-rK``; the results of a tool item are ``agentloop-N`` (the
first) and ``agentloop-N-K``. A tool call's parent message is its item's id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    ReasoningMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import Message as AguiMessage
from ag_ui.core import TextPart as AguiTextPart

from ..core._items import (
    Item,
    ItemKind,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ._problems import RunRefused

__all__ = [
    "item_id",
    "new_input",
    "part_message_id",
    "result_text",
    "snapshot_messages",
]


def item_id(item: Item, index: int) -> str:
    """The message id of the transcript item at ``index``."""
    return item.id if item.id else f"agentloop-{index}"


def part_message_id(base: str, kind: str, position: int) -> str:
    """The id of the ``position``-th text (``kind="text"``) or reasoning part of an item."""
    if kind == "text":
        return base if position == 0 else f"{base}-{position}"
    return f"{base}-r{position}"


def result_text(result: ToolResultPart) -> str:
    """A tool result's output as the text AG-UI carries: text as is, anything else as JSON."""
    output = result.output
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(p, TextPart) for p in output):
        return "".join(p.text for p in output)
    try:
        return json.dumps(output, ensure_ascii=False, sort_keys=True, default=_part_json)
    except (TypeError, ValueError):
        return str(output)


def _part_json(value: Any) -> Any:
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else repr(value)


def call_arguments(call: ToolCallPart) -> str:
    """A tool call's input as the JSON text of ``TOOL_CALL_ARGS``."""
    return json.dumps(call.input, ensure_ascii=False, sort_keys=True)


def snapshot_messages(transcript: Sequence[Item]) -> list[AguiMessage]:
    """The transcript as AG-UI messages (notifications and custom parts have no form)."""
    messages: list[AguiMessage] = []
    for index, item in enumerate(transcript):
        messages.extend(_item_messages(item, item_id(item, index)))
    return messages


def _item_messages(item: Item, base: str) -> Iterable[AguiMessage]:
    texts = [p.text for p in item.parts if isinstance(p, TextPart)]
    text = "".join(texts)
    if item.kind is ItemKind.USER:
        yield UserMessage(id=base, content=text)
    elif item.kind is ItemKind.SYSTEM:
        yield SystemMessage(id=base, content=text)
    elif item.kind is ItemKind.DEVELOPER:
        yield DeveloperMessage(id=base, content=text)
    elif item.kind is ItemKind.ASSISTANT:
        yield from _assistant_messages(item, base)
    elif item.kind is ItemKind.TOOL:
        results = [p for p in item.parts if isinstance(p, ToolResultPart)]
        for position, result in enumerate(results):
            yield ToolMessage(
                id=part_message_id(base, "text", position),
                tool_call_id=result.call_id,
                content=result_text(result),
                error=result_text(result) if result.is_error else None,
            )


def _assistant_messages(item: Item, base: str) -> Iterable[AguiMessage]:
    reasoning = [p for p in item.parts if isinstance(p, ReasoningPart) and not p.redacted]
    for position, part in enumerate(reasoning):
        yield ReasoningMessage(id=part_message_id(base, "reasoning", position), content=part.text)
    texts = [p.text for p in item.parts if isinstance(p, TextPart)]
    calls = [
        ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=call_arguments(c)))
        for c in item.parts
        if isinstance(c, ToolCallPart)
    ]
    yield AssistantMessage(id=base, content=texts[0] if texts else None, tool_calls=calls or None)
    for position, text in enumerate(texts[1:], start=1):
        yield AssistantMessage(id=part_message_id(base, "text", position), content=text)


def new_input(messages: Sequence[AguiMessage], transcript: Sequence[Item]) -> list[Item]:
    """The user messages of ``messages`` the transcript does not hold yet, as user items.

    The session's transcript is the conversation's truth: the client's copies
    of what the agent said (assistant, tool and reasoning messages) are not
    read. A new user message must be text (a string, or text parts only).
    """
    known = {item_id(item, index) for index, item in enumerate(transcript)}
    items: list[Item] = []
    for position, message in enumerate(messages):
        if not isinstance(message, UserMessage) or message.id in known:
            continue
        if isinstance(message.content, str):
            text = message.content
        else:
            parts = message.content
            if not all(isinstance(p, AguiTextPart) for p in parts):
                kinds = sorted({str(getattr(p, "type", "?")) for p in parts})
                raise RunRefused(
                    f"messages[{position}] (user message {message.id!r}) has content parts "
                    f"of type {', '.join(kinds)}; this endpoint takes text only: send the "
                    "message as a string or as text parts",
                    code="unsupported_content",
                )
            text = "".join(p.text for p in parts if isinstance(p, AguiTextPart))
        if not text.strip():
            raise RunRefused(
                f"messages[{position}] (user message {message.id!r}) is empty; send some text",
                code="empty_message",
            )
        known.add(message.id)
        items.append(Item(ItemKind.USER, [TextPart(text)], id=message.id))
    return items
