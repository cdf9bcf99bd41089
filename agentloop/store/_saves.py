"""A :class:`BackendSessionStore`'s saves: one commit writing only what changed.

A save encodes the document (:mod:`._codec`, reusing the session's last
encoding), checks the fence and the expected version, writes the item and
turn rows from their first change, marks the claims its new results answer,
and commits the head with the next version number, taken inside the commit
when the backend offers :class:`NumberedCommit`. The same commit writes the
save's step into the session's history (:mod:`._history`) and drops the
steps the history no longer keeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio.lowlevel
import attrs

from ..loop._session_store import summarize
from ._backend import BackendHead, BackendWrite, NumberedCommit
from ._codec import (
    TURN_LISTS,
    EncodedCheckpoint,
    answered_from,
    encode_checkpoint,
    first_change,
    turn_counts,
    turn_starts,
)
from ._heads import AGAIN, CLAIMS, Again, Heads, Known, Recent, expected_revision, retried
from ._history import Lists, SideRows, plan_history, summary_of
from ._records import ITEMS, TURN_LIST_PREFIX, ClaimRow, SessionMeta, encode_record
from ._rules import check_fence, check_version

__all__ = ["VERSIONS", "Saves"]

VERSIONS = "versions"
"""The counter of document versions (never reused, not even after a delete)."""

_CACHED_SESSIONS = 64


class Saves:
    """Saves documents through ``heads``; ``history_limit()`` is how many steps the history
    keeps at least."""

    def __init__(self, heads: Heads, history_limit: Callable[[], int]) -> None:
        self.heads = heads
        self.history_limit = history_limit
        self._written: Recent[str, tuple[int, EncodedCheckpoint]] = Recent(_CACHED_SESSIONS)
        """Each recent session's last save through this store: its version and encoding."""

    def forget(self, session_id: str) -> None:
        """Forget the session's last save (it was deleted)."""
        self._written.forget(session_id)

    async def save(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        expected_version: int | None,
        fencing_token: int | None,
        *,
        origin: str | None = None,
        claim_rows: Mapping[str, ClaimRow] | None = None,
        side: SideRows | None = None,
    ) -> int:
        """Replace the session's document (see :meth:`SessionStore.save_checkpoint`).

        The save is the session's next step, described by ``origin``;
        ``claim_rows`` are claim rows written with it (a fork's calls in doubt,
        a rewind's calls in doubt again), ``side`` rows put and dropped with it
        (a rewind's claims and decisions of the abandoned steps).
        """
        last = self._written.get(session_id)
        encoded = encode_checkpoint(session_id, checkpoint, None if last is None else last[1])
        status, pending = summarize(checkpoint)
        shared = {  # the fields of both the new meta record and the step row
            "status": status,
            "item_count": len(encoded.items),
            "turn_counts": turn_counts(encoded.turn),
        }
        step = {"state": str(checkpoint.get("state")), "summary": summary_of(checkpoint)}
        await anyio.lowlevel.checkpoint()
        save = _Save(
            self,
            session_id,
            encoded,
            {**shared, "pending": pending},
            {**shared, **step, "origin": origin},
            expected_version,
            fencing_token,
            claim_rows or {},
            side or SideRows(rows={}, drop={}),
            self.heads.known.get(session_id),
        )
        version: int = await retried(save.attempt)
        self._written.put(session_id, (version, encoded))
        return version

    async def list_writes(
        self, session_id: str, meta: SessionMeta | None, encoded: EncodedCheckpoint
    ) -> Lists:
        """The list rows a save of ``encoded`` writes over what is stored: only what changed."""
        last = self._written.get(session_id)
        backend = self.heads.backend
        items: Any
        if meta is None:
            items, turn = (), {}
        elif last is not None and last[0] == meta.version:
            items, turn = last[1].items, last[1].turn
        else:
            items = await backend.read_list(session_id, ITEMS)
            turn = {}
            for name in TURN_LISTS if meta.turn_counts is not None else ():
                rows = tuple(await backend.read_list(session_id, TURN_LIST_PREFIX + name))
                if rows:
                    turn[name] = rows
        start = first_change(items, encoded)
        lists = {ITEMS: (start, encoded.items[start:])}
        if not turn and not encoded.turn:
            return lists  # no turn rows before or after: the usual save between turns
        for name, first in turn_starts(turn, encoded).items():
            old, new = turn.get(name, ()), encoded.turn.get(name, ())
            if first < len(old) or first < len(new):
                lists[TURN_LIST_PREFIX + name] = (first, tuple(new[first:]))
        return lists


@attrs.define
class _Save:
    """One save: what it writes, decided again by each attempt on the head it finds.

    The first attempt decides on the head this store last committed
    (``known``), when it has one, without reading it: the commit's
    compare-and-set applies only if that head is still the stored one, and a
    refusal, or a check that fails on it, starts over from a fresh read.
    """

    saves: Saves
    session_id: str
    encoded: EncodedCheckpoint
    meta_fields: dict[str, Any]
    """The new meta record's fields that depend only on the document."""
    step_fields: dict[str, Any]
    """The step row's fields that depend only on the document and the origin."""
    expected_version: int | None
    fencing_token: int | None
    claim_rows: Mapping[str, ClaimRow]
    side: SideRows
    known: Known | None

    async def attempt(self) -> int | Again:
        """Decide on the head and commit; the version, or :data:`AGAIN`."""
        remembered, self.known = self.known, None  # a later attempt reads the stored head
        if remembered is None:
            head, meta = await self.saves.heads.read(self.session_id)
            claims: dict[str, ClaimRow] = {}
        else:
            head, meta, claims = remembered
        saved = head is not None and head.document is not None
        try:
            operation = f"save checkpoint for session {self.session_id!r}"
            check_fence(self.session_id, self.fencing_token, meta.lease, time.time(), operation)
            check_version(self.session_id, self.expected_version, meta.version if saved else None)
        except Exception:
            if remembered is None:
                raise
            return AGAIN  # decided on a remembered head: decide again on the stored one
        lists = await self.saves.list_writes(self.session_id, meta if saved else None, self.encoded)
        claims, marked = await self._claims(claims, lists)
        version = await self._commit(head, meta, lists, claims, marked)
        return AGAIN if version is None else version

    async def _claims(
        self, claims: dict[str, ClaimRow], lists: Lists
    ) -> tuple[dict[str, ClaimRow], dict[str, ClaimRow]]:
        """The claim rows known, with those of the calls the new items answer; and the rows
        the save writes (those marked answered, and the rows given)."""
        answered = answered_from(self.encoded, lists[ITEMS][0])
        wanted = answered - claims.keys()
        if wanted:
            claims = {
                **claims,
                **await self.saves.heads.rows(self.session_id, CLAIMS, ClaimRow, wanted),
            }
        marked = {
            call_id: attrs.evolve(row, answered=True)
            for call_id, row in claims.items()
            if call_id in answered and not row.answered
        }
        return claims, {**marked, **self.claim_rows}

    async def _commit(
        self,
        head: BackendHead | None,
        meta: SessionMeta,
        lists: Lists,
        claims: dict[str, ClaimRow],
        marked: dict[str, ClaimRow],
    ) -> int | None:
        """Commit on ``head``'s revision with the next version number; the version, or
        ``None`` when another writer committed first."""
        heads, session_id = self.saves.heads, self.session_id
        now = time.time()
        step = {**self.step_fields, "saved_at": now}
        plan = plan_history(meta.history, self.saves.history_limit(), self.encoded, lists, step)
        fields = {**self.meta_fields, "updated_at": now, "lease": meta.lease}
        rows = dict(self.side.rows)
        if marked:
            encoded = {key: encode_record(row) for key, row in marked.items()}
            rows[CLAIMS] = {**rows.get(CLAIMS, {}), **encoded}
        drop = {**plan.drop, **self.side.drop}
        new_revision = await heads.next_revision(head)
        built: dict[int, tuple[BackendHead, SessionMeta]] = {}

        def write(version: int) -> BackendWrite:
            new_meta = SessionMeta(version=version, history=plan.mark, **fields)
            new_head = BackendHead(
                revision=new_revision, meta=encode_record(new_meta), document=self.encoded.head
            )
            built[version] = (new_head, new_meta)
            all_rows = {**rows, **plan.rows(version, new_revision)}
            return BackendWrite(head=new_head, lists=lists, rows=all_rows, drop=drop)

        version = await _commit_numbered(heads, session_id, expected_revision(head), write)
        if version is not None:
            if version not in built:  # the backend wrote it without calling write(version)
                write(version)
            heads.committed(session_id, *built[version], {**claims, **marked})
        return version


async def _commit_numbered(
    heads: Heads, session_id: str, revision: int, write: Callable[[int], BackendWrite]
) -> int | None:
    """Take the next version number and commit ``write(number)`` on ``revision``, in one
    call when the backend offers :class:`NumberedCommit`; the number, or ``None``."""
    backend = heads.backend
    if isinstance(backend, NumberedCommit):
        return await heads.guarded(
            session_id, backend.commit_numbered(session_id, revision, VERSIONS, write)
        )
    number = await backend.next_number(VERSIONS)
    applied = await heads.guarded(session_id, backend.commit(session_id, revision, write(number)))
    return number if applied else None
