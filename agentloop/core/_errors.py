"""The exception tree of agentloop.

::

    AgentLoopError
    ├── InvalidStateError       an operation does not fit the driver's current state
    ├── InvalidInputError       an argument is malformed (also a ValueError)
    ├── ProviderError           the model adapter or its stream failed
    ├── ToolError               a tool source, executor or task manager broke its contract
    ├── MutatorError            a loop mutator failed or broke the transcript invariant
    ├── TranscriptError         a transcript violates the tool_call/tool_result invariant
    └── CheckpointError         a checkpoint document cannot be restored

A cancelled turn is a result (``FinishReason.CANCELLED``), never an exception.
"""

from __future__ import annotations

__all__ = [
    "AgentLoopError",
    "CheckpointError",
    "InvalidInputError",
    "InvalidStateError",
    "MutatorError",
    "ProviderError",
    "ToolError",
    "TranscriptError",
]


class AgentLoopError(Exception):
    """Root of every error agentloop raises on purpose."""


class InvalidStateError(AgentLoopError):
    """Raised when an operation is called in a state that cannot accept it."""


class InvalidInputError(AgentLoopError, ValueError):
    """Raised when an argument is malformed; nothing was changed."""


class ProviderError(AgentLoopError):
    """Raised when a model adapter fails or its stream breaks the protocol.

    ``status`` is the HTTP status when there is one, ``error_type`` the
    provider's own error type string when it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.retryable = retryable


class ToolError(AgentLoopError):
    """Raised when a tool source, executor or task manager breaks its contract.

    Ordinary tool failures never raise: they become error tool results the
    model can read.
    """


class MutatorError(AgentLoopError):
    """Raised when a loop mutator fails or leaves an invalid transcript."""


class TranscriptError(AgentLoopError):
    """Raised when a transcript violates the tool_call/tool_result invariant.

    ``violation`` says which rule broke (``"orphaned"``, ``"duplicate"``,
    ``"duplicate_call"`` or ``"unanswered"``) and ``call_ids`` which calls.
    """

    def __init__(self, message: str, *, violation: str, call_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.violation = violation
        self.call_ids = call_ids


class CheckpointError(AgentLoopError):
    """Raised when a checkpoint document is malformed, unknown or inconsistent."""
