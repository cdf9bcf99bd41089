"""Checkpoint documents as stores keep them: a head text, item rows and turn rows.

Plain synchronous functions shared by every store. A document is split into
its transcript items (one JSON text each, so a store writes only the items
that changed), the elements of the turn's append-only lists
(:data:`TURN_LISTS`: its items, tool calls and model-call records, rows too,
so a save within a long turn writes only what the turn added) and its head
(everything else, one JSON text holding ``[]`` where those lists are).

Items have one codec, the package's converter (``loop._converter``): an item
a save encodes afresh must structure as an :class:`Item`, and every item row
a load reads is structured again; the store's own records go through the
same converter (:mod:`._records`). JSON text is strict both ways: a value
JSON would not give back exactly (a tuple, a non-string key, NaN, an object)
is refused naming where it is, so a loaded document is deep-equal to the
saved one. A save is encoded in O(what changed): a transcript item, an
element of a turn list or an object of the head that is the very object the
session's last save encoded keeps its text (:func:`reuse_documents`, as
``driver.checkpoint()`` keeps the documents of unchanged values), so saved
documents must not be changed in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from ..core._errors import CheckpointError
from ..core._items import Item
from ..loop import _converter
from ..loop._checkpoint import CHECKPOINT_FORMAT
from ..loop._checkpoint_memo import identical_prefix, reuse_documents
from ._json import (
    check_json,
    compact,
    describe_error,
    is_plain_json,
    json_text,
    key_text,
    parse_json,
)

__all__ = [
    "TURN_LISTS",
    "EncodedCheckpoint",
    "answered_from",
    "decode_stored",
    "encode_checkpoint",
    "first_change",
    "turn_counts",
    "turn_starts",
]

TURN_LISTS = ("items", "model_calls_made", "tool_calls")
"""The lists of the head's ``turn`` a store keeps as rows (sorted: the rows' order)."""

TurnTexts = dict[str, tuple[str, ...]]
"""The element texts of the turn's lists kept as rows, by list name (non-empty lists only)."""

Encoded = tuple[tuple[object, ...], tuple[str, ...]]
"""Values a save encoded and their texts, in order."""

_SAVE_FIX = "save the document driver.checkpoint() returns, unchanged"
_LOAD_FIX = "the store is damaged: restore it from a backup or delete the session"


@attrs.frozen
class EncodedCheckpoint:
    """A validated document: ``head`` is its JSON without the transcript and the turn's
    lists, ``items`` each transcript item's, ``turn`` each turn list element's.

    ``kept`` leading items are the very texts of ``base`` (the encoding this
    one reused); ``encoded`` keeps every slot's values with their texts for
    the next save, ``answers`` the call ids each item structured afresh
    answers (by the item's ``id``).
    """

    session_id: str
    head: str
    items: tuple[str, ...]
    turn: TurnTexts = attrs.field(factory=dict)
    kept: int = attrs.field(default=0, eq=False, repr=False)
    base: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    encoded: dict[object, Encoded] = attrs.field(factory=dict, eq=False, repr=False)
    answers: dict[int, frozenset[str]] = attrs.field(factory=dict, eq=False, repr=False)


def header_problem(document: Mapping[str, Any], session_id: str) -> str | None:
    """What is wrong with a document's ``format``, ``version`` or ``session_id`` (``None``:
    nothing), as "the document has ..." says it."""
    version = document.get("version")
    if document.get("format") != CHECKPOINT_FORMAT:
        return f"format {document.get('format')!r}, expected {CHECKPOINT_FORMAT!r}"
    if type(version) is not int or version < 1:
        return f"version {version!r}, expected an integer >= 1"
    if document.get("session_id") != session_id:
        return f"session_id {document.get('session_id')!r}, expected {session_id!r}"
    return None


def encode_checkpoint(
    session_id: str, checkpoint: Mapping[str, Any], reuse: EncodedCheckpoint | None = None
) -> EncodedCheckpoint:
    """Validate ``checkpoint`` for ``session_id`` and encode it; ``CheckpointError`` if it is bad.

    Checks the header, that ``transcript`` is a list of objects that
    structure as items, and that every value is exact JSON. A value that is
    the very object ``reuse`` (the session's last save) encoded keeps its
    text (it was checked then), so the usual save encodes only what is new.
    """
    prefix = f"cannot save checkpoint for session {session_id!r}"
    if not isinstance(checkpoint, Mapping):
        raise CheckpointError(
            f"{prefix}: expected a mapping, found {type(checkpoint).__name__}; {_SAVE_FIX}"
        )
    problem = header_problem(checkpoint, session_id)
    if problem is not None:
        fix = "save it under its own session id" if "session_id" in problem else _SAVE_FIX
        raise CheckpointError(f"{prefix}: the document has {problem}; {fix}")
    transcript = checkpoint.get("transcript")
    if not isinstance(transcript, list):
        raise CheckpointError(
            f"{prefix}: expected a 'transcript' list, found {type(transcript).__name__}; "
            + _SAVE_FIX
        )
    encoder = _Encoder({} if reuse is None else reuse.encoded)
    try:
        items, kept = encoder.texts("transcript", transcript, encoder.item)
        head = encoder.head(checkpoint)
    except _NotAnItem as bad:
        raise CheckpointError(
            f"{prefix}: transcript item {bad.index} is not an agentloop item "
            f"({describe_error(bad.error)}); {_SAVE_FIX}"
        ) from None
    except ValueError as error:
        raise CheckpointError(f"{prefix}: {error}; {_SAVE_FIX}") from None
    except RecursionError:
        raise CheckpointError(
            f"{prefix}: a value holds itself (a cycle) or is nested too deeply for JSON; "
            + _SAVE_FIX
        ) from None
    base = () if reuse is None else reuse.items
    return EncodedCheckpoint(
        session_id, head, items, encoder.turn, kept, base, encoder.encoded, encoder.answers
    )


class _NotAnItem(Exception):
    def __init__(self, index: int, error: Exception) -> None:
        self.index, self.error = index, error


class _Encoder:
    """One save's encoding: each slot's texts, reused from ``old`` for the very same values.

    A slot is the transcript, one turn list, or one object member of the
    head. An element of a turn list that is one of this save's new
    transcript items (by identity) takes that item's text. A new item whose
    text is the last save's item text at its position was checked then: the
    same JSON, the same decision (so a document built anew, not from the last
    one's objects, costs the encoding of its items, not their structuring).
    """

    def __init__(self, old: dict[object, Encoded]) -> None:
        self._old = old
        self._checked = old.get("transcript", ((), ()))[1]  # the last save's item texts
        self._fresh: dict[int, str] = {}  # this save's new items' texts, by id
        self.encoded: dict[object, Encoded] = {}
        self.turn: TurnTexts = {}
        self.answers: dict[int, frozenset[str]] = {}

    def texts(
        self, slot: object, values: Sequence[Any], write: Callable[[int, Any], str]
    ) -> tuple[tuple[str, ...], int]:
        """The texts of ``values`` and how many leading ones were kept from the last save."""
        old_values, old_texts = self._old.get(slot, ((), ()))
        texts, kept = reuse_documents(old_values, old_texts, values, write)
        encoded = self.encoded[slot] = (tuple(values), tuple(texts))
        return encoded[1], kept

    def item(self, index: int, value: Any) -> str:
        """A new transcript item's text, checked to be JSON and to structure as an item."""
        if not isinstance(value, dict):
            raise ValueError(
                f"checkpoint['transcript'][{index}] has type {type(value).__name__}, "
                "expected an item object"
            )
        text = _text_at(value, ("transcript", index))
        checked = self._checked
        if index < len(checked) and checked[index] == text:
            self.answers[id(value)] = answered_call_ids(value)
        else:
            try:
                item: Item = _converter.structure(value, Item)
            except Exception as error:
                raise _NotAnItem(index, error) from None
            self.answers[id(value)] = frozenset(part.call_id for part in item.tool_results())
        self._fresh[id(value)] = text
        return text

    def head(self, checkpoint: Mapping[str, Any]) -> str:
        """The head's text: member by member, the turn's lists as ``[]``."""
        members: list[str] = []
        for key, value in checkpoint.items():
            if type(key) is not str:  # named (or, a str subclass, accepted) by ``json_text``
                self._inline()
                head = {k: v for k, v in checkpoint.items() if k != "transcript"}
                return json_text(head, "checkpoint")
            if key == "transcript":
                continue
            if type(value) is not dict:
                text = _text_at(value, (key,))
            elif key == "turn":
                text = self._turn(value)
            else:
                (text,), _kept = self.texts(("head", key), (value,), _writer((key,)))
            members.append(key_text(key) + text)
        return "{" + ",".join(members) + "}"

    def _turn(self, turn: dict[Any, Any]) -> str:
        members: list[str] = []
        for key, value in turn.items():
            if type(key) is not str:
                self._inline()
                return _text_at(turn, ("turn",))
            if key in TURN_LISTS and type(value) is list and value:
                self.turn[key], _kept = self.texts(key, value, self._turn_element(key))
                text = "[]"  # rows of their own
            else:
                text = _text_at(value, ("turn", key))
            members.append(key_text(key) + text)
        return "{" + ",".join(members) + "}"

    def _turn_element(self, name: str) -> Callable[[int, Any], str]:
        fresh, write = self._fresh, _writer(("turn", name))

        def element(index: int, value: Any) -> str:
            found = fresh.get(id(value)) if type(value) is dict else None
            return write(index, value) if found is None else found

        return element

    def _inline(self) -> None:
        """The turn's lists are written inside the head (no rows), with nothing reused."""
        self.turn.clear()
        for name in TURN_LISTS:
            self.encoded.pop(name, None)


def _writer(path: tuple[object, ...]) -> Callable[[int, Any], str]:
    """Writes the text of an element at ``path`` (the index added, for a list)."""
    if path[0] == "turn":
        return lambda index, value: _text_at(value, (*path, index))
    return lambda _index, value: _text_at(value, path)


def _text_at(value: Any, path: tuple[object, ...]) -> str:
    """``value``'s text; ``ValueError`` naming where in the document a non-JSON value is
    (the name built only then)."""
    if not is_plain_json(value):
        check_json(value, "checkpoint" + "".join(f"[{step!r}]" for step in path))
    return compact(value)


def turn_counts(turn: TurnTexts) -> str | None:
    """How many rows each of the turn's lists has, as stored beside the head (``None``: none)."""
    return compact({name: len(texts) for name, texts in turn.items()}) if turn else None


def turn_starts(stored: TurnTexts, encoded: EncodedCheckpoint) -> dict[str, int]:
    """For every turn list, the first position a save of ``encoded`` rewrites over ``stored``
    (a list no longer there starts at 0: its rows go)."""
    return {
        name: common_prefix_length(stored.get(name, ()), encoded.turn.get(name, ()))
        for name in TURN_LISTS
    }


def first_change(stored: Sequence[str], encoded: EncodedCheckpoint) -> int:
    """The first position a save of ``encoded`` rewrites over the item rows ``stored``
    (known without comparing when they are the very texts ``encoded`` reused, all kept)."""
    if stored is encoded.base and encoded.kept == len(stored):
        return len(stored)
    return common_prefix_length(stored, encoded.items)


def common_prefix_length(old: Sequence[str], new: Sequence[str]) -> int:
    """How many leading texts ``old`` and ``new`` share: the first position to rewrite."""
    shared = identical_prefix(old, new)  # the usual case: the last save's very texts
    for before, after in zip(old[shared:], new[shared:], strict=False):
        if before != after:
            break
        shared += 1
    return shared


def answered_from(encoded: EncodedCheckpoint, start: int) -> frozenset[str]:
    """The call ids the items of ``encoded`` from position ``start`` on answer (an item
    whose text was reused is read again)."""
    answered: set[str] = set()
    values = encoded.encoded["transcript"][0]
    for position in range(start, len(values)):
        found = encoded.answers.get(id(values[position]))
        if found is None:
            found = answered_call_ids(json.loads(encoded.items[position]))
        answered.update(found)
    return frozenset(answered)


def answered_call_ids(item: Mapping[str, Any]) -> frozenset[str]:
    """The ``call_id`` of every ``tool_result`` part of an unstructured item."""
    return frozenset(
        part["call_id"]
        for part in item.get("parts", ())
        if isinstance(part, Mapping) and part.get("type") == "tool_result"
    )


# -- loads ---------------------------------------------------------------------------


def decode_stored(
    session_id: str,
    head: object,
    rows: Sequence[object],
    item_count: int | None = None,
    turn_rows: Mapping[str, Sequence[object]] | None = None,
    counts: object = None,
) -> tuple[dict[str, Any], list[Item]]:
    """Validate and decode a session's stored head, item rows and turn rows.

    ``turn_rows`` are the rows of each turn list, ``counts`` the text
    :func:`turn_counts` gave (``None``: no rows, as in a head written before
    they existed, which holds its lists inline). Returns the document and its
    items. Raises ``CheckpointError`` naming the session and the row when the
    head is not a checkpoint head of this session, a row is not JSON, an item
    row is not an agentloop item, or fewer/more rows than ``item_count`` or
    ``counts`` say exist, so nothing half-restores.
    """
    prefix = f"cannot load session {session_id!r}"
    document = _decode_head(session_id, head, f"{prefix}: its head row")
    transcript: list[Any] = []
    items: list[Item] = []
    for position, text in enumerate(rows):
        where = f"{prefix}: item row {position}"
        data = _decode_json(text, where)
        try:
            items.append(_converter.structure(data, Item))
        except Exception as error:
            raise CheckpointError(
                f"{where} is not an agentloop item ({describe_error(error)}); {_LOAD_FIX}"
            ) from None
        transcript.append(data)
    _check_count(
        partial("{}: item row {}".format, prefix),
        len(transcript),
        item_count,
        "items",
        "item rows ",
    )
    _put_turn_rows(document, turn_rows or {}, counts, prefix)
    document["transcript"] = transcript
    return document, items


def _check_count(
    row: Callable[[int], str], found: int, expected: int | None, counted: str, rows: str
) -> None:
    """Refuse ``found`` rows where the head row counts ``expected`` (``None``: not counted)."""
    if expected is not None and expected != found:
        raise CheckpointError(
            f"{row(min(expected, found))} is {'missing' if expected > found else 'extra'} "
            f"(its head row counts {expected} {counted}, {found} {rows}exist); {_LOAD_FIX}"
        )


def _put_turn_rows(
    document: dict[str, Any], rows: Mapping[str, Sequence[object]], counts: object, prefix: str
) -> None:
    """Put the turn's list rows back into ``document``'s head (see :func:`decode_stored`)."""
    expected = _decode_counts(counts, f"{prefix}: its head row's turn counts")
    for name, found in rows.items():
        if found and name not in expected:
            raise CheckpointError(
                f"{prefix}: turn row {name!r}[0] is extra (its head row counts no {name!r} "
                f"rows); {_LOAD_FIX}"
            )
    turn = document.get("turn")
    for name, count in expected.items():
        if not isinstance(turn, dict) or turn.get(name) != []:
            raise CheckpointError(
                f"{prefix}: its head row holds no empty turn[{name!r}] list for its {count} "
                f"turn rows; {_LOAD_FIX}"
            )
        texts = rows.get(name, ())
        row = f"{prefix}: turn row {name!r}"
        values = [_decode_json(text, f"{row}[{index}]") for index, text in enumerate(texts)]
        _check_count(partial("{}[{}]".format, row), len(values), count, f"{name!r} rows", "")
        turn[name] = values


def _decode_counts(counts: object, where: str) -> dict[str, int]:
    """The row count of each turn list, from the stored text (``None``: no rows)."""
    if counts is None:
        return {}
    data = _decode_json(counts, where)
    if not isinstance(data, dict) or not all(
        name in TURN_LISTS and type(count) is int and count > 0 for name, count in data.items()
    ):
        shown = repr(data) if len(repr(data)) <= 80 else repr(data)[:77] + "..."
        raise CheckpointError(
            f"{where} are {shown}, expected an object of row counts > 0 for "
            f"{', '.join(TURN_LISTS)}; {_LOAD_FIX}"
        )
    return data


def _decode_json(text: object, where: str) -> Any:
    try:
        return parse_json(text)
    except ValueError as error:
        raise CheckpointError(f"{where} {error}; {_LOAD_FIX}") from None


def _decode_head(session_id: str, head: object, where: str) -> dict[str, Any]:
    data = _decode_json(head, where)
    if not isinstance(data, dict):
        raise CheckpointError(
            f"{where} holds {type(data).__name__}, expected an object; {_LOAD_FIX}"
        )
    problem = header_problem(data, session_id)
    if problem is None and "transcript" in data:
        problem = "a 'transcript' key, which belongs in item rows"
    if problem is not None:
        raise CheckpointError(f"{where} has {problem}; {_LOAD_FIX}")
    return data
