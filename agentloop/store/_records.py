"""The records :class:`BackendSessionStore` keeps in a backend's texts, and their codec.

A session's ``meta`` (its version, status, lease and row counts), each claim
row and each decision row is an attrs record, turned into JSON text by the
package's converter (``agentloop.loop._converter``: strict, extra keys refused) and
back. A text that does not decode raises ``CheckpointError`` naming the
session and the row, so a damaged backend fails closed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from ..core._errors import CheckpointError
from ..loop import _converter
from ..loop._session_store import Claim, RecordedApproval, SessionStatus
from ._json import compact, describe_error
from ._rules import LeaseRow, stored_approval, timestamp

__all__ = [
    "ITEMS",
    "TURN_LIST_PREFIX",
    "ClaimRow",
    "DecisionRow",
    "HistoryMark",
    "LeaseRecord",
    "SessionMeta",
    "decode_record",
    "encode_record",
]

ITEMS = "items"
"""The list of the transcript's item texts."""
TURN_LIST_PREFIX = "turn."
"""Prefix of the lists of the turn's growing lists (``turn.items``, ``turn.tool_calls``...)."""

_FIX = "the store is damaged: restore it from a backup or delete the session"


@attrs.frozen(kw_only=True)
class LeaseRecord:
    """A session's last granted lease."""

    owner: str
    token: int
    expires_at: float
    released: bool = False

    def row(self) -> LeaseRow:
        """The lease as the shared rules take it."""
        return LeaseRow(self.owner, self.token, self.expires_at, self.released)


@attrs.frozen(kw_only=True)
class HistoryMark:
    """Where a session's step history stands (see ``_history.py``): its latest step,
    its latest full step (``base``) and its oldest kept step."""

    last: int
    base: int
    first: int


@attrs.frozen(kw_only=True)
class SessionMeta:
    """What a session's head says besides its document.

    ``version`` is the document's (``0``: never saved); ``item_count`` and
    ``turn_counts`` (the text ``turn_counts`` gave) are what a load checks
    the rows against; ``history`` where its step history stands (``None``: none kept).
    """

    version: int = 0
    updated_at: float = 0.0
    status: SessionStatus = SessionStatus.AWAITING_INPUT
    pending: tuple[str, ...] = ()
    item_count: int = 0
    turn_counts: str | None = None
    lease: LeaseRecord | None = None
    history: HistoryMark | None = None

    def lease_row(self) -> LeaseRow | None:
        """The session's last granted lease as the rules take it (``None``: never leased)."""
        return None if self.lease is None else self.lease.row()


@attrs.frozen(kw_only=True)
class ClaimRow:
    """A claimed (or started) call; ``answered`` once a save held its result.

    ``revision`` is the head revision of the commit that claimed it (``None``
    in rows written before it was kept): a step saved at a later revision has
    the claim in its past."""

    tool_name: str
    input_digest: str | None
    claimed_at: float
    answered: bool = False
    revision: int | None = None

    def claim(self, session_id: str, call_id: str) -> Claim:
        """The public :class:`Claim`."""
        return Claim(
            session_id=session_id,
            call_id=call_id,
            tool_name=self.tool_name,
            input_digest=self.input_digest,
            claimed_at=timestamp(self.claimed_at),
        )


@attrs.frozen(kw_only=True)
class DecisionRow:
    """A recorded decision; ``edited_input`` is the edited arguments' JSON text."""

    input_digest: str
    approved: bool
    decided_at: float
    reason: str | None = None
    edited_input: str | None = None

    def approval(
        self, session_id: str, call_id: str, *, newly_recorded: bool = False
    ) -> RecordedApproval:
        """The public :class:`RecordedApproval` (``CheckpointError`` if the edited input
        is damaged)."""
        return stored_approval(
            session_id,
            call_id,
            self.input_digest,
            self.approved,
            timestamp(self.decided_at),
            self.reason,
            self.edited_input,
            newly_recorded=newly_recorded,
        )


def encode_record(record: Any) -> str:
    """A record as compact JSON text, through the converter (its hook for the record's
    class, looked up once)."""
    kind = type(record)
    hook = _HOOKS.get(kind)
    if hook is None:
        hook = _HOOKS[kind] = _converter.converter.get_unstructure_hook(kind)
    return compact(hook(record))  # plain JSON by construction: no check needed


_HOOKS: dict[type, Callable[[Any], Any]] = {}


_R = TypeVar("_R")


def decode_record(text: object, kind: type[_R], session_id: str, what: str) -> _R:
    """The record ``kind`` stored as ``text``; ``CheckpointError`` naming ``what`` if damaged."""
    try:
        if not isinstance(text, str):
            raise TypeError(f"it holds {type(text).__name__}, expected JSON text")
        return _converter.structure(json.loads(text), kind)
    except Exception as error:
        reason = describe_error(error)
        raise CheckpointError(
            f"cannot load session {session_id!r}: {what} is damaged ({reason}); {_FIX}"
        ) from None
