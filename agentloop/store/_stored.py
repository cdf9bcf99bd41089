"""Stored documents read back: a head, its item rows and its turn rows, validated.

Plain synchronous functions shared by every store (the writing side is
:mod:`._documents`). Everything a load returns is checked first: a damaged
or missing row raises ``CheckpointError`` naming the session and the row,
so nothing half-restores.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import cattrs

from ..core._errors import CheckpointError
from ..core._items import Item
from ..loop import _converter
from ..loop._checkpoint import CHECKPOINT_FORMAT

__all__ = [
    "TURN_LISTS",
    "TurnTexts",
    "decode_stored",
    "describe_item_error",
]

TURN_LISTS = ("items", "model_calls_made", "tool_calls")
"""The lists of the head's ``turn`` a store keeps as rows (sorted: the rows' order)."""

TurnTexts = dict[str, tuple[str, ...]]
"""The element texts of the turn's lists kept as rows, by list name (non-empty lists only)."""


def describe_item_error(error: Exception) -> str:
    """A one-line reason why structuring an item failed."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error))
    return f"{type(error).__name__}: {error}"


def decode_stored(
    session_id: str,
    head: object,
    rows: Sequence[tuple[object, object]],
    item_count: int | None = None,
    turn_rows: Sequence[tuple[object, object, object]] = (),
    counts: object = None,
) -> tuple[dict[str, Any], list[Item]]:
    """Validate and decode a session's stored head and ``(position, item)`` rows.

    ``turn_rows`` are the ``(list, position, element)`` rows of the turn's
    lists, ordered by list and position, and ``counts`` the text
    :func:`turn_counts` gave (``None``: no rows, as in a head written before
    they existed, which holds its lists inline). Returns the document and its
    items. Raises ``CheckpointError`` naming the session and the row when the
    head is not a JSON checkpoint head of this session, an item row is not
    JSON or not an agentloop item, a turn row is not JSON, a position is
    missing or out of order, or fewer/more rows than ``item_count`` or
    ``counts`` say exist. Nothing is returned then, so nothing half-restores.
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
            items.append(_converter.structure(data, Item))
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
    _put_turn_rows(document, turn_rows, counts, prefix, fix)
    document["transcript"] = transcript
    return document, items


def _put_turn_rows(
    document: dict[str, Any],
    rows: Sequence[tuple[object, object, object]],
    counts: object,
    prefix: str,
    fix: str,
) -> None:
    """Put the turn's list rows back into ``document``'s head (see :func:`decode_stored`)."""
    expected = _decode_counts(counts, f"{prefix}: its head row's turn counts", fix)
    grouped: dict[object, list[tuple[object, object]]] = {}
    for name, position, text in rows:
        grouped.setdefault(name, []).append((position, text))
    for name, found in grouped.items():
        if name not in expected:
            raise CheckpointError(
                f"{prefix}: turn row {name!r}[{found[0][0]!r}] is extra (its head row counts no "
                f"{name!r} rows); {fix}"
            )
    if not expected:
        return
    turn = document.get("turn")
    for name, count in expected.items():
        if not isinstance(turn, dict) or turn.get(name) != []:
            raise CheckpointError(
                f"{prefix}: its head row holds no empty turn[{name!r}] list for its {count} "
                f"turn rows; {fix}"
            )
        values: list[Any] = []
        for index, (position, text) in enumerate(grouped.get(name, ())):
            if position != index:
                raise CheckpointError(
                    f"{prefix}: turn row {name!r}[{index}] is missing (the next row is at "
                    f"position {position!r}); {fix}"
                )
            values.append(_decode_json(text, f"{prefix}: turn row {name!r}[{index}]", fix))
        if len(values) != count:
            raise CheckpointError(
                f"{prefix}: turn row {name!r}[{min(count, len(values))}] is "
                f"{'missing' if count > len(values) else 'extra'} (its head row counts {count} "
                f"{name!r} rows, {len(values)} exist); {fix}"
            )
        turn[name] = values


def _decode_counts(counts: object, where: str, fix: str) -> dict[str, int]:
    """The row count of each turn list, from the stored text (``None``: no rows)."""
    if counts is None:
        return {}
    data = _decode_json(counts, where, fix)
    if not isinstance(data, dict) or not all(
        name in TURN_LISTS and type(count) is int and count > 0 for name, count in data.items()
    ):
        raise CheckpointError(
            f"{where} are {_short(data)}, expected an object of row counts > 0 for "
            f"{', '.join(TURN_LISTS)}; {fix}"
        )
    return data


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
