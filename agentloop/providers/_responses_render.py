"""Responses API request rendering: transcript items to ``input`` items (pure functions).

The input item shapes are the ones OpenAI documents for ``POST /v1/responses``
(``openai-python``'s ``types/responses/*_param.py``): messages, ``function_call`` /
``function_call_output`` paired by ``call_id``, and ``reasoning`` items sent back with
their ``encrypted_content``. A response's items carry their ids (``msg_…``, ``fc_…``)
back only together with the reasoning item they follow, since OpenAI pairs the two;
a reasoning item that cannot be sent (stateless, without ``encrypted_content``) takes
those ids with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..core._errors import InvalidInputError, ProviderError
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
    tool_output_text,
    unsupported_part,
)

__all__ = [
    "ANNOTATIONS_KEY",
    "ENCRYPTED_CONTENT_KEY",
    "ITEM_ID_KEY",
    "PHASE_KEY",
    "REASONING_ID_KEY",
    "REASONING_TEXT_KEY",
    "REFUSAL_KEY",
    "SUMMARY_KEY",
    "RenderedInput",
    "cache_fields",
    "check_option",
    "render_input",
]

ITEM_ID_KEY = "openai.item_id"
"""TextPart / ToolCallPart metadata: the id of the output item (``msg_…``, ``fc_…``)."""
PHASE_KEY = "openai.phase"
"""TextPart metadata: the message's ``phase`` (``commentary``, ``final_answer``)."""
REFUSAL_KEY = "openai.refusal"
"""TextPart metadata: ``True`` when the text is a ``refusal`` content part."""
ANNOTATIONS_KEY = "openai.annotations"
"""TextPart metadata: the ``output_text`` part's ``annotations`` (citations), when any."""
REASONING_ID_KEY = "openai.reasoning_id"
"""ReasoningPart metadata: the reasoning item's id (``rs_…``)."""
ENCRYPTED_CONTENT_KEY = "openai.encrypted_content"
"""ReasoningPart metadata: the reasoning item's ``encrypted_content`` (``output_item.done``'s)."""
SUMMARY_KEY = "openai.reasoning_summary"
"""ReasoningPart metadata: the ``summary`` texts, one per summary part."""
REASONING_TEXT_KEY = "openai.reasoning_text"
"""ReasoningPart metadata: the raw ``content`` texts (``reasoning_text``), when a server sends
them."""

_P = "OpenAI"


@attrs.frozen
class RenderedInput:
    """``instructions`` (the leading system items' text, or ``None``) and the ``input`` items."""

    instructions: str | None
    input: list[dict[str, Any]]


def render_input(transcript: Sequence[Item], *, store: bool) -> RenderedInput:
    """The ``instructions`` and ``input`` for ``transcript`` (``ProviderError`` if unsendable).

    Leading SYSTEM items become ``instructions``; later SYSTEM and CONTEXT items are
    ``system`` messages in place, DEVELOPER items ``developer`` messages.
    """
    leading = 0
    while leading < len(transcript) and transcript[leading].kind is ItemKind.SYSTEM:
        leading += 1
    texts = [item_text(transcript[i], _P, index=i) for i in range(leading)]
    instructions = "\n\n".join(text for text in texts if text) or None
    wire_ids: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    for index in range(leading, len(transcript)):
        items.extend(_render_item(index, transcript[index], wire_ids, store))
    return RenderedInput(instructions, items)


def _render_item(
    index: int, item: Item, wire_ids: dict[str, str], store: bool
) -> list[dict[str, Any]]:
    kind = item.kind
    if kind in (ItemKind.SYSTEM, ItemKind.CONTEXT):
        return [_message("system", item_text(item, _P, index=index))]
    if kind is ItemKind.DEVELOPER:
        return [_message("developer", item_text(item, _P, index=index))]
    if kind is ItemKind.NOTIFICATION:
        return [_message("user", reminder(item_text(item, _P, index=index)))]
    if kind is ItemKind.USER:
        return [_message("user", _user_content(index, item))]
    if kind is ItemKind.ASSISTANT:
        return _assistant_items(index, item, wire_ids, store)
    return _tool_outputs(index, item, wire_ids)


def _message(role: str, content: Any) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


def _user_content(index: int, item: Item) -> Any:
    entries: list[dict[str, Any]] = []
    for part in item.parts:
        if isinstance(part, TextPart):
            entries.append({"type": "input_text", "text": part.text})
        elif isinstance(part, StructuredPart):
            entries.append({"type": "input_text", "text": tool_output_text(part.value)})
        elif isinstance(part, MediaPart) and part.mime_type.startswith("image/"):
            url = part.uri or data_uri(part.mime_type, part.data or "")
            entries.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif isinstance(part, MediaPart) and part.mime_type in _AUDIO_FORMATS and part.data:
            audio = {"data": part.data, "format": _AUDIO_FORMATS[part.mime_type]}
            entries.append({"type": "input_audio", "input_audio": audio})
        elif isinstance(part, FilePart) and (part.data or part.uri):
            entries.append(_input_file(part))
        elif not isinstance(part, ReasoningPart):
            raise unsupported_part(_P, item, index, part)
    if len(entries) == 1 and entries[0]["type"] == "input_text":
        return entries[0]["text"]
    return entries


_AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/wav": "wav", "audio/x-wav": "wav"}


def _input_file(part: FilePart) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "input_file"}
    if part.data:
        entry["file_data"] = data_uri(part.mime_type or "application/octet-stream", part.data)
    else:
        entry["file_url"] = part.uri
    if part.name:
        entry["filename"] = part.name
    return entry


def _assistant_items(
    index: int, item: Item, wire_ids: dict[str, str], store: bool
) -> list[dict[str, Any]]:
    """One model response's items, in part order (consecutive texts in one message)."""
    reasoning = [_reasoning_item(p, store) for p in item.parts if isinstance(p, ReasoningPart)]
    with_ids = store or any(entry is not None for entry in reasoning)
    out: list[dict[str, Any]] = []
    texts: list[TextPart] = []
    for part in item.parts:
        if isinstance(part, TextPart | StructuredPart):
            text = _as_text(part)
            if texts and _str(texts[-1].metadata, ITEM_ID_KEY) != _str(text.metadata, ITEM_ID_KEY):
                out.extend(_assistant_message(texts, with_ids))  # another message item
                texts = []
            texts.append(text)
            continue
        out.extend(_assistant_message(texts, with_ids))
        texts = []
        if isinstance(part, ReasoningPart):
            entry = _reasoning_item(part, store)
            out.extend([entry] if entry is not None else [])
        elif isinstance(part, ToolCallPart):
            wire_ids[part.id] = call_wire_id(part)
            out.append(_function_call(part, wire_ids[part.id], with_ids))
        elif isinstance(part, CustomPart) and _is_openai_item(part):
            out.append(dict(part.value))
        else:
            raise unsupported_part(_P, item, index, part)
    return out + _assistant_message(texts, with_ids)


def _as_text(part: TextPart | StructuredPart) -> TextPart:
    if isinstance(part, TextPart):
        return part
    return TextPart(tool_output_text(part.value), metadata=part.metadata)


def _is_openai_item(part: CustomPart) -> bool:
    """A whole output item of a type agentloop does not model (``openai.<type>``)."""
    return (
        part.kind.startswith("openai.")
        and isinstance(part.value, dict)
        and part.value.get("type") == part.kind.removeprefix("openai.")
    )


def _assistant_message(texts: list[TextPart], with_ids: bool) -> list[dict[str, Any]]:
    """The message for a run of text parts: by its id with ids, else plain text."""
    texts = [part for part in texts if part.text or _str(part.metadata, ITEM_ID_KEY)]
    if not texts:
        return []
    phase = _str(texts[0].metadata, PHASE_KEY)
    item_id = _str(texts[0].metadata, ITEM_ID_KEY)
    if with_ids and item_id:
        message: dict[str, Any] = {"type": "message", "role": "assistant", "id": item_id}
        message["status"] = "completed"
        message["content"] = [_output_content(part) for part in texts]
    else:
        message = _message("assistant", "\n".join(part.text for part in texts))
    if phase:
        message["phase"] = phase
    return [message]


def _output_content(part: TextPart) -> dict[str, Any]:
    if part.metadata.get(REFUSAL_KEY) is True:
        return {"type": "refusal", "refusal": part.text}
    annotations = part.metadata.get(ANNOTATIONS_KEY)
    kept = annotations if isinstance(annotations, list) else []
    return {"type": "output_text", "text": part.text, "annotations": kept}


def _reasoning_item(part: ReasoningPart, store: bool) -> dict[str, Any] | None:
    """The reasoning item to send back, or ``None`` if it cannot be sent.

    Sendable: the part came from the Responses API (it has the item's id) and is
    self-contained (``encrypted_content`` or raw reasoning text) or stored (``store``).
    """
    metadata = part.metadata
    item_id = _str(metadata, REASONING_ID_KEY)
    encrypted = _str(metadata, ENCRYPTED_CONTENT_KEY)
    contents = _strings(metadata, REASONING_TEXT_KEY)
    if not item_id or not (encrypted or contents or store):
        return None
    summaries = _strings(metadata, SUMMARY_KEY)
    if summaries is None:
        summaries = [part.text] if part.text and not contents else []
    item: dict[str, Any] = {"type": "reasoning", "id": item_id}
    item["summary"] = [{"type": "summary_text", "text": text} for text in summaries]
    if contents:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in contents]
    if encrypted:
        item["encrypted_content"] = encrypted
    return item


def _function_call(part: ToolCallPart, call_id: str, with_ids: bool) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function_call", "call_id": call_id, "name": part.name}
    call["arguments"] = raw_arguments(part)
    item_id = _str(part.metadata, ITEM_ID_KEY)
    if with_ids and item_id:
        call["id"] = item_id
    return call


def _tool_outputs(index: int, item: Item, wire_ids: dict[str, str]) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    for part in item.parts:
        if not isinstance(part, ToolResultPart):
            raise unsupported_part(_P, item, index, part)
        outputs.append(
            {
                "type": "function_call_output",
                "call_id": wire_ids.get(part.call_id, part.call_id),
                "output": tool_output_text(part.output),
            }
        )
    return outputs


def _str(metadata: Any, key: str) -> str | None:
    value = metadata.get(key)
    return value if isinstance(value, str) and value else None


def _strings(metadata: Any, key: str) -> list[str] | None:
    value = metadata.get(key)
    if isinstance(value, list) and all(isinstance(text, str) for text in value):
        return list(value)
    return None


def cache_fields(cache: PromptCacheRequest | None) -> dict[str, Any]:
    """The prompt-cache fields (``prompt_cache_key``, retention) for ``cache``."""
    if cache is None or not cache.is_enabled:
        return {}
    if isinstance(cache.strategy, ExplicitCache) and cache.mode is PromptCacheMode.REQUIRED:
        raise ProviderError(
            "OpenAI: cannot honour a required explicit prompt cache: the Responses API caches "
            "prefixes automatically and takes no breakpoints; use PromptCacheRequest.automatic()"
        )
    fields: dict[str, Any] = {}
    if cache.key is not None:
        fields["prompt_cache_key"] = cache.key
    if cache.retention is PromptCacheRetention.EXTENDED:
        fields["prompt_cache_retention"] = "24h"
    return fields


def check_option(owner: str, name: str, value: object) -> str | None:
    """``value`` if it is ``None`` or a non-empty unpadded string; else ``InvalidInputError``."""
    if value is None or (isinstance(value, str) and value and value.strip() == value):
        return value
    raise InvalidInputError(f"{owner}: {name} must be a non-empty string or None, got {value!r}")
