"""Checkpoint documents as stores keep them: a head text, item rows and turn rows.

Plain synchronous functions shared by every store (docs/store.md, "Damaged
rows fail closed" and "Saves cost O(new items)"). A document is split into
its transcript items (one JSON text each), the elements of the turn's lists
in :data:`TURN_LISTS` (rows too) and its head (everything else, one JSON
text holding ``[]`` where those lists are). Items have one codec, the
package's converter: an item a save encodes afresh must structure as an
:class:`Item`, and every item row a load reads is structured again. JSON
text is strict both ways (:mod:`._json`), so a loaded document is deep-equal
to the saved one. A value that is the very object the session's last save
encoded keeps its text (:func:`reuse_documents`), so a save is encoded in
O(what changed) and saved documents must not be changed in place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from ..core._errors import CheckpointError
from ..core._items import Item
from ..loop import _converter
from ..loop._checkpoint import CHECKPOINT_FORMAT
from ..loop._checkpoint_memo import identical_prefix, reuse_documents
from ._json import compact, describe_error, json_text, key_text, parse_json

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
    the next save.
    """

    head: str
    items: tuple[str, ...]
    turn: TurnTexts = attrs.field(factory=dict)
    kept: int = attrs.field(default=0, eq=False, repr=False)
    base: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    encoded: dict[object, Encoded] = attrs.field(factory=dict, eq=False, repr=False)


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
    except ValueError as error:
        raise CheckpointError(f"{prefix}: {error}; {_SAVE_FIX}") from None
    except RecursionError:
        raise CheckpointError(
            f"{prefix}: a value holds itself (a cycle) or is nested too deeply for JSON; "
            + _SAVE_FIX
        ) from None
    base = () if reuse is None else reuse.items
    return EncodedCheckpoint(head, items, encoder.turn, kept, base, encoder.encoded)


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
        text = json_text(value, "checkpoint", "transcript", index)
        checked = self._checked
        if index >= len(checked) or checked[index] != text:
            try:
                _converter.structure(value, Item)
            except Exception as error:
                raise ValueError(
                    f"transcript item {index} is not an agentloop item ({describe_error(error)})"
                ) from None
        self._fresh[id(value)] = text
        return text

    def head(self, checkpoint: Mapping[str, Any]) -> str:
        """The head's text: member by member, the turn's lists as ``[]`` (their rows apart).

        A key that is not a plain ``str`` (``json_text`` refuses it, or accepts a
        ``str`` subclass) has the head written whole instead: its turn lists inline,
        nothing reused.
        """
        turn = checkpoint.get("turn")
        if any(type(key) is not str for key in checkpoint) or (
            type(turn) is dict and any(type(key) is not str for key in turn)
        ):
            head = {key: value for key, value in checkpoint.items() if key != "transcript"}
            return json_text(head, "checkpoint")
        members: list[str] = []
        for key, value in checkpoint.items():
            if key == "transcript":
                continue
            if type(value) is not dict:
                text = json_text(value, "checkpoint", key)
            elif key == "turn":
                text = self._turn(value)
            else:
                write = partial(_member_text, key)
                (text,), _kept = self.texts(("head", key), (value,), write)
            members.append(key_text(key) + text)
        return "{" + ",".join(members) + "}"

    def _turn(self, turn: dict[str, Any]) -> str:
        members: list[str] = []
        for key, value in turn.items():
            if key in TURN_LISTS and type(value) is list and value:
                self.turn[key], _kept = self.texts(key, value, self._turn_element(key))
                text = "[]"  # rows of their own
            else:
                text = json_text(value, "checkpoint", "turn", key)
            members.append(key_text(key) + text)
        return "{" + ",".join(members) + "}"

    def _turn_element(self, name: str) -> Callable[[int, Any], str]:
        fresh = self._fresh

        def element(index: int, value: Any) -> str:
            found = fresh.get(id(value)) if type(value) is dict else None
            return json_text(value, "checkpoint", "turn", name, index) if found is None else found

        return element


def _member_text(key: str, _index: int, value: Any) -> str:
    return json_text(value, "checkpoint", key)


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
    """The call ids the transcript items of ``encoded`` from position ``start`` on answer."""
    items: Sequence[Any] = encoded.encoded["transcript"][0]
    answered: set[str] = set()
    for item in items[start:]:
        answered.update(answered_call_ids(item))
    return frozenset(answered)


def answered_call_ids(item: Mapping[str, Any]) -> frozenset[str]:
    """The ``call_id`` of every ``tool_result`` part of an unstructured item (the same
    calls as the structured item's ``tool_results()``)."""
    return frozenset(
        part["call_id"]
        for part in item.get("parts", ())
        if (type(part) is dict or isinstance(part, Mapping)) and part.get("type") == "tool_result"
    )


# -- loads ---------------------------------------------------------------------------


def decode_stored(
    session_id: str,
    head: object,
    rows: Sequence[object],
    item_count: int,
    turn_rows: Mapping[str, Sequence[object]],
    counts: object,
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
    item_row = partial("{}: item row {}".format, prefix)
    _check_count(item_row, len(transcript), item_count, "items", "item rows ")
    _put_turn_rows(document, turn_rows, _decode_counts(counts, prefix), prefix)
    document["transcript"] = transcript
    return document, items


def _check_count(
    row: Callable[[int], str], found: int, expected: int, counted: str, rows: str
) -> None:
    """Refuse ``found`` rows where the head row counts ``expected``; ``row(n)`` names row n."""
    if expected != found:
        raise CheckpointError(
            f"{row(min(expected, found))} is {'missing' if expected > found else 'extra'} "
            f"(its head row counts {expected} {counted}, {found} {rows}exist); {_LOAD_FIX}"
        )


def _put_turn_rows(
    document: dict[str, Any],
    rows: Mapping[str, Sequence[object]],
    counts: dict[str, int],
    prefix: str,
) -> None:
    """Put the turn's list rows back into ``document``'s head, ``counts`` of each list."""
    for name, found in rows.items():
        if found and name not in counts:
            raise CheckpointError(
                f"{prefix}: turn row {name!r}[0] is extra (its head row counts no {name!r} "
                f"rows); {_LOAD_FIX}"
            )
    turn = document.get("turn")
    for name, count in counts.items():
        if not isinstance(turn, dict) or turn.get(name) != []:
            raise CheckpointError(
                f"{prefix}: its head row holds no empty turn[{name!r}] list for its {count} "
                f"turn rows; {_LOAD_FIX}"
            )
        row = f"{prefix}: turn row {name!r}"
        texts = rows.get(name, ())
        values = [_decode_json(text, f"{row}[{index}]") for index, text in enumerate(texts)]
        _check_count(partial("{}[{}]".format, row), len(values), count, f"{name!r} rows", "")
        turn[name] = values


def _decode_counts(counts: object, prefix: str) -> dict[str, int]:
    """The row count of each turn list, from the stored text (``None``: no rows)."""
    if counts is None:
        return {}
    where = f"{prefix}: its head row's turn counts"
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
