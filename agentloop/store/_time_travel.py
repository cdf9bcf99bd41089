"""Listing, loading, forking and rewinding a session's kept steps (``_history.py``).

Written once for every :class:`~agentloop.store.BackendSessionStore`:

- a step's *past* is what was committed before its save: the claims recorded
  at a lower revision. Loading a step answers as a resume at that step
  would: its claimed calls without a result are the calls in doubt;
- a **fork** saves a step's document as the first step of a new session,
  with the claims of its past that have no result in it (so they are in
  doubt in the fork too) and nothing else: the original's later claims and
  every recorded decision stay the original's, so the fork's calls are its
  own (its own idempotency keys, its own single-use approvals);
- a **rewind** saves a step's document as the session's next step. The
  claims and decisions of the calls the step holds stay: such a call that
  ran after the step and has no result in it is in doubt again (its tool's
  ``reconcile`` may settle it), never run twice. Those of calls the step
  does not hold (the abandoned steps' own calls) are set aside
  (``rewound_*`` tables), so the session's next calls are new ones; a
  later rewind to a step that holds them brings them back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol, TypeVar

import anyio.lowlevel
import attrs

from ..core._errors import CheckpointError, InvalidInputError
from ..loop._session_history import INHERITED_KEYS, SavedStep, inherited_keys
from ..loop._session_store import StoredSession
from ._backend import StorageBackend
from ._documents import answered_call_ids, decode_stored
from ._history import HISTORY, STEPS, HistoryRow, SideRows, StepRow, rebuild, step_key
from ._records import ClaimRow, decode_record
from ._rules import timestamp

__all__ = [
    "REWOUND_CLAIMS",
    "REWOUND_DECISIONS",
    "HistoryHost",
    "StepHistory",
    "fork_session",
    "list_steps",
    "load_step",
    "rewind_session",
]

CLAIMS = "claims"
DECISIONS = "decisions"
REWOUND_CLAIMS = "rewound_claims"
"""Claims of calls a rewind left behind (not in the step it went back to), by call id: a
later rewind to a step that holds the call brings its claim back."""
REWOUND_DECISIONS = "rewound_decisions"
"""The same for recorded decisions."""

_R = TypeVar("_R")


class HistoryHost(Protocol):
    """What these operations use of :class:`~agentloop.store.BackendSessionStore`."""

    backend: StorageBackend

    async def _rows(
        self, session_id: str, table: str, kind: type[_R], keys: Collection[str] | None = None
    ) -> dict[str, _R]: ...

    async def _save(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        expected_version: int | None,
        fencing_token: int | None,
        *,
        origin: str | None = None,
        claim_rows: Mapping[str, ClaimRow] | None = None,
        side: SideRows | None = None,
    ) -> int: ...

    async def load(self, session_id: str) -> StoredSession | None: ...


_ATTEMPTS = 100
"""How many times a step's load starts over because a save pruned its rows meanwhile."""


async def _steps(store: HistoryHost, session_id: str) -> dict[int, StepRow]:
    rows = await store._rows(session_id, STEPS, StepRow)
    return {int(key): row for key, row in rows.items()}


def _saved(session_id: str, step: int, row: StepRow) -> SavedStep:
    return SavedStep(
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


async def list_steps(store: HistoryHost, session_id: str) -> list[SavedStep]:
    """The session's kept steps, oldest first."""
    await anyio.lowlevel.checkpoint()
    steps = await _steps(store, session_id)
    return [_saved(session_id, step, steps[step]) for step in sorted(steps)]


def _unknown_step(session_id: str, step: object, steps: Mapping[int, StepRow]) -> InvalidInputError:
    kept = f"steps {min(steps)} to {max(steps)}" if steps else "no steps"
    return InvalidInputError(
        f"cannot load step {step!r} of session {session_id!r}: the store keeps {kept} of it; "
        "pick one that history() lists (a store keeps the last history_limit steps)"
    )


async def _document_at(
    store: HistoryHost, session_id: str, step: int
) -> tuple[StepRow, dict[str, Any]]:
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
        found_rows = await store._rows(session_id, HISTORY, HistoryRow, keys)
        if len(found_rows) == len(keys):
            break  # else a save dropped them meanwhile: read the steps again
    else:
        raise CheckpointError(
            f"cannot load step {step} of session {session_id!r}: its history rows kept "
            f"disappearing while {_ATTEMPTS} loads read them"
        )
    rows = {int(key): history for key, history in found_rows.items()}
    head, items, turn = rebuild(session_id, step, rows)
    turn_rows = [
        (name, position, text)
        for name, texts in turn.items()
        for position, text in enumerate(texts)
    ]
    document, _items = decode_stored(
        session_id, head, list(enumerate(items)), row.item_count, turn_rows, row.turn_counts
    )
    return row, document


def _doubted(
    document: Mapping[str, Any], claims: Mapping[str, ClaimRow], revision: int
) -> dict[str, ClaimRow]:
    """The claims of ``document``'s past (recorded before ``revision``) whose call has no
    result in it."""
    answered = answered_call_ids(document["transcript"])
    return {
        call_id: row
        for call_id, row in claims.items()
        if call_id not in answered and (row.revision is None or row.revision < revision)
    }


async def load_step(store: HistoryHost, session_id: str, step: int) -> StoredSession:
    """The session as saved at ``step``: its document, version, and calls in doubt then."""
    await anyio.lowlevel.checkpoint()
    row, document = await _document_at(store, session_id, step)
    claims = await store._rows(session_id, CLAIMS, ClaimRow)
    return StoredSession(
        session_id=session_id,
        checkpoint=document,
        started_calls=frozenset(_doubted(document, claims, row.revision)),
        updated_at=timestamp(row.saved_at),
        version=row.version,
        status=row.status,
    )


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
        open_calls = _called(document) - answered_call_ids(document["transcript"])
        if open_calls:
            keys = {call_id: known.get(call_id, session_id) for call_id in sorted(open_calls)}
            config["metadata"] = {**metadata, INHERITED_KEYS: keys}
        renamed["config"] = config
    return renamed


async def fork_session(
    store: HistoryHost, session_id: str, at: int | None, new_session_id: str
) -> int:
    """Save step ``at`` (``None``: the latest saved document) of ``session_id`` as the first
    step of ``new_session_id``, which must not exist; the new session's version."""
    operation = f"fork session {session_id!r} into {new_session_id!r}"
    if not isinstance(new_session_id, str) or not new_session_id or new_session_id == session_id:
        raise InvalidInputError(
            f"cannot {operation}: new_session_id must be a non-empty str other than the "
            "original's id"
        )
    await anyio.lowlevel.checkpoint()
    claims = await store._rows(session_id, CLAIMS, ClaimRow)
    if at is None:
        stored = await store.load(session_id)
        if stored is None:
            raise InvalidInputError(f"cannot {operation}: the store has no session {session_id!r}")
        document, doubted = (
            stored.checkpoint,
            {k: claims[k] for k in stored.started_calls if k in claims},
        )
        where = f"its version {stored.version}"
    else:
        row, document = await _document_at(store, session_id, at)
        doubted = _doubted(document, claims, row.revision)
        where = f"step {at}"
    copied = {
        call_id: attrs.evolve(row, revision=0, answered=False) for call_id, row in doubted.items()
    }
    return await store._save(
        new_session_id,
        _renamed(document, session_id, new_session_id),
        0,
        None,
        origin=f"forked from {session_id!r} at {where}",
        claim_rows=copied,
    )


async def rewind_session(
    store: HistoryHost, session_id: str, to: int, expected_version: int | None
) -> int:
    """Save step ``to`` of ``session_id`` as its next step; the session's new version."""
    await anyio.lowlevel.checkpoint()
    _row, document = await _document_at(store, session_id, to)
    called = _called(document)
    answered = answered_call_ids(document["transcript"])
    claims, moved_claims = _split(await store.backend.read_rows(session_id, CLAIMS), called)
    decisions, moved_decisions = _split(
        await store.backend.read_rows(session_id, DECISIONS), called
    )
    archived = await store.backend.read_rows(session_id, REWOUND_CLAIMS)
    back = {key: text for key, text in archived.items() if key in called and key not in claims}
    archived_decisions = await store.backend.read_rows(session_id, REWOUND_DECISIONS)
    back_decisions = {
        key: text
        for key, text in archived_decisions.items()
        if key in called and key not in decisions
    }
    restored = {
        call_id: decode_record(text, ClaimRow, session_id, f"{CLAIMS} row {call_id!r}")
        for call_id, text in {**claims, **back}.items()
        if call_id not in answered
    }
    again = {  # claimed, no result in the step: in doubt again, never run twice
        call_id: attrs.evolve(claim, answered=False) for call_id, claim in restored.items()
    }
    side = SideRows(
        rows={
            CLAIMS: {key: text for key, text in back.items() if key not in again},
            DECISIONS: back_decisions,
            REWOUND_CLAIMS: moved_claims,
            REWOUND_DECISIONS: moved_decisions,
        },
        drop={
            CLAIMS: tuple(moved_claims),
            DECISIONS: tuple(moved_decisions),
            REWOUND_CLAIMS: tuple(back),
            REWOUND_DECISIONS: tuple(back_decisions),
        },
    )
    return await store._save(
        session_id,
        document,
        expected_version,
        None,
        origin=f"rewound to step {to}",
        claim_rows=again,
        side=side,
    )


def _called(document: Mapping[str, Any]) -> set[str]:
    """The ids of the tool calls in ``document``'s transcript."""
    return {
        part["id"]
        for item in document["transcript"]
        for part in item.get("parts", ())
        if isinstance(part, Mapping) and part.get("type") == "tool_call" and "id" in part
    }


def _split(rows: Mapping[str, str], called: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """``rows`` of the calls in ``called`` (kept), and the others (set aside by a rewind)."""
    kept = {key: text for key, text in rows.items() if key in called}
    return kept, {key: text for key, text in rows.items() if key not in called}


class StepHistory:
    """The :class:`~agentloop.store.SessionHistory` methods of ``BackendSessionStore``."""

    async def history(self: HistoryHost, session_id: str) -> list[SavedStep]:
        """The session's kept steps, oldest first (``[]`` for an unknown session)."""
        return await list_steps(self, session_id)

    async def load_step(self: HistoryHost, session_id: str, step: int) -> StoredSession:
        """The session as saved at ``step``, with the calls in doubt then (claimed before
        that save, no result in it); ``InvalidInputError`` naming the kept steps."""
        return await load_step(self, session_id, step)

    async def fork(
        self: HistoryHost, session_id: str, *, at: int | None, new_session_id: str
    ) -> int:
        """Save step ``at`` (``None``: the latest document) as the first step of
        ``new_session_id`` (``StaleSessionError`` if it exists); its version.

        The fork's past is the step's: its calls claimed before that save with no
        result are in doubt in the fork; nothing the original did later is. The
        original is unchanged."""
        return await fork_session(self, session_id, at, new_session_id)

    async def rewind(
        self: HistoryHost, session_id: str, *, to: int, expected_version: int | None = None
    ) -> int:
        """Save step ``to`` as the session's next step (its history is kept); its version.

        A call the step holds that ran after it (no result there) is in doubt again,
        never run twice; the claims and decisions of the calls it does not hold are
        set aside (``rewound_*`` tables) and brought back by a rewind to a step that
        holds them."""
        return await rewind_session(self, session_id, to, expected_version)
