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
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import cattrs

from .. import _serde
from ..core._errors import CheckpointError
from ..core._items import Item
from ..loop._checkpoint import CHECKPOINT_FORMAT

__all__ = [
    "CHECKPOINT_FORMAT",
    "EncodedCheckpoint",
    "ItemTexts",
    "answered_call_ids",
    "check_items",
    "common_prefix_length",
    "decode_checkpoint",
    "decode_items",
    "decode_stored",
    "describe_item_error",
    "encode_checkpoint",
    "encode_json",
]

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
    """Each session's last saved :class:`EncodedCheckpoint`, to skip re-encoding unchanged items.

    The driver hands a store the same item objects step after step (items are
    immutable), so a save encodes only the new ones. Remembering a save keeps
    a reference, no copy: O(1). Bounded to the ``capacity`` most recently
    saved sessions.
    """

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._last: dict[str, EncodedCheckpoint] = {}

    def for_session(self, session_id: str) -> EncodedCheckpoint | None:
        """The session's last saved encoding, or ``None``."""
        return self._last.get(session_id)

    def remember(self, encoded: EncodedCheckpoint) -> None:
        """Keep ``encoded`` for the session's next save."""
        self._last.pop(encoded.session_id, None)
        self._last[encoded.session_id] = encoded
        while len(self._last) > self._capacity:
            del self._last[next(iter(self._last))]

    def forget(self, session_id: str) -> None:
        """Drop the session's texts (after a delete)."""
        self._last.pop(session_id, None)


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
)
"""No cycle check here: :func:`encode_json` walks every value first (a cycle raises there)."""


def encode_json(value: Any, where: str) -> str:
    """``value`` as compact JSON text; ``ValueError`` naming the path of a non-JSON value."""
    if not _is_plain_json(value):
        _check_json(value, where)  # names the offending path, or accepts subclasses
    return _ENCODER.encode(value)


def _is_plain_json(value: Any) -> bool:
    """Whether ``value`` is exact JSON built of the plain types only (no path strings built).

    The fast check of a valid document; ``False`` sends the value to
    :func:`_check_json`, which decides (subclasses of the JSON types pass
    there) and names the path of what fails.
    """
    kind = type(value)
    if kind is dict:
        for key, element in value.items():
            if type(key) is not str or not (type(element) is str or _is_plain_json(element)):
                return False
        return True
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is list:
        for element in value:  # noqa: SIM110 (all() over a generator is slower in this hot path)
            if not (type(element) is str or _is_plain_json(element)):
                return False
        return True
    if kind is float:
        return math.isfinite(value)
    return False


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
    reuse: EncodedCheckpoint | None = None,
) -> EncodedCheckpoint:
    """Validate ``checkpoint`` for ``session_id`` and encode it; ``CheckpointError`` if it is bad.

    Checks the header (``format``, ``version``, ``session_id``), that
    ``transcript`` is a list of objects and that every value is exact JSON.
    The items' own shape is checked by :func:`check_items`. An item that is
    the very object encoded last time (``reuse``, from :class:`ItemTexts`)
    keeps its text: saved documents must not be changed in place. The usual
    save (the last one's items, the same objects, and a few new ones) finds
    the shared prefix at C speed and encodes only the new items.
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
    shared = 0 if reuse is None else _identical_prefix(reuse.sources, transcript)
    encoded: list[str] = []  # the items from ``shared`` on
    known: dict[int, tuple[object, str]] | None = None
    try:
        for index in range(shared, len(transcript)):
            item = transcript[index]
            if reuse is not None and shared < len(reuse.sources):
                # Not an appended tail (a compaction, an edit): look items up by identity.
                if known is None:
                    known = {
                        id(source): (source, text)
                        for source, text in zip(reuse.sources, reuse.items, strict=True)
                    }
                found = known.get(id(item))
                if found is not None and found[0] is item:
                    encoded.append(found[1])
                    continue
            where = f"checkpoint['transcript'][{index}]"
            if not isinstance(item, dict):
                raise ValueError(f"{where} has type {type(item).__name__}, expected an item object")
            encoded.append(encode_json(item, where))
        head_text = encode_json(head, "checkpoint")
    except ValueError as error:
        raise CheckpointError(f"{prefix}: {error}; {_FIX}") from None
    kept = () if reuse is None else reuse.items[:shared]  # no copy when all are kept
    return EncodedCheckpoint(session_id, head_text, kept + tuple(encoded), tuple(transcript))


def _identical_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading elements of ``old`` and ``new`` are the very same objects.

    Compared in C, by address: the objects themselves are not touched.
    """
    same = list(map(operator.is_, old, new))
    try:
        return same.index(False)
    except ValueError:
        return len(same)


def common_prefix_length(old: Sequence[str], new: Sequence[str]) -> int:
    """How many leading items ``old`` and ``new`` share: the first position to rewrite."""
    shared = _identical_prefix(old, new)  # the usual case: the last save's very texts
    for before, after in zip(old[shared:], new[shared:], strict=False):
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


def decode_stored(
    session_id: str,
    head: object,
    rows: Sequence[tuple[object, object]],
    item_count: int | None = None,
) -> tuple[dict[str, Any], list[Item]]:
    """Validate and decode a session's stored head and ``(position, item)`` rows.

    Returns the document and its items. Raises ``CheckpointError`` naming the
    session and the row when the head is not a JSON checkpoint head of this
    session, an item row is not JSON or not an agentloop item, a position is
    missing or out of order, or fewer/more rows than ``item_count`` exist.
    Nothing is returned then, so nothing half-restores.
    """
    prefix = f"cannot load session {session_id!r}"
    fix = "the store is damaged: restore it from a backup or delete the session"
    document = _decode_head(session_id, head, f"{prefix}: its head row", fix)
    transcript: list[Any] = []
    items: list[Item] = []
    for expected, (position, text) in enumerate(rows):
        if position != expected:
            raise CheckpointError(
                f"{prefix}: item row {expected} is missing (the next row is at position "
                f"{position!r}); {fix}"
            )
        where = f"{prefix}: item row {expected}"
        data = _decode_json(text, where, fix)
        try:
            items.append(_serde.structure(data, Item))
        except Exception as error:
            raise CheckpointError(
                f"{where} is not an agentloop item ({describe_item_error(error)}); {fix}"
            ) from None
        transcript.append(data)
    if item_count is not None and item_count != len(transcript):
        raise CheckpointError(
            f"{prefix}: item row {min(item_count, len(transcript))} is "
            f"{'missing' if item_count > len(transcript) else 'extra'} (its head row counts "
            f"{item_count} items, {len(transcript)} item rows exist); {fix}"
        )
    document["transcript"] = transcript
    return document, items


def _decode_json(text: object, where: str, fix: str) -> Any:
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(f"{where} is not UTF-8 text; {fix}") from None
    if not isinstance(text, str):
        raise CheckpointError(f"{where} holds {type(text).__name__}, expected JSON text; {fix}")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as error:
        reason = (
            f"{error.msg} at column {error.colno}"
            if isinstance(error, json.JSONDecodeError)
            else str(error)
        )
        raise CheckpointError(f"{where} is not JSON ({reason}); {fix}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _decode_head(session_id: str, head: object, where: str, fix: str) -> dict[str, Any]:
    data = _decode_json(head, where, fix)
    if not isinstance(data, dict):
        raise CheckpointError(f"{where} holds {type(data).__name__}, expected an object; {fix}")
    problem: str | None = None
    version = data.get("version")
    if data.get("format") != CHECKPOINT_FORMAT:
        problem = f"format {data.get('format')!r}, expected {CHECKPOINT_FORMAT!r}"
    elif not isinstance(version, int) or isinstance(version, bool) or version < 1:
        problem = f"version {version!r}, expected an integer >= 1"
    elif data.get("session_id") != session_id:
        problem = f"session_id {data.get('session_id')!r}, expected {session_id!r}"
    elif "transcript" in data:
        problem = "a 'transcript' key, which belongs in item rows"
    if problem is not None:
        raise CheckpointError(f"{where} has {problem}; {fix}")
    return data
