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
from ._heads import AGAIN, CLAIMS, Heads, Recent, expected_revision, retried
from ._history import HistoryPlan, SideRows, plan_history, summary_of
from ._records import ITEMS, TURN_LIST_PREFIX, ClaimRow, SessionMeta, encode_record
from ._rules import check_fence, check_version

__all__ = ["VERSIONS", "Saves"]

VERSIONS = "versions"
"""The counter of document versions (never reused, not even after a delete)."""

_CACHED_SESSIONS = 64

Lists = dict[str, tuple[int, tuple[str, ...]]]
"""The list rows a save writes: each list's first rewritten position and its rows from there."""


class Saves:
    """Saves documents through ``heads``; ``clock`` decides whether a lease is live,
    ``history_limit()`` how many steps the history keeps at least."""

    def __init__(
        self, heads: Heads, clock: Callable[[], float], history_limit: Callable[[], int]
    ) -> None:
        self._heads = heads
        self._clock = clock
        self._history_limit = history_limit
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

        The first attempt decides on the head this store last committed, when
        it has one, without reading it: the commit's compare-and-set applies
        only if that head is still the stored one, and a refusal, or a check
        that fails on it, starts over from a fresh read. The save is the
        session's next step, described by ``origin``; ``claim_rows`` are claim
        rows written with it (a fork's calls in doubt, a rewind's calls in
        doubt again), ``side`` rows put and dropped with it (a rewind's claims
        and decisions of the abandoned steps).
        """
        last = self._written.get(session_id)
        encoded = encode_checkpoint(session_id, checkpoint, None if last is None else last[1])
        status, pending = summarize(checkpoint)
        counts = turn_counts(encoded.turn)
        step = {  # the step row's fields but its time (see _history.StepRow)
            "state": str(checkpoint.get("state")),
            "status": status,
            "item_count": len(encoded.items),
            "turn_counts": counts,
            "summary": summary_of(checkpoint),
            "origin": origin,
        }
        operation = f"save checkpoint for session {session_id!r}"
        await anyio.lowlevel.checkpoint()
        known = [self._heads.known(session_id)]

        async def attempt() -> Any:
            remembered = known[0]
            known[0] = None  # a later attempt reads the stored head
            if remembered is None:
                head, meta = await self._heads.read(session_id)
                claims: dict[str, ClaimRow] = {}
            else:
                head, meta, claims = remembered
            try:
                lease = meta.lease
                check_fence(session_id, fencing_token, lease, self._clock(), operation)
                saved = head is not None and head.document is not None
                check_version(session_id, expected_version, meta.version if saved else None)
            except Exception:
                if remembered is None:
                    raise
                return AGAIN  # decided on a remembered head: decide again on the stored one
            lists = await self._list_writes(session_id, meta if saved else None, encoded)
            answered = answered_from(encoded, lists[ITEMS][0])
            if not answered <= claims.keys():
                wanted = answered - claims.keys()
                claims = {**claims, **await self._heads.rows(session_id, CLAIMS, ClaimRow, wanted)}
            marked = {**_marked(claims, answered), **(claim_rows or {})}
            now = time.time()
            step_fields = {**step, "saved_at": now}
            plan = plan_history(meta.history, self._history_limit(), encoded, lists, step_fields)
            fields = {
                "updated_at": now,
                "status": status,
                "pending": pending,
                "item_count": len(encoded.items),
                "turn_counts": counts,
                "lease": meta.lease,
                "history": plan.mark,
            }
            version = await self._commit(
                session_id, head, (claims, marked), fields, encoded.head, lists, (plan, side)
            )
            return AGAIN if version is None else version

        version: int = await retried(attempt)
        self._written.put(session_id, (version, encoded))
        return version

    async def _commit(
        self,
        session_id: str,
        head: BackendHead | None,
        claims: tuple[dict[str, ClaimRow], dict[str, ClaimRow]],
        fields: dict[str, Any],
        document: str,
        lists: Lists,
        history: tuple[HistoryPlan, SideRows | None],
    ) -> int | None:
        """Commit a save on ``head``'s revision with the next version number; the version,
        or ``None`` when another writer committed first. ``claims`` are the claim rows
        known and those the save writes (marked answered, or given); ``history`` the
        save's step plan and the side rows it also puts and drops."""
        known, marked = claims
        plan, side = history
        rows = {CLAIMS: {key: encode_record(row) for key, row in marked.items()}} if marked else {}
        new_revision = await self._heads.next_revision(head)
        built: dict[int, tuple[BackendHead, SessionMeta]] = {}

        def write(version: int) -> BackendWrite:
            meta = SessionMeta(version=version, **fields)
            new_head = BackendHead(
                revision=new_revision, meta=encode_record(meta), document=document
            )
            built[version] = (new_head, meta)
            all_rows = {**rows, **plan.rows(version, new_revision)}
            drop = plan.drop
            if side is not None:
                for table, put in side.rows.items():
                    all_rows[table] = {**put, **all_rows.get(table, {})}
                drop = {**drop, **side.drop}
            return BackendWrite(head=new_head, lists=lists, rows=all_rows, drop=drop)

        backend = self._heads.backend
        revision = expected_revision(head)
        if isinstance(backend, NumberedCommit):
            committing = backend.commit_numbered(session_id, revision, VERSIONS, write)
            version = await self._heads.guarded(session_id, committing)
        else:
            number = await backend.next_number(VERSIONS)
            applied = await self._heads.guarded(
                session_id, backend.commit(session_id, revision, write(number))
            )
            version = number if applied else None
        if version is not None:
            if version not in built:  # the backend wrote it without calling write(version)
                write(version)
            new_head, meta = built[version]
            self._heads.committed(session_id, new_head, meta, {**known, **marked})
        return version

    async def _list_writes(
        self, session_id: str, meta: SessionMeta | None, encoded: EncodedCheckpoint
    ) -> Lists:
        """The list rows a save of ``encoded`` writes over what is stored: only what changed."""
        last = self._written.get(session_id)
        backend = self._heads.backend
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


def _marked(claims: Mapping[str, ClaimRow], answered: frozenset[str]) -> dict[str, ClaimRow]:
    """The rows of ``claims`` whose call ``answered`` holds a result of, marked answered."""
    return {
        call_id: attrs.evolve(row, answered=True)
        for call_id, row in claims.items()
        if call_id in answered and not row.answered
    }
