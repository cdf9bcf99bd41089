"""agentloop: a step-driven state-machine runtime for LLM agents.

Build an :class:`Agent`, ``await agent.start(config)`` to get a
:class:`LoopDriver`, and call ``await driver.next()`` until it returns
:class:`Finished` or an interrupt you resolve; or let :func:`run`,
:func:`stream` or :func:`run_sync` drive it.

This module exports what a host needs on its first day: the agent and its
driver, the session's configuration and limits, the steps and approval
answers, items and parts, ``@tool``, the errors, and the run functions.
Everything else lives in the subpackage named for it: ``agentloop.tools``,
``agentloop.permissions``, ``agentloop.tasks``, ``agentloop.store``,
``agentloop.model`` (adapters, caching, prices), ``agentloop.providers``,
``agentloop.observe`` (events and observers), ``agentloop.transcript``
(checks and mutators), ``agentloop.compaction``, ``agentloop.output``,
``agentloop.host``, ``agentloop.mcp``, ``agentloop.testing`` and more.
"""

from ._version import __version__ as __version__
from .core._cancellation import CancellationController, CancellationHandle, TurnCancellation
from .core._delta import AppendText, BeginPart, CommitPart, Delta
from .core._errors import (
    AgentLoopError,
    CheckpointError,
    IdleLoopWarning,
    InvalidInputError,
    InvalidStateError,
    ModelProtocolError,
    MutatorError,
    ProviderError,
    ProviderErrorKind,
    QuestionWithdrawnError,
    SaveError,
    ToolError,
    TranscriptError,
)
from .core._ids import ApprovalId, SessionId, TaskId, ToolCallId, TurnId
from .core._items import (
    CustomPart,
    FilePart,
    FinishReason,
    Item,
    ItemKind,
    MediaPart,
    Metadata,
    Part,
    PartKind,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from .core._tool_spec import ToolAnnotations, ToolSpec
from .host._run import (
    Approver,
    QuestionAnswerer,
    RunResult,
    RunStopReason,
    TurnRetryPolicy,
    continue_from,
    run,
)
from .host._stream import EventOrStep, EventStream, stream
from .host._sync import run_sync
from .loop._agent import Agent, AgentBuilder
from .loop._converter import converter, structure, unstructure
from .loop._driver import LoopDriver, LoopSnapshot
from .loop._events import ExecutedToolCall, ModelCallRecord, TurnResult
from .loop._state import DriverState, RetryPoint
from .loop._steps import (
    AfterToolResult,
    AnswerKind,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    Finished,
    Interrupt,
    Step,
)
from .model._protocol import ModelAdapter
from .model._session_config import LimitAction, LoopLimits, SessionConfig
from .output._errors import OutputValidationError
from .output._spec import OutputMode
from .tools._decorator import tool
from .tools._questions import QuestionAnswer
from .tools._registry import ToolRegistry
from .tools._tool import Tool, ToolContext, ToolOutput, ToolRequest

__all__ = [
    "AfterToolResult",
    "Agent",
    "AgentBuilder",
    "AgentLoopError",
    "AnswerKind",
    "AppendText",
    "ApprovalAnswer",
    "ApprovalId",
    "ApprovalRequest",
    "Approver",
    "AwaitingInput",
    "BeginPart",
    "CallInDoubt",
    "CallQuestion",
    "CancellationController",
    "CancellationHandle",
    "CheckpointError",
    "CommitPart",
    "CustomPart",
    "Delta",
    "DriverState",
    "EventOrStep",
    "EventStream",
    "ExecutedToolCall",
    "FilePart",
    "FinishReason",
    "Finished",
    "IdleLoopWarning",
    "Interrupt",
    "InvalidInputError",
    "InvalidStateError",
    "Item",
    "ItemKind",
    "LimitAction",
    "LoopDriver",
    "LoopLimits",
    "LoopSnapshot",
    "MediaPart",
    "Metadata",
    "ModelAdapter",
    "ModelCallRecord",
    "ModelProtocolError",
    "MutatorError",
    "OutputMode",
    "OutputValidationError",
    "Part",
    "PartKind",
    "ProviderError",
    "ProviderErrorKind",
    "QuestionAnswer",
    "QuestionAnswerer",
    "QuestionWithdrawnError",
    "ReasoningPart",
    "RetryPoint",
    "RunResult",
    "RunStopReason",
    "SaveError",
    "SessionConfig",
    "SessionId",
    "Step",
    "StructuredPart",
    "TaskId",
    "TextPart",
    "Tool",
    "ToolAnnotations",
    "ToolCallId",
    "ToolCallPart",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolRequest",
    "ToolResultPart",
    "ToolSpec",
    "TranscriptError",
    "TurnCancellation",
    "TurnId",
    "TurnResult",
    "TurnRetryPolicy",
    "Usage",
    "continue_from",
    "converter",
    "run",
    "run_sync",
    "stream",
    "structure",
    "tool",
    "unstructure",
]
