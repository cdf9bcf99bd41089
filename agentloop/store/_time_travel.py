"""Listing, loading, forking and rewinding a session's kept steps (``_history.py``),
written once for every :class:`~agentloop.store.BackendSessionStore`; the rules are
docs/store.md's ("Step history: fork and rewind"). A step's *past* is the claims
recorded at a lower revision than its save.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import anyio.lowlevel
import attrs

from ..core._errors import CheckpointError, InvalidInputError
from ..loop._session_history import INHERITED_KEYS, SavedStep, inherited_keys
from ..loop._session_store import StoredSession
from ._backend import StorageBackend
from ._codec import answered_call_ids, decode_stored
from ._heads import CLAIMS, DECISIONS, Heads
from ._history import HISTORY, STEPS, HistoryRow, SideRows, StepRow, rebuild, step_key
from ._records import ClaimRow, decode_record, timestamp
from ._saves import Saves

__all__ = ["REWOUND_CLAIMS", "REWOUND_DECISIONS", "StepHistory"]

REWOUND_CLAIMS = "rewound_claims"
"""Claims of calls a rewind left behind (not in the step it went back to), by call id: a
later rewind to a step that holds the call brings its claim back."""
REWOUND_DECISIONS = "rewound_decisions"
"""The same for recorded decisions."""
_ATTEMPTS = 100
"""How many times a step's load starts over because a save pruned its rows meanwhile."""


class _Host(Protocol):
    """What these operations use of :class:`~agentloop.store.BackendSessionStore`."""

    backend: StorageBackend
    _heads: Heads
    _saves: Saves

    async def load(self, session_id: str) -> StoredSession | None: ...

    async def load_step(self, session_id: str, step: int) -> StoredSession: ...


class StepHistory:
    """The :class:`~agentloop.store.SessionHistory` methods of ``BackendSessionStore``."""

    async def history(self: _Host, session_id: str) -> list[SavedStep]:
        """The session's kept steps, oldest first (``[]`` for an unknown session)."""
        await anyio.lowlevel.checkpoint()
        steps = await _steps(self, session_id)
        return [
            SavedStep(
                session_id=session_id,
                step=step,
                version=row.version,
                saved_at=timestamp(row.saved_at),
                state=row.state,
                status=row.status,
                item_count=row.item_count,
                summary=row.summary,
                origin=row.origin,
            )
            for step, row in sorted(steps.items())
        ]

    async def load_step(self: _Host, session_id: str, step: int) -> StoredSession:
        """The session as saved at ``step``, with the calls in doubt then (claimed before
        that save, no result in it); ``InvalidInputError`` naming the kept steps."""
        await anyio.lowlevel.checkpoint()
        row, document = await _document_at(self, session_id, step)
        claims = await self._heads.rows(session_id, CLAIMS, ClaimRow)
        return StoredSession(
            session_id=session_id,
            checkpoint=document,
            started_calls=frozenset(_doubted(document, claims, row.revision)),
            updated_at=timestamp(row.saved_at),
            version=row.version,
            status=row.status,
        )

    async def fork(self: _Host, session_id: str, *, at: int | None, new_session_id: str) -> int:
        """Save step ``at`` (``None``: the latest document) as the first step of
        ``new_session_id`` (``StaleSessionError`` if it exists); its version.

        The fork's past is the step's: its calls claimed before that save with no
        result are in doubt in the fork; nothing the original did later is. The
        original is unchanged."""
        operation = f"fork session {session_id!r} into {new_session_id!r}"
        if (
            not isinstance(new_session_id, str)
            or not new_session_id
            or new_session_id == session_id
        ):
            raise InvalidInputError(
                f"cannot {operation}: new_session_id must be a non-empty str other than the "
                "original's id"
            )
        await anyio.lowlevel.checkpoint()
        claims = await self._heads.rows(session_id, CLAIMS, ClaimRow)
        if at is None:
            stored = await self.load(session_id)
            if stored is None:
                raise InvalidInputError(
                    f"cannot {operation}: the store has no session {session_id!r}"
                )
            where = f"its version {stored.version}"
        else:
            stored, where = await self.load_step(session_id, at), f"step {at}"
        return await self._saves.save(
            new_session_id,
            _renamed(stored.checkpoint, session_id, new_session_id),
            0,
            None,
            origin=f"forked from {session_id!r} at {where}",
            claim_rows={  # the calls in doubt in the original at ``where``
                key: attrs.evolve(claims[key], revision=0, answered=False)
                for key in stored.started_calls
                if key in claims
            },
        )

    async def rewind(
        self: _Host, session_id: str, *, to: int, expected_version: int | None = None
    ) -> int:
        """Save step ``to`` as the session's next step (its history is kept); its version.

        A call the step holds that ran after it (no result there) is in doubt again,
        never run twice; the claims and decisions of the calls it does not hold are
        set aside (``rewound_*`` tables) and brought back by a rewind to a step that
        holds them."""
        await anyio.lowlevel.checkpoint()
        _row, document = await _document_at(self, session_id, to)
        called, answered = _called(document), _answered(document)
        kept: dict[str, dict[str, str]] = {}
        rows: dict[str, dict[str, str]] = {}
        drop: dict[str, tuple[str, ...]] = {}
        for table, aside in ((CLAIMS, REWOUND_CLAIMS), (DECISIONS, REWOUND_DECISIONS)):
            found = await self.backend.read_rows(session_id, table)
            archived = await self.backend.read_rows(session_id, aside)
            kept[table] = {key: text for key, text in found.items() if key in called}
            back = {k: text for k, text in archived.items() if k in called and k not in found}
            moved = {key: text for key, text in found.items() if key not in called}
            rows[table], rows[aside] = back, moved
            drop[table], drop[aside] = tuple(moved), tuple(back)
        again = {  # claimed, no result in the step: in doubt again, never run twice
            key: attrs.evolve(
                decode_record(text, ClaimRow, session_id, f"{CLAIMS} row {key!r}"), answered=False
            )
            for key, text in {**kept[CLAIMS], **rows[CLAIMS]}.items()
            if key not in answered
        }
        rows[CLAIMS] = {key: text for key, text in rows[CLAIMS].items() if key not in again}
        return await self._saves.save(
            session_id,
            document,
            expected_version,
            None,
            origin=f"rewound to step {to}",
            claim_rows=again,
            side=SideRows(rows=rows, drop=drop),
        )


async def _steps(store: _Host, session_id: str) -> dict[int, StepRow]:
    rows = await store._heads.rows(session_id, STEPS, StepRow)
    return {int(key): row for key, row in rows.items()}


def _unknown_step(session_id: str, step: object, steps: Mapping[int, StepRow]) -> InvalidInputError:
    kept = f"steps {min(steps)} to {max(steps)}" if steps else "no steps"
    return InvalidInputError(
        f"cannot load step {step!r} of session {session_id!r}: the store keeps {kept} of it; "
        "pick one that history() lists (a store keeps the last history_limit steps)"
    )


async def _document_at(store: _Host, session_id: str, step: int) -> tuple[StepRow, dict[str, Any]]:
    """Step ``step``'s row and checkpoint document, rebuilt from its base step."""
    if isinstance(step, bool) or not isinstance(step, int):
        raise _unknown_step(session_id, step, {})
    for _attempt in range(_ATTEMPTS):
        steps = await _steps(store, session_id)
        row = steps.get(step)
        if row is None:
            raise _unknown_step(session_id, step, steps)
        bases = [number for number, found in steps.items() if found.base and number <= step]
        if not bases:
            raise CheckpointError(
                f"cannot load step {step} of session {session_id!r}: no full step is kept "
                "before it; the store is damaged: restore it from a backup"
            )
        keys = [step_key(number) for number in range(max(bases), step + 1)]
        found = await store._heads.rows(session_id, HISTORY, HistoryRow, keys)
        if found.keys() >= set(keys):
            break  # else a save dropped them meanwhile: read the steps again
    else:
        raise CheckpointError(
            f"cannot load step {step} of session {session_id!r}: its history rows kept "
            f"disappearing while {_ATTEMPTS} loads read them"
        )
    items, turn = rebuild([found[key] for key in keys])
    head = found[keys[-1]].document
    document, _items = decode_stored(session_id, head, items, row.item_count, turn, row.turn_counts)
    return row, document


def _doubted(
    document: Mapping[str, Any], claims: Mapping[str, ClaimRow], revision: int
) -> dict[str, ClaimRow]:
    """The claims of ``document``'s past (recorded before ``revision``) whose call has no
    result in it."""
    answered = _answered(document)
    return {
        call_id: row
        for call_id, row in claims.items()
        if call_id not in answered and (row.revision is None or row.revision < revision)
    }


def _renamed(document: dict[str, Any], session_id: str, new_session_id: str) -> dict[str, Any]:
    """``document`` naming ``new_session_id`` (at its top and in its config); the calls
    it holds without a result keep the idempotency keys they had (config metadata)."""
    renamed = {**document, "session_id": new_session_id}
    config = document.get("config")
    if isinstance(config, dict) and "session_id" in config:
        config = {**config, "session_id": new_session_id}
        metadata = config.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        known = inherited_keys(metadata)
        open_calls = _called(document) - _answered(document)
        if open_calls:
            keys = {call_id: known.get(call_id, session_id) for call_id in sorted(open_calls)}
            config["metadata"] = {**metadata, INHERITED_KEYS: keys}
        renamed["config"] = config
    return renamed


def _answered(document: Mapping[str, Any]) -> frozenset[str]:
    """The ids of the calls ``document``'s transcript holds a result of."""
    return frozenset().union(*map(answered_call_ids, document["transcript"]))


def _called(document: Mapping[str, Any]) -> set[str]:
    """The ids of the tool calls in ``document``'s transcript."""
    return {
        part["id"]
        for item in document["transcript"]
        for part in item.get("parts", ())
        if isinstance(part, Mapping) and part.get("type") == "tool_call" and "id" in part
    }
