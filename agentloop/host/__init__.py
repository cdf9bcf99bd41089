"""Host conveniences over the step driver: ``run()``, ``stream()``, ``continue_from()``,
and ``SessionWorker``, which advances a store's sessions under leases.

They only call ``driver.next()``; see ``docs/host.md`` and ``docs/store.md``.
"""

from ._run import (
    DEFAULT_MAX_STEPS,
    DEFAULT_SESSION_ID,
    Approver,
    QuestionAnswerer,
    RunResult,
    RunStopReason,
    TurnRetryPolicy,
    continue_from,
    run,
)
from ._stream import DEFAULT_BUFFER_SIZE, EventOrStep, EventStream, stream
from ._sync import run_sync
from ._worker import AdvancedSession, SessionWorker

__all__ = [
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_SESSION_ID",
    "AdvancedSession",
    "Approver",
    "EventOrStep",
    "EventStream",
    "QuestionAnswerer",
    "RunResult",
    "RunStopReason",
    "SessionWorker",
    "TurnRetryPolicy",
    "continue_from",
    "run",
    "run_sync",
    "stream",
]
