"""The public surface is deliberate (httpx's ``tests/test_exported_members.py``).

Every public package's ``__all__`` is pinned here, in its order (constants,
classes, then functions): adding, renaming or dropping a public name is a
decision made in this file and recorded in ``CHANGELOG.md``. The root exports
what a host needs on its first day; everything else comes from the package
named for it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import agentloop

EXPORTED: dict[str, list[str]] = {
    "agentloop": [
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
    ],
    "agentloop.a2a": [
        "A2AConfig",
        "create_a2a_app",
    ],
    "agentloop.cli": [
        "main",
    ],
    "agentloop.compaction": [
        "CHARS_PER_TOKEN",
        "CONTEXT_OVERFLOW",
        "DEFAULT_SUMMARY_PROMPT",
        "DROPPED_KEY",
        "ELIDED_KEY",
        "ERROR_KIND_KEY",
        "MEDIA_TOKENS",
        "READ_RESULT_TOOL",
        "REPORT_KEY",
        "SUMMARY_KEY",
        "CompactionOutcome",
        "CompactionPipeline",
        "CompactionReport",
        "CompactionRequest",
        "CompactionStrategy",
        "CompactionTrigger",
        "Compactor",
        "ContextOverflowTrigger",
        "DropFailedResults",
        "ItemCountTrigger",
        "KeepRecent",
        "MemoryResultArchive",
        "ResultArchive",
        "SqliteResultArchive",
        "StrategyStep",
        "SummarizeOlder",
        "TokenBudgetTrigger",
        "TokenEstimator",
        "TrimLargeOutputs",
        "default_compactor",
        "estimate_tokens",
        "estimate_transcript",
        "is_compaction_mark",
        "is_context_overflow",
        "output_text",
        "read_result_tool",
        "render_for_summary",
        "report_metadata",
        "request_tokens",
    ],
    "agentloop.core": [],
    "agentloop.durable": [],
    "agentloop.durable.dbos": [
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
    ],
    "agentloop.host": [
        "DEFAULT_BUFFER_SIZE",
        "DEFAULT_MAX_STEPS",
        "DEFAULT_SESSION_ID",
        "AdvancedSession",
        "Approver",
        "EventOrStep",
        "EventStream",
        "RunResult",
        "RunStopReason",
        "SessionWorker",
        "TurnRetryPolicy",
        "continue_from",
        "run",
        "run_sync",
        "stream",
    ],
    "agentloop.local": [
        "BUILD_CMAKE_ARGS",
        "LLAMA_SERVER_CMAKE_ARGS",
        "LOCAL_MODEL_ALIAS",
        "LlamaServer",
        "LlamaServerInstall",
        "LocalInstall",
        "LocalServer",
        "LocalServerError",
        "LocalServerNotInstalledError",
        "find_llama_server_install",
        "find_local_install",
        "install_llama_server",
        "install_local_server",
        "llama_server_available",
        "local_model",
        "local_server_available",
    ],
    "agentloop.loop": [],
    "agentloop.mcp": [
        "FEATURE_KEY",
        "MCP_NAME_KEY",
        "MCP_SERVER_KEY",
        "MIME_TYPE_KEY",
        "STRUCTURED_KEY",
        "TASKS_EXTENSION",
        "TASK_KEY",
        "URI_KEY",
        "ConnectApprover",
        "GetPromptTool",
        "HttpServer",
        "McpCallError",
        "McpConnect",
        "McpConnectionError",
        "McpError",
        "McpGetPrompt",
        "McpInvoke",
        "McpPrompt",
        "McpPromptArgument",
        "McpPromptMessage",
        "McpPromptResult",
        "McpReadResource",
        "McpResource",
        "McpResourceTemplate",
        "McpServer",
        "McpTool",
        "McpToolSource",
        "ReadResourceTool",
        "RouteMcpTasks",
        "StdioServer",
        "tool_names",
    ],
    "agentloop.model": [
        "DEFAULT_PRICES",
        "AfterItem",
        "AfterPart",
        "AfterTools",
        "AutomaticCache",
        "CacheBreakpoint",
        "ExplicitCache",
        "ModelAdapter",
        "ModelEvent",
        "ModelPrice",
        "ModelSession",
        "ModelTurnResult",
        "PriceTable",
        "PromptCacheMode",
        "PromptCacheRequest",
        "PromptCacheRetention",
        "PromptCacheStrategy",
        "StreamAccumulator",
        "TurnRequest",
        "parse_tool_arguments",
    ],
    "agentloop.observe": [
        "MODEL_KEY",
        "PROVIDER_KEY",
        "RESPONSE_ID_KEY",
        "AgentEnded",
        "AgentEvent",
        "ApprovalAnswered",
        "ApprovalRequested",
        "ContentDelta",
        "InputAccepted",
        "JsonlEventReporter",
        "LoopObserver",
        "LoopWarning",
        "ModelCallFailed",
        "ModelCallFinished",
        "ModelCallStarted",
        "MutationFinished",
        "MutationStarted",
        "OtelObserver",
        "RunFailed",
        "RunStarted",
        "SessionUsage",
        "StructlogObserver",
        "ToolCallRequested",
        "ToolCatalogChanged",
        "ToolExecutionFinished",
        "ToolExecutionStarted",
        "ToolResultReceived",
        "TranscriptObserver",
        "TurnFinished",
        "TurnStarted",
        "UsageTotals",
        "UsageUpdated",
        "event_fields",
    ],
    "agentloop.output": [
        "OutputMode",
        "OutputProblems",
        "OutputSpec",
        "OutputValidationError",
        "output_spec",
    ],
    "agentloop.permissions": [
        "Allow",
        "AllowAll",
        "ApprovalReason",
        "AskApproval",
        "CommandPolicy",
        "CustomPermission",
        "Deny",
        "DenyAll",
        "DenyCode",
        "FileSystemRead",
        "FileSystemWrite",
        "NetworkAccess",
        "NetworkPolicy",
        "NoVerdict",
        "PathPolicy",
        "PendingPermission",
        "PermissionChecker",
        "PermissionPolicy",
        "PermissionRequest",
        "PolicyChain",
        "PolicyVerdict",
        "RequestKindPolicy",
        "RuleAction",
        "ShellCommand",
        "ToolInvocation",
        "ToolPolicy",
        "Verdict",
        "open_beneath",
        "resolve_path",
    ],
    "agentloop.providers": [
        "DEFAULT_DEADLINE",
        "DEFAULT_TIMEOUT",
        "MODEL_KEY",
        "PROVIDER_FINISH_KEY",
        "PROVIDER_KEY",
        "RESPONSE_ID_KEY",
        "RESPONSE_MODEL_KEY",
        "AnthropicModel",
        "AnthropicSession",
        "AnthropicStreamTranslator",
        "CallDeadline",
        "GeminiModel",
        "GeminiSession",
        "GeminiStreamTranslator",
        "ModelProtocolError",
        "OpenAIChatModel",
        "OpenAIChatSession",
        "OpenAICompletionTranslator",
        "OpenAIResponsesModel",
        "OpenAIResponsesSession",
        "OpenAIResponsesStreamTranslator",
        "OpenAIStreamTranslator",
        "ProviderErrorKind",
        "RetryPolicy",
        "Secret",
        "from_string",
    ],
    "agentloop.serve": [
        "AuditEntry",
        "AuditLog",
        "DecisionAction",
        "MemoryAuditLog",
        "PostgresAuditLog",
        "ServeConfig",
        "SqliteAuditLog",
        "Worker",
        "create_app",
        "open_store",
    ],
    "agentloop.store": [
        "CHECKPOINT_FORMAT",
        "CHECKPOINT_VERSION",
        "BackendHead",
        "BackendSessionStore",
        "BackendWrite",
        "Claim",
        "ClaimError",
        "Lease",
        "LeaseError",
        "LeaseHeldError",
        "LeaseLostError",
        "MemoryBackend",
        "MemorySessionStore",
        "PendingCall",
        "PostgresSessionStore",
        "RecordedApproval",
        "RedisBackend",
        "RedisSessionStore",
        "SessionInfo",
        "SessionProblem",
        "SessionStatus",
        "SessionStore",
        "SessionSummary",
        "SqliteSessionStore",
        "StaleSessionError",
        "StorageBackend",
        "StoredSession",
        "enqueue_input",
        "export_jsonl",
        "find_session_problems",
        "import_jsonl",
        "input_digest",
        "session_problems",
    ],
    "agentloop.tasks": [
        "AsyncSessionTasks",
        "AsyncTaskManager",
        "AsyncTaskManagerHandle",
        "DetachAfter",
        "RouteByAnnotation",
        "RouteByName",
        "Routing",
        "RoutingPolicy",
        "SimpleTaskManager",
        "SpecCatalog",
        "TaskCancelled",
        "TaskDetached",
        "TaskEvent",
        "TaskFailed",
        "TaskKind",
        "TaskLaunch",
        "TaskLaunched",
        "TaskManager",
        "TaskManagerHandle",
        "TaskManagerState",
        "TaskResult",
        "TaskRoute",
        "TaskSnapshot",
        "TaskStarted",
        "TaskSucceeded",
        "TurnUpdate",
    ],
    "agentloop.testing": [
        "LAUNCHERS",
        "PROBE_TOOL_NAME",
        "VIOLATION_KINDS",
        "AgentStateMachine",
        "Approve",
        "ApproveWith",
        "Cancel",
        "CancelPoint",
        "CommandCase",
        "Continue",
        "DenyCall",
        "HostAction",
        "Interject",
        "InvalidTranscript",
        "PathCase",
        "ReplayDriftError",
        "ReplayScript",
        "Reply",
        "ScriptedModel",
        "Submit",
        "TranscriptEnding",
        "TranscriptShape",
        "UrlCase",
        "adversarial_commands",
        "adversarial_paths",
        "adversarial_urls",
        "assert_transcript_valid",
        "bounded_shrinking",
        "call",
        "check_command_policy",
        "check_mutator",
        "check_path_policy",
        "check_url_policy",
        "chunked",
        "continuations",
        "fail",
        "format_transcript",
        "hang",
        "host_actions",
        "invalid_outputs",
        "invalid_transcripts",
        "items",
        "json_values",
        "model_replies",
        "model_scripts",
        "output_reply",
        "outputs",
        "parts",
        "path_sandbox",
        "reasoning",
        "request_digest",
        "text",
        "tool_calls",
        "tool_inputs",
        "tool_specs",
        "transcripts",
    ],
    "agentloop.tools": [
        "OUTCOME_KEY",
        "RAW_ARGUMENTS_KEY",
        "BasicToolExecutor",
        "FunctionTool",
        "PendingApproval",
        "PermissionsFunction",
        "PrepareOutcome",
        "PreparedCall",
        "ResultOutcome",
        "Tool",
        "ToolAnnotations",
        "ToolCatalogEvent",
        "ToolContext",
        "ToolExecutor",
        "ToolInDoubtError",
        "ToolOutput",
        "ToolRegistry",
        "ToolRequest",
        "ToolSource",
        "ToolSpec",
        "argument_converter",
        "compare_catalogs",
        "json_schema_for",
        "result_outcome",
        "structure_value",
        "synthesized_result",
        "tool",
    ],
    "agentloop.transcript": [
        "LoopMutator",
        "MutationContext",
        "MutationPoint",
        "TranscriptCursor",
        "TranscriptView",
        "TranscriptViolation",
        "find_violation",
        "has_pending_input",
        "validate_transcript",
    ],
    "agentloop.ui": [
        "AguiConfig",
        "create_agui_app",
    ],
}

PRIVATE = {"agentloop.core", "agentloop.loop"}
"""Packages whose modules hold the definitions; their names are exported by the root
and the packages named for them, so they export nothing themselves."""


def public_packages() -> list[str]:
    """Every public package under ``agentloop``, nested ones included."""
    return sorted(
        module.name
        for module in pkgutil.walk_packages(agentloop.__path__, "agentloop.")
        if module.ispkg and not any(part.startswith("_") for part in module.name.split("."))
    )


def order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def public_names(module: types.ModuleType) -> set[str]:
    """What the module binds without a leading underscore, its submodules aside."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in {"annotations", "TYPE_CHECKING", "Any"}
    }


def test_every_public_package_is_pinned() -> None:
    assert ["agentloop", *public_packages()] == list(EXPORTED)


@pytest.mark.parametrize("name", list(EXPORTED))
def test_all_is_pinned_sorted_and_exactly_what_the_package_binds(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(getattr(module, "__all__", ()))
    assert exported == EXPORTED[name]
    assert exported == sorted(exported, key=order)
    for export in exported:
        assert getattr(module, export) is not None, export


def test_the_root_binds_exactly_its_all() -> None:
    assert public_names(agentloop) == set(agentloop.__all__)


@pytest.mark.parametrize("name", sorted(PRIVATE))
def test_the_private_packages_export_nothing(name: str) -> None:
    assert EXPORTED[name] == []


def test_the_root_stays_small() -> None:
    assert len(EXPORTED["agentloop"]) < 100


SAME_NAME_OTHER_MEDIUM = {"enqueue_input"}
"""Names two packages define for the same operation on a different medium:
``store.enqueue_input`` writes to a store, ``durable.dbos.enqueue_input`` sends to a
DBOS workflow."""


def test_a_name_means_one_thing_across_the_packages() -> None:
    # One name per concept: two packages that export a name export the same object.
    seen: dict[str, tuple[str, object]] = {}
    clashes = []
    for name, exports in EXPORTED.items():
        module = importlib.import_module(name)
        for export in exports:
            value = getattr(module, export)
            if export in seen and seen[export][1] is not value and seen[export][1] != value:
                clashes.append((export, seen[export][0], name))
            seen.setdefault(export, (name, value))
    assert [clash for clash in clashes if clash[0] not in SAME_NAME_OTHER_MEDIUM] == []


def test_every_public_class_and_function_has_a_docstring() -> None:
    missing = [
        f"{name}.{export}"
        for name, exports in EXPORTED.items()
        for export in exports
        if inspect.isclass(value := getattr(importlib.import_module(name), export))
        or inspect.isfunction(value)
        if not value.__doc__
    ]
    assert missing == []
