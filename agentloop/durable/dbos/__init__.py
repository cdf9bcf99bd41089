"""Sessions as DBOS Transact workflows (``pip install agentloop[dbos]``).

A session run is the DBOS workflow :data:`SESSION_WORKFLOW`; each model call
and each tool call in it is a DBOS step whose result DBOS records, so a
recovered run never asks the model again for a recorded response nor
repeats a recorded tool call. Non-idempotent tools are also claimed in a
``SessionStore`` inside their step: a step DBOS runs again after a crash
answers in doubt. Approvals wait durably (``DBOS.recv``) and expire denied.
See ``docs/durable.md``.
"""

from ._steps import (
    IN_DOUBT_TEXT,
    MODEL_STEP,
    TOOL_STEP,
    DurableModel,
    DurableToolSource,
    RecordedToolFailure,
)
from ._workflow import (
    APPROVAL_EVENT,
    SESSION_WORKFLOW,
    ApprovalOutcome,
    ApprovalStatus,
    DurableAgent,
    DurableError,
    DurableRunResult,
    PendingApproval,
    approval_topic,
    approve,
    dbos_config,
    enqueue_session,
    pending_approval,
    start_session,
    wait_result,
)

__all__ = [
    "APPROVAL_EVENT",
    "IN_DOUBT_TEXT",
    "MODEL_STEP",
    "SESSION_WORKFLOW",
    "TOOL_STEP",
    "ApprovalOutcome",
    "ApprovalStatus",
    "DurableAgent",
    "DurableError",
    "DurableModel",
    "DurableRunResult",
    "DurableToolSource",
    "PendingApproval",
    "RecordedToolFailure",
    "approval_topic",
    "approve",
    "dbos_config",
    "enqueue_session",
    "pending_approval",
    "start_session",
    "wait_result",
]
