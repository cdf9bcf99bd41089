"""Sessions' heads as a :class:`BackendSessionStore` reads and commits them.

Each write of the store reads a session's head, decides, and commits on the
revision it read (:meth:`Heads.commit`); a refused commit (another writer
committed first) makes it start over, at most :data:`ATTEMPTS` times
(:func:`retried`). The head a store last committed is remembered with its
meta record and the claim rows known at it, so a save can decide without
reading it first: revisions never repeat, not even after a delete, so a
commit on a stale remembered head is refused, never misapplied.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Generic, TypeVar

import attrs

from ..core._errors import CheckpointError
from ._backend import BackendHead, BackendWrite, StorageBackend
from ._records import ClaimRow, SessionMeta, decode_record, encode_record

__all__ = [
    "AGAIN",
    "Again",
    "ATTEMPTS",
    "CLAIMS",
    "DECISIONS",
    "INCARNATIONS",
    "Heads",
    "Known",
    "Recent",
    "expected_revision",
    "retried",
]

CLAIMS = "claims"
"""The table of claimed (or started) calls, by call id."""
DECISIONS = "decisions"
"""The table of recorded decisions, by call id."""
INCARNATIONS = "incarnations"
"""The counter of new heads: each starts a range of revisions of its own."""
ATTEMPTS = 10_000
"""How many times a write or a load starts over because another writer committed first."""
_REVISION_BITS = 32
"""A new head's revisions start at its incarnation number times 2**32, plus one."""
_CACHED = 1024

K = TypeVar("K")
V = TypeVar("V")
R = TypeVar("R")


class Again:
    """What an attempt returns when another writer committed first."""


AGAIN = Again()


async def retried(attempt: Callable[[], Awaitable[R | Again]]) -> R:
    """``attempt()``'s result, calling it again while it returns :data:`AGAIN`."""
    for _attempt in range(ATTEMPTS):
        result = await attempt()
        if not isinstance(result, Again):
            return result
    raise CheckpointError(
        f"the storage backend refused {ATTEMPTS} commits in a row (or moved the head under "
        f"{ATTEMPTS} loads), each on the revision just read: its commit() must apply a write "
        "whose expected_revision is the stored head's revision, and read() must return the "
        "head the last commit stored (run agentloop.testing.store_conformance.check_backend)"
    )


class Recent(Generic[K, V]):
    """The last ``size`` values put, by key, thread-safe (the oldest put goes first)."""

    def __init__(self, size: int = _CACHED) -> None:
        self._values: dict[K, V] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._values.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._values.pop(key, None)
            self._values[key] = value
            while len(self._values) > self._size:
                del self._values[next(iter(self._values))]

    def forget(self, key: K) -> None:
        with self._lock:
            self._values.pop(key, None)


Known = tuple[BackendHead, SessionMeta, dict[str, ClaimRow]]
"""A head this store committed, its meta record and the claim rows known at it."""


class Heads:
    """Reads, decodes, remembers and commits ``backend``'s session heads."""

    def __init__(self, backend: StorageBackend) -> None:
        self.backend = backend
        self._metas: Recent[str, tuple[str, SessionMeta]] = Recent()
        """Each recent session's meta record as last written or read: its text and value."""
        self._known: Recent[str, Known] = Recent()

    async def read(self, session_id: str) -> tuple[BackendHead | None, SessionMeta]:
        """The session's stored head (``None``: none) and its meta record."""
        head = await self.backend.read(session_id)
        if head is None:
            return None, SessionMeta()
        return head, self.meta(session_id, head.meta)

    def meta(self, session_id: str, text: str) -> SessionMeta:
        """The meta record of ``text``: the one this store last wrote or read, or decoded."""
        known = self._metas.get(session_id)
        if known is not None and known[0] == text:
            return known[1]
        meta = decode_record(text, SessionMeta, session_id, "its head's meta")
        self._metas.put(session_id, (text, meta))
        return meta

    def known(self, session_id: str) -> Known | None:
        """The head this store last committed for the session (``None`` if unknown, or
        refused since)."""
        return self._known.get(session_id)

    def forget(self, session_id: str) -> None:
        """Forget the session's remembered head (its commit failed, or it was deleted)."""
        self._known.forget(session_id)

    def committed(
        self, session_id: str, head: BackendHead, meta: SessionMeta, claims: dict[str, ClaimRow]
    ) -> None:
        """Remember ``head`` (with ``meta``, encoded as ``head.meta``) as just committed."""
        self._metas.put(session_id, (head.meta, meta))
        self._known.put(session_id, (head, meta, claims))

    async def next_revision(self, head: BackendHead | None) -> int:
        """The revision of a commit on ``head``: one more, or for a new head the start of a
        range no other incarnation of the session used (so a revision never repeats)."""
        if head is not None:
            return head.revision + 1
        return (await self.backend.next_number(INCARNATIONS) << _REVISION_BITS) + 1

    async def commit(
        self,
        session_id: str,
        head: BackendHead | None,
        meta: SessionMeta,
        *,
        rows: Mapping[str, Mapping[str, str]] | None = None,
        claims: Mapping[str, ClaimRow] | None = None,
    ) -> bool:
        """Commit ``meta`` (and table ``rows``, ``claims`` rows) on the revision of ``head``,
        keeping its document; ``False`` when another writer committed first. A claim row
        without a ``revision`` gets the new head's."""
        new_head = BackendHead(
            revision=await self.next_revision(head),
            meta=encode_record(meta),
            document=None if head is None else head.document,
        )
        rows = dict(rows or {})
        if claims:
            claims = {  # a claim row tells the revision that claimed it (see _time_travel)
                key: row
                if row.revision is not None
                else attrs.evolve(row, revision=new_head.revision)
                for key, row in claims.items()
            }
            rows[CLAIMS] = {key: encode_record(row) for key, row in claims.items()}
        applied = await self.guarded(
            session_id,
            self.backend.commit(
                session_id, expected_revision(head), BackendWrite(head=new_head, rows=rows)
            ),
        )
        if applied:
            known = self.known(session_id)
            carried = known[2] if known is not None and known[0] == head else {}
            self.committed(session_id, new_head, meta, {**carried, **(claims or {})})
        return applied

    async def guarded(self, session_id: str, commit: Awaitable[R]) -> R:
        """``await commit``, forgetting the session's head when it raises or is refused."""
        try:
            result = await commit
        except BaseException:
            self.forget(session_id)
            raise
        if not result:
            self.forget(session_id)
        return result

    async def rows(
        self, session_id: str, table: str, kind: type[R], keys: Collection[str] | None = None
    ) -> dict[str, R]:
        """The session's rows of ``table`` (those of ``keys`` found, or all), decoded."""
        found = await self.backend.read_rows(session_id, table, keys)
        return {
            key: decode_record(text, kind, session_id, f"{table} row {key!r}")
            for key, text in found.items()
        }


def expected_revision(head: BackendHead | None) -> int:
    """The revision a commit on ``head`` expects (``0``: no head)."""
    return 0 if head is None else head.revision
