"""Checkpoint documents as stores see them: validation, encoding, decoding.

Plain synchronous functions shared by every store. A document is split into
its transcript items (one JSON text each, so a store can write only the
items that changed) and its head (everything else, one JSON text). Encoding
is strict: a value JSON would not give back exactly (a tuple, a non-string
key, NaN, an object) is refused, so a loaded document is always deep-equal
to the saved one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import cattrs

from .. import _serde
from ..core._errors import CheckpointError
from ..core._items import Item

__all__ = [
    "CHECKPOINT_FORMAT",
    "EncodedCheckpoint",
    "ItemTexts",
    "answered_call_ids",
    "check_items",
    "common_prefix_length",
    "decode_checkpoint",
    "decode_items",
    "describe_item_error",
    "encode_checkpoint",
    "encode_json",
]

CHECKPOINT_FORMAT = "agentloop.checkpoint"
"""The ``format`` every checkpoint document carries."""

_FIX = "save the document driver.checkpoint() returns, unchanged"


@attrs.frozen
class EncodedCheckpoint:
    """A validated document: ``head`` is its JSON without the transcript, ``items`` each item's.

    ``sources`` are the transcript's item objects, so the next save can reuse
    the text of an item that is the very same object (see :class:`ItemTexts`).
    """

    session_id: str
    head: str
    items: tuple[str, ...]
    sources: tuple[object, ...] = attrs.field(default=(), eq=False, repr=False)


class ItemTexts:
    """The encoded items of each session's last save, to skip re-encoding unchanged ones.

    The driver hands a store the same item objects step after step (items are
    immutable), so a save encodes only the new ones: O(new items), not
    O(transcript). Bounded to the ``capacity`` most recently saved sessions.
    """

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._last: dict[str, dict[int, tuple[object, str]]] = {}

    def for_session(self, session_id: str) -> Mapping[int, tuple[object, str]]:
        """Item object id -> (object, text) of the session's last save."""
        return self._last.get(session_id, {})

    def remember(self, encoded: EncodedCheckpoint) -> None:
        """Keep ``encoded``'s item texts for the session's next save."""
        self._last.pop(encoded.session_id, None)
        self._last[encoded.session_id] = {
            id(source): (source, text)
            for source, text in zip(encoded.sources, encoded.items, strict=True)
        }
        while len(self._last) > self._capacity:
            del self._last[next(iter(self._last))]

    def forget(self, session_id: str) -> None:
        """Drop the session's texts (after a delete)."""
        self._last.pop(session_id, None)


def encode_json(value: Any, where: str) -> str:
    """``value`` as compact JSON text; ``ValueError`` naming the path of a non-JSON value."""
    _check_json(value, where)
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _check_json(value: Any, where: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, list):
        for index, element in enumerate(value):
            _check_json(element, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the non-string key {key!r}")
            _check_json(element, f"{where}[{key!r}]")
        return
    raise ValueError(
        f"{where} has type {type(value).__name__}, which is not JSON (use dict, list, str, "
        "int, float, bool or None)"
    )


def encode_checkpoint(
    session_id: str,
    checkpoint: Mapping[str, Any],
    reuse: Mapping[int, tuple[object, str]] | None = None,
) -> EncodedCheckpoint:
    """Validate ``checkpoint`` for ``session_id`` and encode it; ``CheckpointError`` if it is bad.

    Checks the header (``format``, ``version``, ``session_id``), that
    ``transcript`` is a list of objects and that every value is exact JSON.
    The items' own shape is checked by :func:`check_items`. An item that is
    the very object encoded last time (``reuse``, from :class:`ItemTexts`)
    keeps its text: saved documents must not be changed in place.
    """
    prefix = f"cannot save checkpoint for session {session_id!r}"
    if not isinstance(checkpoint, Mapping):
        raise CheckpointError(
            f"{prefix}: expected a mapping, found {type(checkpoint).__name__}; {_FIX}"
        )
    found_format = checkpoint.get("format")
    if found_format != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{prefix}: expected format {CHECKPOINT_FORMAT!r}, found {found_format!r}; {_FIX}"
        )
    version = checkpoint.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(
            f"{prefix}: expected an integer version >= 1, found {version!r}; {_FIX}"
        )
    if checkpoint.get("session_id") != session_id:
        raise CheckpointError(
            f"{prefix}: the document's session_id is {checkpoint.get('session_id')!r}; "
            "save it under its own session id"
        )
    transcript = checkpoint.get("transcript")
    if not isinstance(transcript, list):
        raise CheckpointError(
            f"{prefix}: expected a 'transcript' list, found {type(transcript).__name__}; {_FIX}"
        )
    head = {key: value for key, value in checkpoint.items() if key != "transcript"}
    reuse = reuse or {}
    try:
        encoded: list[str] = []
        for index, item in enumerate(transcript):
            known = reuse.get(id(item))
            if known is not None and known[0] is item:
                encoded.append(known[1])
                continue
            where = f"checkpoint['transcript'][{index}]"
            if not isinstance(item, dict):
                raise ValueError(f"{where} has type {type(item).__name__}, expected an item object")
            encoded.append(encode_json(item, where))
        head_text = encode_json(head, "checkpoint")
    except ValueError as error:
        raise CheckpointError(f"{prefix}: {error}; {_FIX}") from None
    return EncodedCheckpoint(session_id, head_text, tuple(encoded), tuple(transcript))


def common_prefix_length(old: Sequence[str], new: Sequence[str]) -> int:
    """How many leading items ``old`` and ``new`` share: the first position to rewrite."""
    shared = 0
    for before, after in zip(old, new, strict=False):
        if before != after:
            break
        shared += 1
    return shared


def describe_item_error(error: Exception) -> str:
    """A one-line reason why structuring an item failed."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error))
    return f"{type(error).__name__}: {error}"


def check_items(session_id: str, items: Sequence[str], start: int) -> frozenset[str]:
    """Check that ``items[start:]`` are agentloop items; return the call ids they answer."""
    answered: set[str] = set()
    for position in range(start, len(items)):
        data = json.loads(items[position])
        try:
            _serde.structure(data, Item)
        except Exception as error:
            raise CheckpointError(
                f"cannot save checkpoint for session {session_id!r}: transcript item "
                f"{position} is not an agentloop item ({describe_item_error(error)}); {_FIX}"
            ) from None
        answered.update(answered_call_ids([data]))
    return frozenset(answered)


def answered_call_ids(items: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ``call_id`` of every ``tool_result`` part in unstructured ``items``."""
    return {
        part["call_id"]
        for item in items
        for part in item.get("parts", ())
        if isinstance(part, Mapping) and part.get("type") == "tool_result"
    }


def decode_checkpoint(head: str, items: Sequence[str]) -> dict[str, Any]:
    """Reassemble the document that was encoded as ``head`` and ``items``."""
    document: dict[str, Any] = json.loads(head)
    document["transcript"] = [json.loads(item) for item in items]
    return document


def decode_items(items: Sequence[str]) -> list[Item]:
    """Structure stored item texts into :class:`Item` values."""
    return [_serde.structure(json.loads(item), Item) for item in items]
