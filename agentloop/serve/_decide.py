"""Recording a decision made in the inbox: checked, single-use, digest-bound, audited.

``Decider.decide`` refuses (``DecisionRefused``, with an HTTP status and a
message for the page) a decision on a session that is gone or moved on, an
approval already answered, shown for other input, or past its deadline, and
edited input the tool's schema rejects. Otherwise it records the decision
through ``store.record_approval``, with its deny reason or edited input
(single-use: a second, different decision is refused by the store itself),
and appends it to the audit log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import jsonschema
import structlog

from ..loop._session_store import ClaimError, SessionStore, input_digest
from ._audit import AuditEntry, AuditLog, DecisionAction
from ._inbox import InboxRow, pending_approvals
from ._limits import depth_problem
from ._redact import Redactor

__all__ = ["DecisionRefused", "Decider", "validate_input"]

log = structlog.get_logger("agentloop")

MAX_REASON = 2000


class DecisionRefused(Exception):
    """Raised when a decision cannot be recorded; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def validate_input(schema: Any, value: Any) -> str | None:
    """Why ``value`` does not match the tool's ``schema`` (``None`` when it does, or no schema)."""
    if schema is None:
        return None
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except jsonschema.exceptions.SchemaError as problem:
        return f"the tool's schema is invalid: {problem.message}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{'at ' + where + ': ' if where else ''}{error.message}"


class Decider:
    """Checks and records decisions for one store and audit log."""

    def __init__(
        self,
        store: SessionStore,
        audit: AuditLog,
        *,
        schemas: Callable[[], Mapping[str, Any]],
        agent_name: str,
        ttl: float | None,
        redactor: Redactor,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._audit = audit
        self._schemas = schemas
        self._agent_name = agent_name
        self._ttl = ttl
        self._redactor = redactor
        self._clock = clock
        self._lock = anyio.Lock()

    async def decide(
        self,
        session_id: str,
        call_id: str,
        *,
        action: str,
        shown_digest: str,
        who: str,
        reason: str | None = None,
        edited_input: str | None = None,
    ) -> AuditEntry:
        """Record ``action`` on the call; ``DecisionRefused`` says why not."""
        try:
            kind = DecisionAction(action)
        except ValueError:
            raise DecisionRefused(
                f"unknown action {action!r}; expected approve, approve_with or deny", status=400
            ) from None
        if reason is not None and len(reason) > MAX_REASON:
            raise DecisionRefused(f"the reason is longer than {MAX_REASON} characters", status=422)
        if reason is not None and not _unicode(reason):
            raise DecisionRefused("the reason is not valid Unicode text", status=422)
        # One decision at a time in this process: a second tab's decision on the
        # same call sees the first one recorded (the store refuses across processes).
        async with self._lock:
            return await self._decide_locked(
                session_id, call_id, kind, shown_digest, who, reason or None, edited_input
            )

    async def _decide_locked(
        self,
        session_id: str,
        call_id: str,
        kind: DecisionAction,
        shown_digest: str,
        who: str,
        reason: str | None,
        edited_input: str | None,
    ) -> AuditEntry:
        row = await self._waiting_row(session_id, call_id, shown_digest)
        approved_input: Any = row.input
        if kind is DecisionAction.APPROVE_WITH:
            approved_input = self._parse_edit(edited_input, row.schema)
        entry = AuditEntry(
            session_id=session_id,
            call_id=call_id,
            tool_name=row.tool_name,
            action=kind,
            input_digest=input_digest(row.tool_name, approved_input),
            decided_by=who,
            decided_at=self._clock(),
            reason=reason if kind is DecisionAction.DENY else None,
            input=approved_input if kind is DecisionAction.APPROVE_WITH else None,
        )
        await self._record(entry)
        log.info(
            "approval decided",
            session_id=session_id,
            call_id=call_id,
            action=kind.value,
            decided_by=who,
            input_digest=entry.input_digest,
        )
        return entry

    async def _waiting_row(self, session_id: str, call_id: str, shown_digest: str) -> InboxRow:
        """The inbox row of the call, still undecided, unexpired and as shown; else refused."""
        stored = await self._store.load(session_id)
        if stored is None:
            raise DecisionRefused(f"session {session_id!r} no longer exists", status=404)
        earlier = stored.approvals.get(call_id)
        if earlier is not None:
            verdict = "approved" if earlier.approved else "denied"
            raise DecisionRefused(
                f"this approval was already answered: {verdict} at "
                f"{earlier.decided_at:%Y-%m-%d %H:%M:%S} UTC; nothing was changed",
                status=409,
            )
        rows = pending_approvals(
            stored,
            schemas=self._schemas(),
            agent_name=self._agent_name,
            ttl=self._ttl,
            redactor=self._redactor,
        )
        row = next((r for r in rows if r.call_id == call_id), None)
        shown_id = self._redactor.text(call_id)
        if row is None:
            raise DecisionRefused(
                f"session {session_id!r} moved on: call {shown_id!r} no longer waits for an "
                f"approval (the session is {stored.status.value}); nothing was recorded",
                status=409,
            )
        if shown_digest != row.digest:
            raise DecisionRefused(
                f"the arguments of call {shown_id!r} changed since this page was loaded; "
                "reload and decide again",
                status=409,
            )
        if row.deadline is not None and row.expired(self._clock()):
            raise DecisionRefused(
                f"this approval expired at {row.deadline:%Y-%m-%d %H:%M:%S} UTC; "
                "nothing was recorded",
                status=409,
            )
        return row

    async def _record(self, entry: AuditEntry) -> None:
        """The audit entry, then the store's record; the entry is removed if the store refuses.

        The audit entry comes first, so no decision is ever in the store without
        it; the reason and the edited input go with the store's record, where
        every worker resuming the session reads them.
        """
        await self._audit.add(entry)
        try:
            await self._store.record_approval(
                entry.session_id,
                entry.call_id,
                input_digest=entry.input_digest,
                approved=entry.action is not DecisionAction.DENY,
                reason=entry.reason,
                edited_input=entry.input,
            )
        except BaseException as error:
            with anyio.CancelScope(shield=True):
                await self._audit.remove(entry)
            if not isinstance(error, ClaimError):
                raise
            message = (
                "this approval was already answered elsewhere; nothing was changed"
                if error.reason == "decided"
                else "the call was already claimed by a worker (it may have run); "
                "nothing was changed"
            )
            raise DecisionRefused(message, status=409) from None

    @staticmethod
    def _parse_edit(text: str | None, schema: Any) -> Any:
        if text is None or not text.strip():
            raise DecisionRefused("the edited arguments are empty; enter a JSON value", status=422)
        too_deep = depth_problem(text, "the edited arguments")
        if too_deep is not None:
            raise DecisionRefused(f"refused: {too_deep}", status=400)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise DecisionRefused(
                f"the edited arguments are not JSON: {error.msg} at line {error.lineno} "
                f"column {error.colno}",
                status=422,
            ) from None
        if value is None:
            raise DecisionRefused(
                "the edited arguments are null; enter the tool's arguments as JSON", status=422
            )
        problem = validate_input(schema, value)
        if problem is not None:
            raise DecisionRefused(
                f"the edited arguments do not match the tool's schema: {problem}", status=422
            )
        try:
            input_digest("edit", value)
        except Exception as error:
            detail = str(error).removeprefix("cannot digest the input of tool 'edit': ")
            raise DecisionRefused(
                f"the edited arguments cannot be used: {detail}", status=422
            ) from None
        return value


def _unicode(text: str) -> bool:
    """Whether ``text`` is encodable (no lone surrogates, which JSON escapes can carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
