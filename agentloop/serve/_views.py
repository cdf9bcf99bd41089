"""The values the templates render: inbox rows, audit entries, decision statuses.

Call ids are chosen by the model, so a page never carries one raw: it shows
the id redacted and refers to the call by a *call reference*, an HMAC of the
session and call id (``CallRefs``), which the decision endpoint maps back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..loop._session_store import SessionStatus, StoredSession
from ._audit import AnswerEntry, AuditRecord, ResolutionEntry
from ._inbox import InboxRow, pretty, round_call_ids, waiting_calls
from ._redact import Redactor

__all__ = ["CallRefs", "decision_status", "entry_values", "row_values", "waited"]


class CallRefs:
    """Opaque references to calls (``ref-`` and 32 hex digits), keyed by the access token."""

    def __init__(self, token: str) -> None:
        self._key = hmac.new(token.encode(), b"agentloop-serve-call-ref", "sha256").digest()

    def ref(self, session_id: str, call_id: str) -> str:
        """The reference a page uses for ``call_id`` of ``session_id``."""
        message = f"{session_id}\x00{call_id}".encode("utf-8", "surrogatepass")
        return "ref-" + hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]

    def resolve(self, stored: StoredSession, ref: str) -> str | None:
        """The call of ``stored`` (in its round, or decided) that ``ref`` names, or ``None``."""
        candidates: Iterable[str] = [*round_call_ids(stored.checkpoint), *stored.approvals]
        for call_id in candidates:
            if hmac.compare_digest(self.ref(stored.session_id, call_id), ref):
                return call_id
        return None


def waited(since: datetime | None, now: datetime) -> str:
    """How long since ``since``, for people: ``45 s``, ``12 min``, ``3 h``, ``2 days``."""
    if since is None:
        return "(unknown)"
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def row_values(row: InboxRow, now: datetime, refs: CallRefs, redactor: Redactor) -> dict[str, Any]:
    """One inbox card's values."""
    return {
        "session_id": row.session_id,
        "agent": row.agent,
        "call_ref": refs.ref(row.session_id, row.call_id),
        "call_id": redactor.text(row.call_id),
        "tool_name": redactor.text(row.tool_name),
        "digest": row.digest,
        "requests": row.requests,
        "display_input": row.display_input,
        "edit_input": row.display_input,  # redacted too: a secret is never rendered
        "schema_json": "" if row.schema is None else json.dumps(row.schema),
        "waited": waited(row.asked_at, now),
        "deadline": None if row.deadline is None else f"{row.deadline:%Y-%m-%d %H:%M:%S} UTC",
        "expired": row.expired(now),
    }


def entry_values(entry: AuditRecord, redactor: Redactor) -> dict[str, Any]:
    """One audit entry's values (the audit page, the "recently decided" table)."""
    if isinstance(entry, AnswerEntry):
        return _answer_values(entry, redactor)
    if isinstance(entry, ResolutionEntry):
        return _resolution_values(entry, redactor)
    return {
        "session_id": entry.session_id,
        "call_id": redactor.text(entry.call_id),
        "tool_name": redactor.text(entry.tool_name),
        "question": None,
        "action": entry.action.value.replace("_", " "),
        "decided_by": entry.decided_by,
        "decided_at": entry.decided_at,
        "reason": redactor.text(entry.reason) if entry.reason else None,
        "input": entry.input,
        "input_text": pretty(redactor.json(entry.input)),
        "input_digest": entry.input_digest,
    }


def _answer_values(entry: AnswerEntry, redactor: Redactor) -> dict[str, Any]:
    """An answer's values: the question and its kind; the content, or its size when not kept."""
    accepted = entry.action.value == "accept"
    if not accepted:
        shown = None
    elif entry.content_kept:
        shown = pretty(redactor.json(entry.content))
    else:
        shown = f"(content of {entry.content_size} bytes, not kept; the store has it)"
    return {
        "session_id": entry.session_id,
        "call_id": redactor.text(entry.call_id),
        "tool_name": redactor.text(entry.tool_name),
        "question": {"id": redactor.text(entry.question_id), "kind": redactor.text(entry.kind)},
        "action": f"answer: {entry.action.value}",
        "decided_by": entry.decided_by,
        "decided_at": entry.decided_at,
        "reason": None,
        "input": shown,
        "input_text": shown,
        "input_digest": entry.content_digest,
    }


def _resolution_values(entry: ResolutionEntry, redactor: Redactor) -> dict[str, Any]:
    """A resolution's values: the call in doubt, the settled result or the failure reason."""
    if entry.resolution == "run_again":
        shown = None
    elif entry.value_kept:
        shown = redactor.text(entry.value) if isinstance(entry.value, str) else pretty(entry.value)
    else:
        shown = f"({entry.value_size} bytes, not kept)"
    return {
        "session_id": entry.session_id,
        "call_id": redactor.text(entry.call_id),
        "tool_name": redactor.text(entry.tool_name),
        "question": None,
        "action": f"in doubt: {entry.resolution.replace('_', ' ')}",
        "decided_by": entry.decided_by,
        "decided_at": entry.decided_at,
        "reason": None,
        "input": shown,
        "input_text": shown,
        "input_digest": entry.value_digest,
    }


def decision_status(stored: StoredSession | None, entry: AuditRecord, redactor: Redactor) -> str:
    """What the decided call's session does now, as the "recently decided" table shows it."""
    if stored is None:
        return "deleted"
    if isinstance(entry, ResolutionEntry):
        return str(stored.status.value).replace("_", " ")
    if isinstance(entry, AnswerEntry):
        if entry.question_id in stored.answers and stored.status is SessionStatus.AWAITING_ANSWER:
            return "waiting for a worker to resume the session"
        return str(stored.status.value).replace("_", " ")
    waiting = waiting_calls(stored.checkpoint)
    if stored.status is SessionStatus.AWAITING_APPROVAL and entry.call_id in waiting:
        undecided = [c for c in waiting if c not in stored.approvals]
        if undecided:
            return f"waiting for approval of call {redactor.text(undecided[0])}"
        return "waiting for a worker to resume the session"
    return str(stored.status.value).replace("_", " ")
