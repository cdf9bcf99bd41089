"""JSONL export and import of a transcript: one ``agentloop.unstructure(item)`` per line."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO

from ..core._errors import InvalidInputError
from ..core._items import Item
from ..loop import _converter
from ..store._json import describe_error, json_text, parse_json

__all__ = ["export_jsonl", "import_jsonl"]


def export_jsonl(items: Iterable[Item], target: str | os.PathLike[str] | IO[str]) -> int:
    """Write ``items`` to ``target``, one JSON object per line; return how many.

    Every item is encoded before anything is written, so an item that cannot
    be written (``InvalidInputError``) leaves a path untouched. A path is
    written as UTF-8 and replaced; a file object is written to and not closed.
    """
    lines: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"cannot export JSONL transcript: expected an Item at index {index}, "
                f"found {type(item).__name__}; pass the transcript's items"
            )
        try:
            lines.append(json_text(_converter.unstructure(item), f"item {index}") + "\n")
        except ValueError as error:
            raise InvalidInputError(
                f"cannot export JSONL transcript: {error}; make the item's values JSON"
            ) from None
    if isinstance(target, str | os.PathLike):
        with open(target, "w", encoding="utf-8", newline="\n") as file:
            file.writelines(lines)
    else:
        target.writelines(lines)
    return len(lines)


def import_jsonl(source: str | os.PathLike[str] | IO[str]) -> list[Item]:
    """Read a transcript written by :func:`export_jsonl`.

    Raises ``InvalidInputError`` naming the first line that is not a JSON
    agentloop item; nothing is returned then. A file object is read from its
    current position and not closed.
    """
    if isinstance(source, str | os.PathLike):
        with open(source, encoding="utf-8") as file:
            return _read_items(file, repr(os.fspath(source)))
    return _read_items(source, repr(getattr(source, "name", "<file object>")))


def _read_items(lines: Iterable[str], source_name: str) -> list[Item]:
    items: list[Item] = []
    prefix = f"cannot import JSONL transcript from {source_name}"
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise InvalidInputError(
                f"{prefix}: line {number} is empty, expected one JSON item per line; "
                f"remove line {number}"
            )
        try:
            data = parse_json(line)
        except ValueError as error:
            raise InvalidInputError(
                f"{prefix}: line {number} {error}; fix or remove line {number}"
            ) from None
        try:
            items.append(_converter.structure(data, Item))
        except Exception as error:
            raise InvalidInputError(
                f"{prefix}: line {number} is not an agentloop item "
                f"({describe_error(error)}); fix or remove line {number}"
            ) from None
    return items
