"""Checkpoint documents as stores see them: validation, encoding, decoding.

Plain synchronous functions shared by every store. A document is split into
its transcript items (one JSON text each, so a store can write only the
items that changed) and its head (everything else, one JSON text). Encoding
is strict: a value JSON would not give back exactly (a tuple, a non-string
key, NaN, an object) is refused, so a loaded document is always deep-equal
to the saved one.

A save is encoded in O(what changed): the text of every transcript item, of
every element of the head's lists (the turn's items, tool calls and model
calls grow append-only within a turn) and of the head's objects (the
session's config) is kept with the very object it was encoded from, and an
object handed to the next save again keeps its text (see
:func:`encode_checkpoint`).

The turn in progress has three lists that grow append-only within the turn
(:data:`TURN_LISTS`: its items, tool calls and model call records). A store
keeps their elements as rows, like transcript items, so a save within a
long turn writes only what the turn added: the head's text holds an empty
list at those places, :attr:`EncodedCheckpoint.turn` the element texts, and
:func:`decode_stored` puts the rows back. A head written before (the lists
inline, no rows) loads as it always did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from json.encoder import (  # type: ignore[attr-defined]  # not in typeshed
    c_make_encoder,
    encode_basestring,
)
from typing import Any

import attrs

from ..core._errors import CheckpointError
from ..core._items import Item
from ..loop import _converter
from ..loop._checkpoint import CHECKPOINT_FORMAT
from ..loop._checkpoint_memo import identical_prefix
from ._item_check import NO_ANSWERS, usual_item_answers
from ._stored import (
    TURN_LISTS,
    TurnTexts,
    decode_stored,
    describe_item_error,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "TURN_LISTS",
    "EncodedCheckpoint",
    "TurnTexts",
    "answered_call_ids",
    "answered_from",
    "common_prefix_length",
    "decode_stored",
    "describe_item_error",
    "encode_checkpoint",
    "encode_json",
    "first_change",
    "turn_counts",
    "turn_starts",
]

_FIX = "save the document driver.checkpoint() returns, unchanged"


Path = tuple[str, ...]
"""Where a value sits in the head: its key, or its key and the key inside that object."""

HeadTexts = dict[Path, tuple[object, str]]
"""The head's objects (one and two levels down), each with its text."""

ListTexts = dict[Path, tuple[tuple[object, ...], tuple[str, ...]]]
"""The head's lists (one and two levels down): their elements, and each element's text."""

_TURN_PATHS = frozenset(("turn", name) for name in TURN_LISTS)


@attrs.frozen
class EncodedCheckpoint:
    """A validated document: ``head`` is its JSON without the transcript, ``items`` each item's.

    ``sources`` are the transcript's item objects, so the next save can reuse
    the text of an item that is the very same object;
    ``parts`` and ``lists`` do the same for the head's objects and for the
    elements of its lists.
    """

    session_id: str
    head: str
    items: tuple[str, ...]
    sources: tuple[object, ...] = attrs.field(default=(), eq=False, repr=False)
    base: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    """The ``items`` of the encoding this one reused (``reuse``), and how many it kept."""
    kept: int = attrs.field(default=0, eq=False, repr=False)
    parts: HeadTexts = attrs.field(factory=dict, eq=False, repr=False)
    lists: ListTexts = attrs.field(factory=dict, eq=False, repr=False)
    answers: dict[int, frozenset[str]] = attrs.field(factory=dict, eq=False, repr=False)
    """The call ids each item encoded afresh answers, by position (all checked to be items)."""
    turn: TurnTexts = attrs.field(factory=dict)
    """The element texts of the turn's lists (:data:`TURN_LISTS`) that are rows, not in ``head``."""


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
)
"""No cycle check here: :func:`encode_json` walks every value first (a cycle raises there)."""

_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False
    )
)
"""What ``_ENCODER.encode`` calls for a list or dict, made once instead of per call."""


def _encode(value: Any) -> str:
    """``_ENCODER.encode(value)``, without its per-call setup (the same text: the same encoder)."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def encode_json(value: Any, where: str) -> str:
    """``value`` as compact JSON text; ``ValueError`` naming the path of a non-JSON value."""
    if not _is_plain_json(value):
        _check_json(value, where)  # names the offending path, or accepts subclasses
    return _encode(value)


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
    ``transcript`` is a list of objects, that every value is exact JSON and
    that every item encoded afresh is an agentloop item (an item whose text
    is reused was checked when it was encoded). An item that is
    the very object encoded last time (``reuse``, the session's last save)
    keeps its text: saved documents must not be changed in place. The usual
    save (the last one's items, the same objects, and a few new ones) finds
    the shared prefix at C speed and encodes only the new items. The head is
    encoded the same way (see :class:`_HeadEncoder`): an object or list
    element that is the very one encoded last time keeps its text, and a
    list element that is one of this save's new transcript items takes that
    item's text.
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
    shared = 0 if reuse is None else identical_prefix(reuse.sources, transcript)
    encoded: list[str] = []  # the items from ``shared`` on
    fresh_items: list[tuple[int, Any]] = []  # encoded afresh: position, plain data or None
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
            plain = _is_plain_json(item)  # then the item is its text's very data
            if not plain:
                _check_json(item, where)
            encoded.append(_encode(item))
            fresh_items.append((index, item if plain else None))
        # This save's new items, by identity: the turn's list of items holds them too.
        fresh = {id(transcript[shared + index]): text for index, text in enumerate(encoded)}
        head = _HeadEncoder(reuse, fresh)
        head_text = head.encode(checkpoint)
    except ValueError as error:
        raise CheckpointError(f"{prefix}: {error}; {_FIX}") from None
    except RecursionError:
        raise CheckpointError(
            f"{prefix}: a value holds itself (a cycle) or is nested too deeply for JSON; {_FIX}"
        ) from None
    answers = _check_items(prefix, fresh_items, encoded, shared)
    base = () if reuse is None else reuse.items
    return EncodedCheckpoint(
        session_id,
        head_text,
        base[:shared] + tuple(encoded),  # no copy of the kept texts when all are kept
        tuple(transcript),
        base,
        shared,
        head.parts,
        head.lists,
        answers,
        head.turn(),
    )


def _check_items(
    prefix: str, fresh_items: list[tuple[int, Any]], encoded: list[str], shared: int
) -> dict[int, frozenset[str]]:
    """Check that the items encoded afresh are agentloop items; the call ids each answers."""
    answers: dict[int, frozenset[str]] = {}
    for position, plain in fresh_items:
        found = None if plain is None else usual_item_answers(plain)
        if found is not None:
            answers[position] = found
            continue
        data = json.loads(encoded[position - shared]) if plain is None else plain
        try:
            _converter.structure(data, Item)
        except Exception as error:
            raise CheckpointError(
                f"{prefix}: transcript item {position} is not an agentloop item "
                f"({describe_item_error(error)}); {_FIX}"
            ) from None
        answered = answered_call_ids((data,))
        answers[position] = frozenset(answered) if answered else NO_ANSWERS
    return answers


@lru_cache(maxsize=1024)
def _key_text(key: str) -> str:
    """A member's key as JSON text, with the colon."""
    return encode_basestring(key) + ":"


class _HeadEncoder:
    """Encodes a document without its transcript, reusing the texts of unchanged parts.

    The text is exactly ``encode_json(head)``'s: each object is written key
    by key in order, each list element by element. One and two levels down,
    an object that is the very one encoded last time at the same place
    (``reuse.parts``) keeps its text, and so does each element of a list
    from the start up to the first element that is not the very one encoded
    there last time (``reuse.lists``, compared at C speed against a copy, so
    a list grown in place is seen); an element that is one of this save's
    new transcript items (``fresh``, by identity) takes that item's text.
    Only the rest is checked and encoded. The turn's lists (:data:`TURN_LISTS`)
    are written as ``[]``: their texts are rows (:meth:`turn`).
    """

    def __init__(self, reuse: EncodedCheckpoint | None, fresh: dict[int, str]) -> None:
        self._old_parts: HeadTexts = {} if reuse is None else reuse.parts
        self._old_lists: ListTexts = {} if reuse is None else reuse.lists
        self._fresh = fresh  # by id: the caller keeps these items alive while it encodes
        self.parts: HeadTexts = {}
        self.lists: ListTexts = {}

    def encode(self, checkpoint: Mapping[str, Any]) -> str:
        """The head's text; ``ValueError`` naming the path of a value that is not JSON."""
        members: list[str] = []
        for key, value in checkpoint.items():
            if type(key) is not str:  # named (or, for a str subclass, accepted) there
                head = {k: v for k, v in checkpoint.items() if k != "transcript"}
                self.parts.clear()  # the text is written whole: no part of it is reused
                self.lists.clear()
                return encode_json(head, "checkpoint")
            if key != "transcript":
                members.append(_key_text(key) + self._member(value, (key,)))
        return "{" + ",".join(members) + "}"

    def _member(self, value: Any, path: Path) -> str:
        """The text of ``value``, at ``path`` in the document."""
        kind = type(value)
        if kind is str:
            return encode_basestring(value)
        if kind is int:
            return int.__repr__(value)
        if kind is bool or value is None:
            return "true" if value is True else "false" if value is False else "null"
        if kind is list:  # element by element (a list grown in place is seen)
            return self._list(value, path)
        if kind is not dict:  # a float, or what is not JSON
            return _encode_at(value, path)
        old = self._old_parts.get(path)
        if old is not None and old[0] is value:
            self._keep_below(path)
            text = old[1]
        elif len(path) == 1:
            text = self._object(value, path)
        else:
            text = _encode_at(value, path)
        self.parts[path] = (value, text)
        return text

    def _keep_below(self, path: Path) -> None:
        """Carry the texts found inside an object kept whole over to the next save."""
        depth = len(path)
        for inner, texts in self._old_lists.items():
            if inner[:depth] == path:
                self.lists[inner] = texts
        if depth == 1:
            for inner, part in self._old_parts.items():
                if len(inner) > 1 and inner[0] == path[0]:
                    self.parts[inner] = part

    def _object(self, value: dict[Any, Any], path: Path) -> str:
        members: list[str] = []
        for key, element in value.items():
            if type(key) is not str:
                for inner in [inner for inner in self.lists if inner[: len(path)] == path]:
                    del self.lists[inner]  # written inline below, not as rows
                return encode_json(value, _where(path))
            members.append(_key_text(key) + self._member(element, (*path, key)))
        return "{" + ",".join(members) + "}"

    def _list(self, values: list[Any], path: Path) -> str:
        if not values:
            return "[]"
        old_values, old_texts = self._old_lists.get(path, ((), ()))
        shared = identical_prefix(old_values, values)
        texts = list(old_texts[:shared])
        fresh = self._fresh
        for index in range(shared, len(values)):
            element = values[index]
            found = fresh.get(id(element)) if type(element) is dict else None
            texts.append(found if found is not None else _encode_at(element, (*path, index)))
        self.lists[path] = (tuple(values), tuple(texts))
        if path in _TURN_PATHS:
            return "[]"  # rows of their own (see ``turn``)
        return "[" + ",".join(texts) + "]"

    def turn(self) -> TurnTexts:
        """The element texts of the turn's non-empty lists, which the head holds as ``[]``."""
        lists = self.lists
        return {name: lists["turn", name][1] for name in TURN_LISTS if ("turn", name) in lists}


def _where(path: tuple[object, ...]) -> str:
    """Where ``path`` is in the document, as an error names it: ``checkpoint['turn'][0]``."""
    return "checkpoint" + "".join(f"[{step!r}]" for step in path)


def _encode_at(value: Any, path: tuple[object, ...]) -> str:
    """``encode_json`` of the value at ``path``, building the path's name only to check
    a value that is not plain JSON (once, not twice)."""
    if not _is_plain_json(value):
        _check_json(value, _where(path))
    return _encode(value)


def turn_counts(turn: TurnTexts) -> str | None:
    """How many rows each of the turn's lists has, as stored beside the head (``None``: none)."""
    if not turn:
        return None
    return _encode({name: len(texts) for name, texts in turn.items()})


def turn_starts(stored: TurnTexts, encoded: EncodedCheckpoint) -> dict[str, int]:
    """For every turn list, the first position a save of ``encoded`` rewrites over ``stored``.

    A list that is no longer there (a new turn, or none) starts at 0: its rows go.
    """
    return {
        name: common_prefix_length(stored.get(name, ()), encoded.turn.get(name, ()))
        for name in TURN_LISTS
    }


def first_change(stored: Sequence[str], encoded: EncodedCheckpoint) -> int:
    """The first position a save of ``encoded`` rewrites, over the item rows ``stored``.

    When ``stored`` are the very texts ``encoded`` reused, all kept (the usual
    save: the last one's items and new ones), that is their end, known
    without comparing them.
    """
    if stored is encoded.base and encoded.kept == len(stored):
        return len(stored)
    return common_prefix_length(stored, encoded.items)


def common_prefix_length(old: Sequence[str], new: Sequence[str]) -> int:
    """How many leading items ``old`` and ``new`` share: the first position to rewrite."""
    shared = identical_prefix(old, new)  # the usual case: the last save's very texts
    for before, after in zip(old[shared:], new[shared:], strict=False):
        if before != after:
            break
        shared += 1
    return shared


def answered_from(encoded: EncodedCheckpoint, start: int) -> frozenset[str]:
    """The call ids the items of ``encoded`` from position ``start`` on answer.

    Items encoded afresh were checked and their answers noted then; an item
    whose text was reused (checked when first encoded) is read again.
    """
    answered: set[str] = set()
    answers, items = encoded.answers, encoded.items
    for position in range(start, len(items)):
        found = answers.get(position)
        answered.update(
            answered_call_ids((json.loads(items[position]),)) if found is None else found
        )
    return frozenset(answered)


def answered_call_ids(items: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ``call_id`` of every ``tool_result`` part in unstructured ``items``."""
    return {
        part["call_id"]
        for item in items
        for part in item.get("parts", ())
        if isinstance(part, Mapping) and part.get("type") == "tool_result"
    }
