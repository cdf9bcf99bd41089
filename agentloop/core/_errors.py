"""The exception tree of agentloop.

::

    AgentLoopError
    ├── InvalidStateError       an operation does not fit the driver's current state
    ├── InvalidInputError       an argument is malformed (also a ValueError)
    ├── ProviderError           the model adapter or its stream failed
    │   ├── ModelProtocolError  a model's output broke the protocol (e.g. a non-assistant item)
    │   └── OutputValidationError  (agentloop.output) the answer never matched the output schema
    ├── ToolError               a tool source, executor or task manager broke its contract
    ├── MutatorError            a loop mutator failed or broke the transcript invariant
    ├── TranscriptError         a transcript violates the tool_call/tool_result invariant
    ├── CheckpointError         a checkpoint document cannot be restored
    └── SaveError               a driver could not save its session to its store

A cancelled turn is a result (``FinishReason.CANCELLED``), never an exception.

Warnings (``warnings.warn``)::

    UserWarning
    └── IdleLoopWarning         a host keeps calling next() on AwaitingInput, submitting nothing
"""

from __future__ import annotations

import enum

__all__ = [
    "AgentLoopError",
    "CheckpointError",
    "IdleLoopWarning",
    "InvalidInputError",
    "InvalidStateError",
    "ModelProtocolError",
    "MutatorError",
    "ProviderError",
    "ProviderErrorKind",
    "QuestionWithdrawnError",
    "SaveError",
    "ToolError",
    "TranscriptError",
]


class AgentLoopError(Exception):
    """Root of every error agentloop raises on purpose."""


class InvalidStateError(AgentLoopError):
    """Raised when an operation is called in a state that cannot accept it."""


class QuestionWithdrawnError(InvalidStateError):
    """Raised when a ``CallQuestion`` is answered after its call stopped waiting for it
    (the call ended, was cancelled, timed out, or an MCP server cancelled its request);
    nothing was recorded. ``next()`` goes on with the call's result."""

    def __init__(self, message: str, *, question_id: str, call_id: str) -> None:
        super().__init__(message)
        self.question_id = question_id
        self.call_id = call_id


class InvalidInputError(AgentLoopError, ValueError):
    """Raised when an argument is malformed; nothing was changed."""


class ProviderErrorKind(enum.Enum):
    """What a :class:`ProviderError` means for the caller (what to do next).

    ``RETRYABLE``: rate limit, overload, 5xx, network, timeout, a cut stream --
    the same request may succeed later. ``CONTEXT_OVERFLOW``: the request has
    more tokens than the model's context window (compact, then retry).
    ``AUTH``: the API key is missing, wrong or lacks permission.
    ``INVALID_REQUEST``: the provider refused the request as malformed.
    ``CONTENT_FILTER``: the provider's safety system refused the request.
    ``INVALID_RESPONSE``: the provider answered with something agentloop cannot
    read (malformed JSON, wrong types, a model output that breaks the protocol).
    ``OTHER``: none of the above.
    """

    RETRYABLE = "retryable"
    CONTEXT_OVERFLOW = "context_overflow"
    AUTH = "auth"
    INVALID_REQUEST = "invalid_request"
    CONTENT_FILTER = "content_filter"
    INVALID_RESPONSE = "invalid_response"
    OTHER = "other"


class ProviderError(AgentLoopError):
    """Raised when a model adapter fails or its stream breaks the protocol.

    ``status`` is the HTTP status when there is one, ``error_type`` the
    provider's own error type string when it gave one, ``kind`` the class of
    the failure (:class:`ProviderErrorKind`). ``retryable`` is ``kind is
    ProviderErrorKind.RETRYABLE``; passing ``retryable=True`` without a
    ``kind`` makes the kind ``RETRYABLE``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        retryable: bool = False,
        kind: ProviderErrorKind | None = None,
    ) -> None:
        super().__init__(message)
        if kind is None:
            kind = ProviderErrorKind.RETRYABLE if retryable else ProviderErrorKind.OTHER
        self.status = status
        self.error_type = error_type
        self.kind = kind
        self.retryable = kind is ProviderErrorKind.RETRYABLE


class ModelProtocolError(ProviderError):
    """Raised when a model's output breaks the protocol before it enters the transcript.

    For example a tool result, user or system item coming from a model. Its
    ``kind`` is always ``ProviderErrorKind.INVALID_RESPONSE``.
    """

    def __init__(self, message: str, *, error_type: str | None = "model_protocol") -> None:
        super().__init__(message, error_type=error_type, kind=ProviderErrorKind.INVALID_RESPONSE)


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


class SaveError(AgentLoopError):
    """Raised when a driver could not save its session to its store.

    The storage fault (disk full, a locked database, an unserializable value)
    is ``__cause__``. ``step`` is the step ``next()`` produced and could not
    save (``None`` when the save came before the step, e.g. the host's input
    before the model call). Nothing was lost in memory: the driver is in the
    state the step left it in; ``await driver.save()`` tries again, and the
    step can then be handled as if ``next()`` had returned it.
    """

    def __init__(self, message: str, *, session_id: str, step: object = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.step = step


class IdleLoopWarning(UserWarning):
    """Warned when a host calls ``next()`` on ``AwaitingInput`` again and again without
    submitting input (a loop that spins at full CPU); once per run of idle steps.

    Submit input (``step.submit(...)``) or end the host loop on ``AwaitingInput``.
    """
