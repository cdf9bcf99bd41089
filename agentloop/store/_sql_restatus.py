"""A schema step of the SQL stores: sessions resting on a question or on a call in doubt
get their own status.

Before SQLite schema 7 (PostgreSQL migration 5) a session saved while a
running call waited on a question (document state ``AWAITING_ANSWER``) was
stored with status ``awaiting_input``: the inbox's queries could not find
it; before schema 8 (migration 6) the same held for a session resting on a
call in doubt (``AWAITING_RESOLUTION``). The step re-derives the status of
those heads (``summarize``: ``awaiting_answer`` with the question ids as
pending, or ``awaiting_resolution``) in the transaction that records the new
version; every other head is left byte for byte. A head whose meta or
document does not decode is left as it is (a load reports it). Running it
again changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..loop._session_store import SessionStatus, summarize
from ._records import SessionMeta, decode_record, encode_record

__all__ = ["restatus_questions"]

_RESTATUSED = {
    "AWAITING_ANSWER": SessionStatus.AWAITING_ANSWER,
    "AWAITING_RESOLUTION": SessionStatus.AWAITING_RESOLUTION,
}


def restatus_questions(
    heads: Iterable[tuple[str, str, str | None]], update: Callable[[str, str], object]
) -> int:
    """Call ``update(session_id, meta)`` for each head ``(session_id, meta, document)``
    resting on a question or a call in doubt but stored as awaiting input; return how many
    it updated."""
    updated = 0
    for session_id, meta_text, document in heads:
        if document is None or not any(f'"{state}"' in document for state in _RESTATUSED):
            continue  # cheap: no head of another state is decoded
        meta = _decoded(session_id, meta_text)
        parsed = _document(document)
        if meta is None or parsed is None or meta.status is not SessionStatus.AWAITING_INPUT:
            continue
        status, pending = summarize(parsed)
        if status not in _RESTATUSED.values():
            continue
        update(session_id, encode_record(attrs.evolve(meta, status=status, pending=pending)))
        updated += 1
    return updated


def _decoded(session_id: str, text: str) -> SessionMeta | None:
    try:
        return decode_record(text, SessionMeta, session_id, "its head's meta")
    except Exception:
        return None


def _document(text: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
