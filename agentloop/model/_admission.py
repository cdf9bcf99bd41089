"""Admitting a model's output into the transcript (pure functions, no I/O).

Before the driver appends what a model call produced, :func:`admit_model_output`
checks it: a model may only add assistant items (text, reasoning, structured
output, media, provider blocks and tool calls). A tool result, user, system or
any other item from a model is a :class:`~agentloop.ModelProtocolError`.

Tool-call ids that repeat an id already in the transcript (some
OpenAI-compatible servers restart their numbering with every response) get a
fresh id, unique in the transcript; the provider's own id is kept in the call's
metadata under :data:`PROVIDER_CALL_ID_KEY`, and the adapters send that id
back when they render the transcript. An id repeated *within* one response is
left as it is and reported in :attr:`AdmittedOutput.duplicate_call_ids`, for
the driver to answer those calls with error results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import attrs

from ..core._errors import ModelProtocolError
from ..core._items import (
    CustomPart,
    FilePart,
    Item,
    ItemKind,
    MediaPart,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    _empty_metadata,
)

__all__ = ["PROVIDER_CALL_ID_KEY", "AdmittedOutput", "admit_model_output"]

PROVIDER_CALL_ID_KEY = "agentloop.provider_call_id"
"""ToolCallPart metadata: the id the provider gave a call that was renamed on admission."""

_ASSISTANT_PARTS = (
    TextPart,
    ReasoningPart,
    ToolCallPart,
    StructuredPart,
    MediaPart,
    FilePart,
    CustomPart,
)


_NO_DUPLICATES: frozenset[str] = frozenset()


@attrs.frozen
class AdmittedOutput:
    """A model's output, checked and ready for the transcript.

    ``items``: the output items, with calls renamed where their id repeated an
    earlier round's. ``renamed``: each new id -> the provider's id.
    ``duplicate_call_ids``: ids (as they appear in ``items``) that more than
    one call of this response carries; the driver answers those calls with
    error results.
    """

    items: tuple[Item, ...]
    renamed: Mapping[str, str] = attrs.field(default=_empty_metadata())
    duplicate_call_ids: frozenset[str] = _NO_DUPLICATES


def admit_model_output(items: Sequence[Item], known_call_ids: Collection[str]) -> AdmittedOutput:
    """Check ``items`` from one model response against the transcript's ``known_call_ids``.

    Raises :class:`~agentloop.ModelProtocolError` if an item is not an
    assistant item or holds a part a model cannot produce (a tool result).
    Calls whose id is in ``known_call_ids`` get the fresh id
    ``f"{id}_{n}"`` (smallest ``n >= 2`` unused in the transcript and the
    response), the original kept under :data:`PROVIDER_CALL_ID_KEY`; every
    call of the response with that id gets the same new id. Nothing else is
    changed; the function is pure and deterministic.
    """
    for index, item in enumerate(items):
        _check_item(index, item)
    calls = [part for item in items for part in item.parts if isinstance(part, ToolCallPart)]
    fresh: dict[str, str] = {}
    if any(call.id in known_call_ids for call in calls):  # else no copy of the known ids
        taken = set(known_call_ids) | {call.id for call in calls}
        for call in calls:
            if call.id in known_call_ids and call.id not in fresh:
                fresh[call.id] = _fresh_id(call.id, taken)
                taken.add(fresh[call.id])
    admitted = tuple(_renamed(item, fresh) for item in items) if fresh else tuple(items)
    duplicates: frozenset[str] = _NO_DUPLICATES
    if len(calls) > 1:  # a lone call repeats no id of its response
        counts = Counter(
            part.id for item in admitted for part in item.parts if isinstance(part, ToolCallPart)
        )
        duplicates = frozenset(call_id for call_id, count in counts.items() if count > 1)
    if not fresh and not duplicates:  # the usual response: nothing renamed or repeated
        return AdmittedOutput(admitted)
    return AdmittedOutput(
        items=admitted,
        renamed={new: old for old, new in fresh.items()},
        duplicate_call_ids=duplicates,
    )


def _check_item(index: int, item: object) -> None:
    if not isinstance(item, Item):
        raise ModelProtocolError(
            f"model output item {index} is a {type(item).__name__}, not an Item; a model "
            "adapter must produce assistant Items"
        )
    if item.kind is not ItemKind.ASSISTANT:
        raise ModelProtocolError(
            f"model output item {index} is a {item.kind.value} item; a model may only add "
            "assistant items (text, reasoning, tool calls), never "
            f"{item.kind.value} items: the model adapter broke the protocol"
        )
    for position, part in enumerate(item.parts):
        if not isinstance(part, _ASSISTANT_PARTS):
            raise ModelProtocolError(
                f"model output item {index} (assistant) part {position} is a "
                f"{type(part).__name__}; a model may only produce text, reasoning, "
                "structured, media, file, custom and tool-call parts"
            )


def _fresh_id(call_id: str, taken: set[str]) -> str:
    number = 2
    while f"{call_id}_{number}" in taken:
        number += 1
    return f"{call_id}_{number}"


def _renamed(item: Item, fresh: Mapping[str, str]) -> Item:
    parts: list[Part] = []
    for part in item.parts:
        if isinstance(part, ToolCallPart) and part.id in fresh:
            original = part.metadata.get(PROVIDER_CALL_ID_KEY, part.id)
            part = attrs.evolve(
                part, id=fresh[part.id], metadata={**part.metadata, PROVIDER_CALL_ID_KEY: original}
            )
        parts.append(part)
    return attrs.evolve(item, parts=tuple(parts))
