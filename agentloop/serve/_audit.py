"""The audit log: who decided which approval or answered which question, when, and how.

The store's ``record_approval`` keeps the single-use decision (approved or
not, bound to an input digest); the audit log keeps what the store has no
column for: who made it, the action (approve / approve with edits / deny),
the edited input and the deny reason (an ``AuditEntry``). An answer to a
running call's question (``record_answer``) is an ``AnswerEntry``: who, the
question and its kind, accept / decline / cancel, and the content, redacted
and bounded (``MAX_AUDITED_CONTENT``) with the digest of the exact content
recorded. A call in doubt settled, failed or run again is a
``ResolutionEntry``. The SQL logs are in ``_audit_sql``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

import attrs

from ..tools._questions import QuestionAction

__all__ = [
    "MAX_AUDITED_CONTENT",
    "AnswerEntry",
    "AuditEntry",
    "AuditLog",
    "AuditRecord",
    "DecisionAction",
    "MemoryAuditLog",
    "ResolutionEntry",
    "answer_entry_content",
]

MAX_AUDITED_CONTENT = 64 * 1024
"""The largest answer content (bytes of its JSON) an ``AnswerEntry`` keeps; past it only
its size and digest are kept (the store holds the answer itself)."""


class DecisionAction(StrEnum):
    """What the person deciding chose."""

    APPROVE = "approve"
    APPROVE_WITH = "approve_with"
    DENY = "deny"


@attrs.frozen(kw_only=True)
class AuditEntry:
    """One decision made in the inbox.

    ``input`` is the edited input for ``APPROVE_WITH`` (else ``None``);
    ``input_digest`` is the digest of the exact input approved (or denied).
    """

    session_id: str
    call_id: str
    tool_name: str
    action: DecisionAction
    input_digest: str
    decided_by: str
    decided_at: datetime
    reason: str | None = None
    input: Any = None


@attrs.frozen(kw_only=True)
class AnswerEntry:
    """One answer to a running call's question, given in the inbox.

    ``question_id``, ``kind`` (``"mcp.elicitation"``, ``"mcp.sampling"``, a
    child agent's approval, ...), ``call_id`` and ``tool_name`` name the
    question; ``content`` is the accepted answer's content with secrets
    redacted, ``None`` for a decline or cancel and when its JSON is past
    ``MAX_AUDITED_CONTENT`` bytes (``content_kept`` is then ``False``);
    ``content_size`` is that size and ``content_digest`` the SHA-256 of the
    exact content recorded (before redaction).
    """

    session_id: str
    question_id: str
    call_id: str
    tool_name: str
    kind: str
    action: QuestionAction
    content_digest: str
    content_size: int
    decided_by: str
    decided_at: datetime
    content: Any = None
    content_kept: bool = True


@attrs.frozen(kw_only=True)
class ResolutionEntry:
    """One call in doubt resolved in the inbox: settled, failed or run again.

    ``value`` is the settled result or the failure reason with secrets
    redacted (``None`` for a rerun, and when its JSON is past
    ``MAX_AUDITED_CONTENT`` bytes: ``value_kept`` is then ``False``);
    ``value_digest`` and ``value_size`` are those of the exact value.
    """

    session_id: str
    call_id: str
    tool_name: str
    resolution: str
    value_digest: str
    value_size: int
    decided_by: str
    decided_at: datetime
    value: Any = None
    value_kept: bool = True


AuditRecord = AuditEntry | AnswerEntry | ResolutionEntry
"""What the audit log holds: decisions on approvals, answers to questions, and
resolutions of calls in doubt."""


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode("utf-8")


def answer_entry_content(content: Any, redacted: Any) -> tuple[str, int, Any, bool]:
    """The digest and size of ``content`` (as recorded), and what an entry keeps of it:
    ``redacted`` when its JSON fits ``MAX_AUDITED_CONTENT`` bytes, else ``None``."""
    exact = _canonical(content)
    digest = "sha256:" + hashlib.sha256(exact).hexdigest()
    kept = len(_canonical(redacted)) <= MAX_AUDITED_CONTENT
    return digest, len(exact), redacted if kept else None, kept


class AuditLog(Protocol):
    """Where decisions and answers are written; newest first when listed."""

    async def add(self, entry: AuditRecord) -> None:
        """Append ``entry``; durable before it returns (it is written before the store's record)."""
        ...

    async def remove(self, entry: AuditRecord) -> None:
        """Drop ``entry``: the store refused the decision or answer it describes."""
        ...

    async def find(
        self, session_id: str, call_id: str, *, approved: bool, input_digest: str
    ) -> AuditEntry | None:
        """The latest entry for the call that matches the decision the store recorded."""
        ...

    async def entries(self, limit: int = 200) -> list[AuditRecord]:
        """The newest ``limit`` entries (decisions and answers), newest first."""
        ...


class MemoryAuditLog:
    """An audit log kept in memory (for a ``MemorySessionStore`` and tests)."""

    def __init__(self) -> None:
        self._entries: list[AuditRecord] = []

    async def add(self, entry: AuditRecord) -> None:
        """Append ``entry``."""
        self._entries.append(entry)

    async def remove(self, entry: AuditRecord) -> None:
        """Drop ``entry``."""
        if entry in self._entries:
            self._entries.remove(entry)

    async def find(
        self, session_id: str, call_id: str, *, approved: bool, input_digest: str
    ) -> AuditEntry | None:
        """The latest entry for the call that matches the recorded decision."""
        for entry in reversed(self._entries):
            if (
                isinstance(entry, AuditEntry)
                and (entry.session_id, entry.call_id) == (session_id, call_id)
                and matches(entry, approved, input_digest)
            ):
                return entry
        return None

    async def entries(self, limit: int = 200) -> list[AuditRecord]:
        """The newest ``limit`` entries, newest first."""
        return list(reversed(self._entries))[:limit]


def matches(entry: AuditEntry, approved: bool, input_digest: str) -> bool:
    """Whether ``entry`` is the decision the store recorded (approved or not, for that input)."""
    return (entry.action is not DecisionAction.DENY) == approved and (
        entry.input_digest == input_digest
    )
