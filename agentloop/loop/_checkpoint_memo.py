"""The documents of a driver's last checkpoint, reused for the very same values.

A driver bound to a store captures a checkpoint at every save. Its values
are immutable (frozen attrs) and mostly the same objects from save to save:
the transcript and the turn's items, tool calls and model-call records grow
append-only, and the session's config does not change. :class:`CaptureMemo`
keeps each value's document with the value, so a capture converts only the
new values; the unchanged ones keep their very document object, which lets
the store reuse the JSON text it encoded for it (``store._codec``, with
:func:`reuse_documents` too).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["CaptureMemo", "identical_prefix", "reuse_documents"]

T = TypeVar("T")
D = TypeVar("D")


def identical_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading elements of ``old`` and ``new`` are the very same objects.

    Compared in C, by address: the objects themselves are not touched. The
    usual case (``old`` is all kept) is one pass that builds nothing.
    """
    if all(map(operator.is_, old, new)):
        return min(len(old), len(new))
    same = list(map(operator.is_, old, new))
    try:
        return same.index(False)
    except ValueError:
        return len(same)


def reuse_documents(
    old_values: Sequence[object],
    old_documents: Sequence[D],
    values: Sequence[T],
    write: Callable[[int, T], D],
) -> tuple[list[D], int]:
    """The documents of ``values``, reusing ``old_documents`` for the very same objects.

    ``old_documents[i]`` is the document of ``old_values[i]``; ``write(index,
    value)`` makes a new one. Returns the documents and how many leading ones
    were kept. The usual call (the old values, the same objects, then new
    ones) converts only the new ones; otherwise (a compaction, a new turn)
    values are looked up by identity among the old ones.
    """
    shared = identical_prefix(old_values, values)
    documents = list(old_documents[:shared])
    if shared < len(old_values) and shared < len(values):
        known = {
            id(value): (value, document)
            for value, document in zip(old_values, old_documents, strict=True)
        }
        for index in range(shared, len(values)):
            value = values[index]
            found = known.get(id(value))
            documents.append(
                found[1] if found is not None and found[0] is value else write(index, value)
            )
    else:
        documents.extend(write(index, values[index]) for index in range(shared, len(values)))
    return documents, shared


class CaptureMemo:
    """Each slot's values at the last capture, with their documents.

    A slot is one list of the document (``"transcript"``, the turn's
    ``"items"``...) or one value (``"config"``). Values must be immutable:
    a value that is the very object seen last time gets the very document
    made for it then. A fresh memo converts everything (``driver.checkpoint()``
    uses one per call, so its documents are shared with nobody).
    """

    __slots__ = ("_lists", "_values")

    def __init__(self) -> None:
        self._lists: dict[str, tuple[tuple[object, ...], list[Any]]] = {}
        self._values: dict[str, tuple[object, Any]] = {}

    def documents(
        self, slot: str, values: Sequence[T], write: Callable[[T], Any]
    ) -> tuple[list[Any], int]:
        """The documents of ``values`` and how many leading ones were kept from last time
        (see :func:`reuse_documents`)."""
        old_values, old_documents = self._lists.get(slot, ((), []))
        documents, shared = reuse_documents(
            old_values, old_documents, values, lambda _index, value: write(value)
        )
        self._lists[slot] = (tuple(values), documents)
        return documents, shared

    def document(self, slot: str, value: T, write: Callable[[T], Any]) -> Any:
        """The document of ``value``: last time's if it is the very same object."""
        old = self._values.get(slot)
        if old is not None and old[0] is value:
            return old[1]
        document = write(value)
        self._values[slot] = (value, document)
        return document
