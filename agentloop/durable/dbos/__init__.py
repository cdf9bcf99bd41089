"""Sessions as chains of DBOS Transact workflows (``pip install 'agentloop-runtime[dbos]'``).

Each input of a session is one run, the DBOS workflow :data:`SESSION_WORKFLOW`
with id ``<session_id>#<run>``: it continues from the previous run's
checkpoint, and each model call and tool call in it is a DBOS step whose
result DBOS records, so a recovered run never asks the model again for a
recorded response nor repeats a recorded tool call. Non-idempotent tools
are also claimed in a ``SessionStore`` inside their step: a step DBOS runs
again after a crash answers in doubt. A model failure ends the turn
(``FinishReason.ERROR``), not the session. Approvals wait durably
(``DBOS.recv``) and expire denied. See ``docs/durable.md``.
"""

from ..._extras import require_extra as _require_extra

_require_extra("dbos", "agentloop.durable.dbos", "dbos")

from ._agent import DurableAgent, dbos_config, run_workflow_id
from ._host import (
    approve,
    enqueue_input,
    latest_run,
    pending_approval,
    send_input,
    wait_result,
)
from ._results import (
    ApprovalOutcome,
    ApprovalStatus,
    DurableApproval,
    DurableError,
    DurableRunResult,
)
from ._steps import (
    IN_DOUBT_TEXT,
    MODEL_STEP,
    TOOL_STEP,
    DurableModel,
    DurableToolSource,
    RecordedToolFailure,
)
from ._workflow import APPROVAL_EVENT, SESSION_WORKFLOW, approval_topic

__all__ = [
    "APPROVAL_EVENT",
    "IN_DOUBT_TEXT",
    "MODEL_STEP",
    "SESSION_WORKFLOW",
    "TOOL_STEP",
    "ApprovalOutcome",
    "ApprovalStatus",
    "DurableAgent",
    "DurableApproval",
    "DurableError",
    "DurableModel",
    "DurableRunResult",
    "DurableToolSource",
    "RecordedToolFailure",
    "approval_topic",
    "approve",
    "dbos_config",
    "enqueue_input",
    "latest_run",
    "pending_approval",
    "run_workflow_id",
    "send_input",
    "wait_result",
]
