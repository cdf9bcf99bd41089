"""Sessions' heads as a :class:`BackendSessionStore` reads and commits them.

A write reads a session's head, decides, and commits on the revision it read
(:meth:`Heads.update`), starting over while another writer commits first
(:func:`retried`). The head a store last committed is remembered with its meta
record and the claim rows known at it, so a save can decide without reading it
first: revisions never repeat, not even after a delete, so a commit on a stale
remembered head is refused, never misapplied (docs/store.md, "Writing a store").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Generic, TypeVar

import anyio.lowlevel
import attrs

from ..core._errors import CheckpointError
from ._backend import BackendHead, BackendWrite, StorageBackend
from ._records import ClaimRow, SessionMeta, decode_record, encode_record

__all__ = [
    "AGAIN",
    "Again",
    "Change",
    "CLAIMS",
    "DECISIONS",
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
T_co = TypeVar("T_co", covariant=True)


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
        self._values: OrderedDict[K, V] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._values.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            if len(self._values) > self._size:
                self._values.popitem(last=False)

    def forget(self, key: K) -> None:
        with self._lock:
            self._values.pop(key, None)


Known = tuple[BackendHead, SessionMeta, dict[str, ClaimRow]]
"""A head this store committed, its meta record and the claim rows known at it."""


@attrs.frozen
class Change(Generic[T_co]):
    """What a write decided on a session's head: the ``result`` it returns, and what it
    commits: ``meta`` (``None``: the one read), table ``rows`` and ``claims`` rows
    (stamped with the new head's revision). A change of nothing commits nothing."""

    result: T_co
    meta: SessionMeta | None = None
    rows: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    claims: Mapping[str, ClaimRow] = attrs.field(factory=dict)


class Heads:
    """Reads, decodes, remembers and commits ``backend``'s session heads."""

    def __init__(self, backend: StorageBackend) -> None:
        self.backend = backend
        self._metas: Recent[str, tuple[str, SessionMeta]] = Recent()
        """Each recent session's meta record as last written or read: its text and value."""
        self.known: Recent[str, Known] = Recent()
        """Each recent session's head as this store last committed it (forgotten when a
        commit fails or the session is deleted)."""

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

    def committed(
        self, session_id: str, head: BackendHead, meta: SessionMeta, claims: dict[str, ClaimRow]
    ) -> None:
        """Remember ``head`` (with ``meta``, encoded as ``head.meta``) as just committed."""
        self._metas.put(session_id, (head.meta, meta))
        self.known.put(session_id, (head, meta, claims))

    async def next_revision(self, head: BackendHead | None) -> int:
        """The revision of a commit on ``head``: one more, or for a new head the start of a
        range no other incarnation of the session used (so a revision never repeats)."""
        if head is not None:
            return head.revision + 1
        return (await self.backend.next_number(INCARNATIONS) << _REVISION_BITS) + 1

    async def update(
        self,
        session_id: str,
        decide: Callable[[BackendHead | None, SessionMeta], Awaitable[Change[R]]],
    ) -> R:
        """Read the session's head, ``decide`` on it and commit the change on the revision
        read, starting over from a fresh read while another writer commits first; the
        change's result."""
        await anyio.lowlevel.checkpoint()

        async def attempt() -> R | Again:
            head, meta = await self.read(session_id)
            change = await decide(head, meta)
            if change.meta is None and not change.rows and not change.claims:
                return change.result
            return change.result if await self._commit(session_id, head, meta, change) else AGAIN

        return await retried(attempt)

    async def _commit(
        self, session_id: str, head: BackendHead | None, meta: SessionMeta, change: Change[object]
    ) -> bool:
        """Commit ``change`` on the revision of ``head`` (whose meta is ``meta``), keeping its
        document; ``False`` when another writer committed first."""
        meta = change.meta or meta
        new_head = BackendHead(
            revision=await self.next_revision(head),
            meta=encode_record(meta),
            document=None if head is None else head.document,
        )
        # a claim row tells the revision that claimed it (see _time_travel)
        claims = {
            key: attrs.evolve(row, revision=new_head.revision) for key, row in change.claims.items()
        }
        rows = dict(change.rows)
        if claims:
            rows[CLAIMS] = {key: encode_record(row) for key, row in claims.items()}
        write = BackendWrite(head=new_head, rows=rows)
        applied = await self.guarded(
            session_id, self.backend.commit(session_id, expected_revision(head), write)
        )
        if applied:
            known = self.known.get(session_id)
            carried = known[2] if known is not None and known[0] == head else {}
            self.committed(session_id, new_head, meta, {**carried, **claims})
        return applied

    async def guarded(self, session_id: str, commit: Awaitable[R]) -> R:
        """``await commit``, forgetting the session's head when it raises or is refused."""
        try:
            result = await commit
        except BaseException:
            self.known.forget(session_id)
            raise
        if not result:
            self.known.forget(session_id)
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

    async def row(self, session_id: str, table: str, kind: type[R], key: str) -> R | None:
        """The session's row ``key`` of ``table``, decoded (``None``: none)."""
        return (await self.rows(session_id, table, kind, (key,))).get(key)


def expected_revision(head: BackendHead | None) -> int:
    """The revision a commit on ``head`` expects (``0``: no head)."""
    return 0 if head is None else head.revision
