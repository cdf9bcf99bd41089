"""Chat Completions request rendering: transcript items to ``messages`` (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core._errors import InvalidInputError, ProviderError
from ..core._items import (
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
from ..core._tool_spec import ToolSpec
from ..model._session_config import (
    ExplicitCache,
    PromptCacheMode,
    PromptCacheRequest,
    PromptCacheRetention,
)
from ._render import (
    call_wire_id,
    data_uri,
    item_text,
    raw_arguments,
    reminder,
    text_parts,
    tool_output_text,
    unsupported_part,
)

__all__ = [
    "GOOGLE_SIGNATURE_KEY",
    "REASONING_ENCRYPTED_KEY",
    "REASONING_FORMAT_KEY",
    "REASONING_SIGNATURE_KEY",
    "TOOL_CHOICE_MODES",
    "cache_fields",
    "check_tool_choice",
    "merge_same_role",
    "render_messages",
    "tool_choice_field",
    "tools_field",
]

TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})
REASONING_SIGNATURE_KEY = "openai.reasoning_signature"
"""ReasoningPart metadata: ``delta.reasoning_details[].signature`` (OpenRouter)."""
REASONING_FORMAT_KEY = "openai.reasoning_format"
"""ReasoningPart metadata: that detail's ``format`` (e.g. ``anthropic-claude-v1``)."""
REASONING_ENCRYPTED_KEY = "openai.reasoning_encrypted"
"""ReasoningPart metadata: ``reasoning_details[]`` of type ``reasoning.encrypted`` (OpenRouter),
each kept whole but its ``index``."""
GOOGLE_SIGNATURE_KEY = "openai.google_thought_signature"
"""Part metadata: ``extra_content.google.thought_signature`` (Gemini's OpenAI endpoint)."""
_MERGEABLE_ROLES = frozenset({"system", "developer", "user", "assistant"})


def render_messages(transcript: Sequence[Item], *, developer_role: str) -> list[dict[str, Any]]:
    """The ``messages`` for ``transcript`` (raises ``ProviderError`` for unsendable parts)."""
    messages: list[dict[str, Any]] = []
    wire_ids: dict[str, str] = {}
    for index, item in enumerate(transcript):
        messages.extend(_render_item(index, item, developer_role, wire_ids))
    return messages


def _render_item(
    index: int, item: Item, developer_role: str, wire_ids: dict[str, str]
) -> list[dict[str, Any]]:
    kind = item.kind
    if kind in (ItemKind.SYSTEM, ItemKind.CONTEXT):
        return [{"role": "system", "content": item_text(item, "OpenAI", index=index)}]
    if kind is ItemKind.DEVELOPER:
        return [{"role": developer_role, "content": item_text(item, "OpenAI", index=index)}]
    if kind is ItemKind.NOTIFICATION:
        return [{"role": "user", "content": reminder(item_text(item, "OpenAI", index=index))}]
    if kind is ItemKind.USER:
        return [{"role": "user", "content": _user_content(index, item)}]
    if kind is ItemKind.ASSISTANT:
        return _assistant_message(index, item, wire_ids)
    return _tool_messages(index, item, wire_ids)


def merge_same_role(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with runs of the same role merged into one message.

    For servers whose chat template demands strict alternation. Tool messages
    are never merged (each answers its own call); texts are joined with a
    blank line, content lists concatenated and tool calls kept in order.
    """
    merged: list[dict[str, Any]] = []
    for message in messages:
        previous = merged[-1] if merged else None
        role = message["role"]
        if previous is None or previous["role"] != role or role not in _MERGEABLE_ROLES:
            merged.append(dict(message))
            continue
        previous["content"] = _join_content(previous["content"], message["content"])
        for field in ("tool_calls", "reasoning_details"):
            if message.get(field):
                previous[field] = [*previous.get(field, ()), *message[field]]
    return merged


def _join_content(first: Any, second: Any) -> Any:
    if isinstance(first, str) and isinstance(second, str):
        return "\n\n".join(text for text in (first, second) if text)
    return [*_content_list(first), *_content_list(second)]


def _content_list(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def tools_field(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The ``tools`` array for ``specs``."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
            },
        }
        for spec in specs
    ]


def check_tool_choice(choice: object) -> str | None:
    """``choice`` if it is ``None``, a mode or a tool name; else ``InvalidInputError``."""
    if choice is None or (isinstance(choice, str) and choice.strip() == choice and choice):
        return choice
    raise InvalidInputError(
        f"OpenAIChatModel: tool_choice must be 'auto', 'none', 'required' or a tool name, "
        f"got {choice!r}"
    )


def tool_choice_field(choice: str, specs: Sequence[ToolSpec]) -> Any:
    """The wire ``tool_choice``: a mode as-is, a name as a function object.

    A name that is none of the request's tools is a ``ProviderError`` (servers
    answer it with an opaque 400 or, worse, ignore it).
    """
    if choice in TOOL_CHOICE_MODES:
        return choice
    names = [spec.name for spec in specs]
    if choice not in names:
        raise ProviderError(
            f"OpenAI: tool_choice names tool {choice!r}, which is not among this turn's tools "
            f"{names}; name one of them or use 'auto', 'none' or 'required'"
        )
    return {"type": "function", "function": {"name": choice}}


def cache_fields(cache: PromptCacheRequest | None) -> dict[str, Any]:
    """The prompt-cache fields (``prompt_cache_key``, retention) for ``cache``."""
    if cache is None or not cache.is_enabled:
        return {}
    if isinstance(cache.strategy, ExplicitCache) and cache.mode is PromptCacheMode.REQUIRED:
        raise ProviderError(
            "OpenAI: cannot honour a required explicit prompt cache: Chat Completions caches "
            "prefixes automatically and takes no breakpoints; use PromptCacheRequest.automatic()"
        )
    fields: dict[str, Any] = {}
    if cache.key is not None:
        fields["prompt_cache_key"] = cache.key
    if cache.retention is PromptCacheRetention.EXTENDED:
        fields["prompt_cache_retention"] = "24h"
    return fields


def _user_content(index: int, item: Item) -> Any:
    entries: list[dict[str, Any]] = []
    for part in item.parts:
        if isinstance(part, TextPart):
            entries.append({"type": "text", "text": part.text})
        elif isinstance(part, StructuredPart):
            entries.append({"type": "text", "text": tool_output_text(part.value)})
        elif isinstance(part, MediaPart) and part.mime_type.startswith("image/"):
            url = part.uri or data_uri(part.mime_type, part.data or "")
            entries.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(part, MediaPart) and part.mime_type.startswith("audio/") and part.data:
            audio_format = part.mime_type.split("/", 1)[1]
            entries.append(
                {"type": "input_audio", "input_audio": {"data": part.data, "format": audio_format}}
            )
        elif isinstance(part, FilePart) and part.data:
            mime = part.mime_type or "application/octet-stream"
            file: dict[str, Any] = {"file_data": data_uri(mime, part.data)}
            if part.name:
                file["filename"] = part.name
            entries.append({"type": "file", "file": file})
        elif isinstance(part, ReasoningPart):
            continue
        else:
            raise unsupported_part("OpenAI", item, index, part)
    if len(entries) == 1 and entries[0]["type"] == "text":
        return entries[0]["text"]
    return entries


def _assistant_message(index: int, item: Item, wire_ids: dict[str, str]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for part in item.parts:
        if isinstance(part, ToolCallPart):
            wire_ids[part.id] = call_wire_id(part)
            call: dict[str, Any] = {
                "id": wire_ids[part.id],
                "type": "function",
                "function": {"name": part.name, "arguments": raw_arguments(part)},
            }
            calls.append(_with_google_signature(call, part.metadata))
        elif not isinstance(part, TextPart | StructuredPart | ReasoningPart):
            raise unsupported_part("OpenAI", item, index, part)
    text = "\n".join(text_parts(item.parts))
    details = _reasoning_details(item)
    if not text and not calls and not details:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    if details:
        message["reasoning_details"] = details
    for part in item.parts:
        if isinstance(part, TextPart | ReasoningPart) and "extra_content" not in message:
            _with_google_signature(message, part.metadata)
    return [message]


def _with_google_signature(target: dict[str, Any], metadata: Any) -> dict[str, Any]:
    """``target`` with ``extra_content.google.thought_signature`` if ``metadata`` holds one."""
    signature = metadata.get(GOOGLE_SIGNATURE_KEY)
    if isinstance(signature, str) and signature:
        target["extra_content"] = {"google": {"thought_signature": signature}}
    return target


def _reasoning_details(item: Item) -> list[dict[str, Any]]:
    """OpenRouter's ``reasoning_details`` for the item's signed or encrypted reasoning parts."""
    details: list[dict[str, Any]] = []
    for part in item.parts:
        if not isinstance(part, ReasoningPart):
            continue
        signature = part.metadata.get(REASONING_SIGNATURE_KEY)
        if isinstance(signature, str) and signature:  # unsigned reasoning text is not sent back
            detail: dict[str, Any] = {"type": "reasoning.text", "text": part.text}
            detail["signature"] = signature
            format_ = part.metadata.get(REASONING_FORMAT_KEY)
            if isinstance(format_, str) and format_:
                detail["format"] = format_
            details.append({**detail, "index": len(details)})
        encrypted = part.metadata.get(REASONING_ENCRYPTED_KEY)
        for kept in encrypted if isinstance(encrypted, list) else ():
            if isinstance(kept, dict) and isinstance(kept.get("data"), str) and kept["data"]:
                details.append({**kept, "type": "reasoning.encrypted", "index": len(details)})
    return details


def _tool_messages(index: int, item: Item, wire_ids: dict[str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for part in item.parts:
        if not isinstance(part, ToolResultPart):
            raise unsupported_part("OpenAI", item, index, part)
        messages.append(
            {
                "role": "tool",
                "tool_call_id": wire_ids.get(part.call_id, part.call_id),
                "content": tool_output_text(part.output),
            }
        )
    return messages
