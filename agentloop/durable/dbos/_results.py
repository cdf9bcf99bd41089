"""What a durable run hands back: its result, its approvals, its errors."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import attrs

from ...core._errors import AgentLoopError, ProviderError
from ...core._items import FinishReason, Item

__all__ = [
    "ApprovalOutcome",
    "ApprovalStatus",
    "DurableApproval",
    "DurableError",
    "DurableRunResult",
]


class DurableError(AgentLoopError):
    """Raised when a durable run cannot start or end as asked.

    An unknown agent name, a session whose previous run failed, a run that
    failed inside DBOS, or a wait that timed out; the message names the
    workflow and what was found.
    """


class ApprovalStatus(StrEnum):
    """How an approval the workflow waited for ended."""

    APPROVED = "approved"
    APPROVED_WITH = "approved_with"
    DENIED = "denied"
    EXPIRED = "expired"
    """No decision arrived before the stored deadline: denied, fail-closed."""


@attrs.frozen(kw_only=True)
class ApprovalOutcome:
    """One approval of a durable run and how it ended; ``deadline`` is UTC epoch seconds."""

    call_id: str
    tool_name: str
    status: ApprovalStatus
    deadline: float
    reason: str | None = None


@attrs.frozen(kw_only=True)
class DurableApproval:
    """The approval a workflow waits for now (its ``APPROVAL_EVENT``)."""

    call_id: str
    tool_name: str
    input: Any
    summary: str
    deadline: float


@attrs.frozen(kw_only=True)
class DurableRunResult:
    """How one run (one input) of a durable session ended.

    ``run`` numbers the session's runs from 1; ``transcript`` is the whole
    session history afterwards. A model failure ends the turn, not the
    session: ``finish_reason`` is ``ERROR``, ``error`` the ``ProviderError``
    (its ``kind`` says what failed), and the next input continues the
    session. ``retries`` counts the turn retries the agent's
    ``TurnRetryPolicy`` made in this run; ``executor_id`` is the DBOS
    executor that ran (or last recovered) it.
    """

    workflow_id: str
    session_id: str
    run: int
    finish_reason: FinishReason
    transcript: tuple[Item, ...]
    approvals: tuple[ApprovalOutcome, ...] = ()
    retries: int = 0
    executor_id: str | None = None
    error: ProviderError | None = attrs.field(default=None, eq=False)
