"""What the driver does with a model response before it enters the transcript.

Admission (``model/_admission.py``: only assistant items; a call id repeating an
earlier round's is renamed) plus the driver's own rules: a call with an empty id
is a protocol error, a call repeating an id of the same response is renamed and
answered with an error result, an empty response is named, and assistant items
are stamped with usage, finish reason and time. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from ..core._errors import ModelProtocolError
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from ..model._admission import PROVIDER_CALL_ID_KEY, admit_model_output

__all__ = ["MODEL_KEY", "admit_response", "empty_reason", "response_model", "stamp_output"]

MODEL_KEY = "agentloop.model"
"""Assistant item metadata: the model name an adapter stamped on its output."""


def admit_response(
    items: tuple[Item, ...], known_call_ids: Collection[str]
) -> tuple[tuple[Item, ...], dict[str, str]]:
    """Admit a response (see ``model/_admission.py``); rename repeats within it.

    Returns the items and, for each call renamed because it repeated an id of
    the same response, its new id -> the provider's id (answered as errors).
    """
    for item in items:
        for call in item.tool_calls() if isinstance(item, Item) else ():
            if not call.id:
                raise ModelProtocolError(
                    f"model returned a call of {call.name!r} with an empty id; every tool "
                    "call needs an id"
                )
    admitted = admit_model_output(items, known_call_ids)
    if not admitted.duplicate_call_ids:
        return admitted.items, {}
    taken = set(known_call_ids) | {call.id for item in admitted.items for call in item.tool_calls()}
    seen: set[str] = set()
    duplicates: dict[str, str] = {}
    renamed_items: list[Item] = []
    for item in admitted.items:
        parts: list[Part] = []
        for part in item.parts:
            if isinstance(part, ToolCallPart) and part.id in admitted.duplicate_call_ids:
                if part.id in seen:
                    number = 2
                    while f"{part.id}_{number}" in taken:
                        number += 1
                    fresh = f"{part.id}_{number}"
                    taken.add(fresh)
                    provider_id = part.metadata.get(PROVIDER_CALL_ID_KEY, part.id)
                    duplicates[fresh] = provider_id
                    part = attrs.evolve(
                        part,
                        id=fresh,
                        metadata={**part.metadata, PROVIDER_CALL_ID_KEY: provider_id},
                    )
                else:
                    seen.add(part.id)
            parts.append(part)
        renamed_items.append(attrs.evolve(item, parts=tuple(parts)))
    return tuple(renamed_items), duplicates


def response_model(items: tuple[Item, ...]) -> str | None:
    """The model name stamped on the first output item that has one."""
    for item in items:
        model = item.metadata.get(MODEL_KEY) if isinstance(item, Item) else None
        if isinstance(model, str) and model:
            return model
    return None


def empty_reason(output: Sequence[Item], reason: FinishReason) -> str | None:
    """Why a response without calls is empty (no text, no content), or None if it is not."""
    for item in output:
        for part in item.parts:
            if isinstance(part, TextPart):
                if part.text.strip():
                    return None
            elif not isinstance(part, ReasoningPart):
                return None
    what = "no output items" if not output else "no text and no tool calls"
    return f"{what}; finish reason {reason.value}"


def stamp_output(item: Item, usage: Usage | None, reason: FinishReason, now: float) -> Item:
    """``item`` with the call's usage, finish reason (assistant items) and time filled in."""
    if item.kind is ItemKind.ASSISTANT and (item.usage is None or item.finish_reason is None):
        stamped_usage = item.usage if item.usage is not None else usage
        finish_reason = item.finish_reason or reason
        created_at = item.created_at if item.created_at is not None else now
        if type(item) is not Item:  # a subclass may have fields of its own
            return attrs.evolve(
                item, usage=stamped_usage, finish_reason=finish_reason, created_at=created_at
            )
        # Built directly: attrs.evolve looks every field up by name first.
        return Item(
            item.kind,
            item.parts,
            id=item.id,
            metadata=item.metadata,
            usage=stamped_usage,
            finish_reason=finish_reason,
            created_at=created_at,
        )
    if item.created_at is None:
        return attrs.evolve(item, created_at=now)
    return item
