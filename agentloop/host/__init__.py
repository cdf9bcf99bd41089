"""Host conveniences over the step driver: ``run()``, ``stream()`` and ``continue_from()``.

They only call ``driver.next()``; see ``docs/host.md``.
"""

from ._run import (
    DEFAULT_MAX_STEPS,
    DEFAULT_SESSION_ID,
    Approver,
    ApproverReply,
    RunResult,
    RunStopReason,
    TurnRetryPolicy,
    continue_from,
    run,
)
from ._stream import DEFAULT_BUFFER_SIZE, EventStream, StreamItem, stream
from ._sync import run_sync

__all__ = [
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_SESSION_ID",
    "ApproverReply",
    "Approver",
    "EventStream",
    "TurnRetryPolicy",
    "RunResult",
    "RunStopReason",
    "StreamItem",
    "continue_from",
    "run",
    "run_sync",
    "stream",
]
