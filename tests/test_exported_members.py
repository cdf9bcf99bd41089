"""The public surface is deliberate (httpx's ``tests/test_exported_members.py``).

``agentloop.__all__`` is exactly the public names the package exports, and
every subpackage's ``__all__`` names that the top level does not re-export are
listed here: adding or dropping one is a decision, made in this file.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import agentloop

# Per subpackage, the names its ``__all__`` exports that ``agentloop`` does not:
# the tools of a layer (providers, local servers, the testing kit, the CLI).
SUBPACKAGE_EXTRAS: dict[str, set[str]] = {
    "agentloop.a2a": {
        "A2AConfig",
        "create_a2a_app",
    },
    "agentloop.cli": {
        "main",
    },
    "agentloop.compaction": {
        "CHARS_PER_TOKEN",
        "CONTEXT_OVERFLOW",
        "CompactionOutcome",
        "CompactionPipeline",
        "CompactionReport",
        "CompactionRequest",
        "CompactionStrategy",
        "CompactionTrigger",
        "Compactor",
        "ContextOverflowTrigger",
        "DEFAULT_SUMMARY_PROMPT",
        "DROPPED_KEY",
        "DropFailedResults",
        "ELIDED_KEY",
        "ERROR_KIND_KEY",
        "ItemCountTrigger",
        "KeepRecent",
        "MEDIA_TOKENS",
        "MemoryResultArchive",
        "READ_RESULT_TOOL",
        "REPORT_KEY",
        "ResultArchive",
        "SUMMARY_KEY",
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
    },
    "agentloop.core": set(),
    "agentloop.durable": set(),
    "agentloop.host": {
        "DEFAULT_SESSION_ID",
    },
    "agentloop.local": {
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
    },
    "agentloop.loop": set(),
    "agentloop.mcp": {
        "ConnectApprover",
        "HttpServer",
        "MCP_NAME_KEY",
        "MCP_SERVER_KEY",
        "McpCallError",
        "McpConnect",
        "McpConnectionError",
        "McpError",
        "McpInvoke",
        "McpServer",
        "McpTool",
        "McpToolSource",
        "STRUCTURED_KEY",
        "StdioServer",
        "URI_KEY",
        "tool_names",
    },
    "agentloop.model": set(),
    "agentloop.observe": {
        "JsonlEventReporter",
        "MODEL_KEY",
        "OtelObserver",
        "PROVIDER_KEY",
        "RESPONSE_ID_KEY",
        "SessionUsage",
        "StructlogObserver",
        "UsageTotals",
        "event_fields",
    },
    "agentloop.output": set(),
    "agentloop.permissions": {
        "PendingPermission",
        "open_beneath",
        "resolve_path",
    },
    "agentloop.providers": {
        "AnthropicModel",
        "AnthropicSession",
        "AnthropicStreamTranslator",
        "CallDeadline",
        "DEFAULT_DEADLINE",
        "DEFAULT_TIMEOUT",
        "GeminiModel",
        "GeminiSession",
        "GeminiStreamTranslator",
        "MODEL_KEY",
        "OpenAIChatModel",
        "OpenAIChatSession",
        "OpenAICompletionTranslator",
        "OpenAIResponsesModel",
        "OpenAIResponsesSession",
        "OpenAIResponsesStreamTranslator",
        "OpenAIStreamTranslator",
        "PROVIDER_FINISH_KEY",
        "PROVIDER_KEY",
        "RESPONSE_ID_KEY",
        "RESPONSE_MODEL_KEY",
        "RetryPolicy",
        "Secret",
        "StreamAccumulator",
        "from_string",
        "parse_tool_arguments",
    },
    "agentloop.serve": {
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
    },
    "agentloop.store": {
        "RecordedApproval",
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
        "PendingCall",
        "PostgresSessionStore",
        "RedisBackend",
        "RedisSessionStore",
        "SessionProblem",
        "SessionStatus",
        "SessionSummary",
        "StaleSessionError",
        "StorageBackend",
        "enqueue_input",
        "find_session_problems",
        "input_digest",
        "session_problems",
    },
    "agentloop.tasks": {
        "Routing",
        "SpecCatalog",
    },
    "agentloop.testing": {
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
        "LAUNCHERS",
        "PROBE_TOOL_NAME",
        "PathCase",
        "ReplayDriftError",
        "ReplayScript",
        "Reply",
        "Submit",
        "TranscriptEnding",
        "TranscriptShape",
        "UrlCase",
        "VIOLATION_KINDS",
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
    },
    "agentloop.tools": {
        "PermissionsFunction",
        "ToolInDoubtError",
        "argument_converter",
        "structure_value",
        "synthesized_result",
    },
    "agentloop.ui": {
        "AguiConfig",
        "create_agui_app",
    },
}


def public_names(module: types.ModuleType) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    ]


def test_all_equals_the_exported_names() -> None:
    # (tests/test_public_api.py checks the order of __all__)
    assert len(agentloop.__all__) == len(set(agentloop.__all__))
    assert set(agentloop.__all__) == set(public_names(agentloop))


def subpackages() -> list[str]:
    return sorted(
        module.name
        for module in pkgutil.iter_modules(agentloop.__path__)
        if not module.name.startswith("_")
    )


@pytest.mark.parametrize("name", subpackages())
def test_each_subpackage_exports_only_deliberate_extras(name: str) -> None:
    module = importlib.import_module(f"agentloop.{name}")
    exported = set(getattr(module, "__all__", ()))
    extras = exported - set(agentloop.__all__)
    assert extras == SUBPACKAGE_EXTRAS.get(module.__name__, set()), module.__name__


def test_every_listed_subpackage_is_checked() -> None:
    assert {f"agentloop.{name}" for name in subpackages()} == set(SUBPACKAGE_EXTRAS)


def public_packages() -> list[str]:
    """Every public package under ``agentloop``, nested ones included."""
    return sorted(
        module.name
        for module in pkgutil.walk_packages(agentloop.__path__, "agentloop.")
        if module.ispkg and not any(part.startswith("_") for part in module.name.split("."))
    )


@pytest.mark.parametrize("name", public_packages())
def test_a_name_means_one_thing_across_the_packages(name: str) -> None:
    # One name per concept: a package exporting a root name exports the root's object.
    module = importlib.import_module(name)
    clashes = [
        export
        for export in getattr(module, "__all__", ())
        if export in agentloop.__all__ and getattr(module, export) is not getattr(agentloop, export)
    ]
    assert clashes == [], name
