"""The storage protocol: the few atomic primitives a backend provides.

Per session a backend keeps one versioned *head*, ordered *lists* of text
rows and keyed *tables* of text rows; its one write, :meth:`StorageBackend.commit`,
is a compare-and-set of the head on its revision that also writes list and
table rows, all or nothing. The texts are opaque: store them and give them
back unchanged. Every rule of a session store is written once on top, in
:class:`~agentloop.store.BackendSessionStore` (docs/store.md, "Writing a store").
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Protocol, runtime_checkable

import attrs

__all__ = ["BackendHead", "BackendWrite", "NumberedCommit", "StorageBackend"]


@attrs.frozen(kw_only=True)
class BackendHead:
    """A session's head as a backend stores it.

    ``revision`` is the number the library gives each commit (store it
    exactly: it may exceed 2**53): a session's first commit starts a range of
    its own (``1``, or a multiple of 2**32 plus one, so a session deleted and
    created again never repeats a revision) and every commit adds one;
    ``meta`` is the library's small record of the session (version, status,
    lease, row counts); ``document`` the checkpoint document without its
    transcript, ``None`` before the first save.
    """

    revision: int
    meta: str
    document: str | None = None


@attrs.frozen(kw_only=True)
class BackendWrite:
    """What one :meth:`StorageBackend.commit` applies, all or nothing.

    ``lists`` maps a list's name to ``(start, rows)``: keep the list's first
    ``start`` rows and replace all the rest by ``rows`` (so ``(len, new)``
    appends and ``(0, ())`` empties it). ``rows`` maps a table's name to the
    rows to put in it, by key (a new key is inserted, a known one replaced).
    ``drop`` maps a table's name to the keys of rows to remove from it (a key
    not there is ignored); it applies before ``rows``, so a key in both is put.
    """

    head: BackendHead
    lists: Mapping[str, tuple[int, tuple[str, ...]]] = attrs.field(factory=dict)
    rows: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    drop: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)


@runtime_checkable
class StorageBackend(Protocol):
    """The primitives a session store is built on; each call is atomic.

    Implement these and wrap the backend in
    :class:`~agentloop.store.BackendSessionStore` to get a full
    :class:`~agentloop.store.SessionStore`; run
    :mod:`agentloop.testing.store_conformance` on it: a failure names the
    primitive that broke.
    """

    async def read(self, session_id: str) -> BackendHead | None:
        """The session's head, or ``None`` when it has none."""
        ...

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        """Apply ``write`` iff the stored head's revision is ``expected_revision``.

        ``0`` expects no head. When it matches, store ``write.head`` and
        apply ``write.lists``, ``write.drop`` and ``write.rows`` in one atomic step and return
        ``True``; otherwise change nothing and return ``False``.
        """
        ...

    async def read_list(self, session_id: str, name: str) -> list[str]:
        """The rows of the session's list ``name``, in order (``[]`` if none)."""
        ...

    async def read_rows(
        self, session_id: str, table: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        """The session's rows of ``table`` by key: all of them, or those of ``keys`` found."""
        ...

    async def heads(self) -> dict[str, BackendHead]:
        """Every session's head, by session id."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Drop the session's head, lists and rows; ``True`` if it had a head."""
        ...

    async def next_number(self, counter: str) -> int:
        """The store-wide ``counter``'s next value: ``1``, then one more than it last gave."""
        ...

    async def aclose(self) -> None:
        """Release connections; the stored data stays."""
        ...


@runtime_checkable
class NumberedCommit(Protocol):
    """An optional fast path a :class:`StorageBackend` MAY also offer.

    :class:`~agentloop.store.BackendSessionStore` uses it for a save when the
    backend has it; otherwise it calls :meth:`StorageBackend.next_number`
    and then :meth:`StorageBackend.commit`, which is equivalent.
    """

    async def commit_numbered(
        self,
        session_id: str,
        expected_revision: int,
        counter: str,
        write: Callable[[int], BackendWrite],
    ) -> int | None:
        """Take ``counter``'s next number ``n`` and commit ``write(n)`` (see
        :meth:`StorageBackend.commit`), as one call; ``n`` if it applied, else ``None``.

        ``n`` must be taken after the compare-and-set's lock (or in its
        atomic step), so two writers of one head that both apply take their
        numbers in the order they commit. A refused commit may spend a number.
        ``write`` is pure and may run in any thread, more than once: a backend
        may first call it with a number it did not take (to find where the
        number goes in the texts), but calls it last with ``n``.
        """
        ...
