"""The records :class:`BackendSessionStore` keeps in a backend's texts, and their codec.

A session's ``meta`` (its version, status, lease and row counts), each claim
row, decision row and answer row is an attrs record, turned into JSON text by the
package's converter (``agentloop.loop._converter``: strict, extra keys refused) and
back. A text that does not decode raises ``CheckpointError`` naming the
session and the row, so a damaged backend fails closed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import attrs

from ..core._errors import CheckpointError
from ..loop import _converter
from ..loop._session_store import Claim, Lease, RecordedApproval, SessionStatus
from ..loop._stored_answers import RecordedAnswer
from ._json import compact, describe_error

__all__ = [
    "ANSWERS",
    "ITEMS",
    "TURN_LIST_PREFIX",
    "AnswerRow",
    "ClaimRow",
    "DecisionRow",
    "HistoryMark",
    "LeaseRecord",
    "SessionMeta",
    "decode_record",
    "encode_record",
    "timestamp",
]

ITEMS = "items"
"""The list of the transcript's item texts."""
ANSWERS = "answers"
"""The table of recorded answers, by question id."""
TURN_LIST_PREFIX = "turn."
"""Prefix of the lists of the turn's growing lists (``turn.items``, ``turn.tool_calls``...)."""

_FIX = "the store is damaged: restore it from a backup or delete the session"


def timestamp(seconds: float) -> datetime:
    """Seconds since the epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)


@attrs.frozen(kw_only=True)
class LeaseRecord:
    """A session's last granted lease."""

    owner: str
    token: int
    expires_at: float
    released: bool = False

    def live(self, now: float) -> bool:
        """Whether it still excludes other owners at ``now``."""
        return not self.released and self.expires_at > now

    def as_lease(self, session_id: str) -> Lease:
        """The public :class:`Lease`."""
        return Lease(
            session_id=session_id,
            owner=self.owner,
            token=self.token,
            expires_at=timestamp(self.expires_at),
        )


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

    def approval(self, session_id: str, call_id: str) -> RecordedApproval:
        """The public :class:`RecordedApproval` (``CheckpointError`` if the edited input
        is damaged)."""
        edited: Any = None
        if self.edited_input is not None:
            try:
                edited = json.loads(self.edited_input)
            except ValueError as error:
                raise CheckpointError(
                    f"cannot load the decision on call {call_id!r} of session {session_id!r}: "
                    f"its stored edited input is not JSON ({error}); delete the session or "
                    "record the decision again"
                ) from None
        return RecordedApproval(
            session_id=session_id,
            call_id=call_id,
            input_digest=self.input_digest,
            approved=self.approved,
            decided_at=timestamp(self.decided_at),
            reason=self.reason,
            edited_input=edited,
        )


@attrs.frozen(kw_only=True)
class AnswerRow:
    """A recorded answer: its action, its content (JSON) and when it was recorded."""

    action: str
    content: Any = None
    answered_at: float

    def answer(self, session_id: str, question_id: str) -> RecordedAnswer:
        """The public :class:`RecordedAnswer`."""
        return RecordedAnswer(
            session_id=session_id,
            question_id=question_id,
            action=self.action,
            content=self.content,
            answered_at=timestamp(self.answered_at),
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
