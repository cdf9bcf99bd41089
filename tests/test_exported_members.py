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
    "agentloop.cli": {
        "main",
    },
    "agentloop.core": set(),
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
    "agentloop.model": set(),
    "agentloop.permissions": {"PendingPermission", "open_beneath", "resolve_path"},
    "agentloop.providers": {
        "AnthropicModel",
        "AnthropicSession",
        "AnthropicStreamTranslator",
        "DEFAULT_TIMEOUT",
        "GeminiModel",
        "GeminiSession",
        "GeminiStreamTranslator",
        "OpenAIChatModel",
        "OpenAIChatSession",
        "OpenAICompletionTranslator",
        "OpenAIStreamTranslator",
        "RetryPolicy",
        "Secret",
        "StreamAccumulator",
        "from_string",
        "parse_tool_arguments",
    },
    "agentloop.store": set(),
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
        "Continue",
        "DenyCall",
        "HostAction",
        "Interject",
        "InvalidTranscript",
        "PROBE_TOOL_NAME",
        "Reply",
        "Submit",
        "TranscriptEnding",
        "VIOLATION_KINDS",
        "assert_transcript_valid",
        "call",
        "check_mutator",
        "fail",
        "format_transcript",
        "hang",
        "host_actions",
        "invalid_transcripts",
        "items",
        "json_values",
        "model_replies",
        "model_scripts",
        "parts",
        "reasoning",
        "text",
        "tool_calls",
        "tool_inputs",
        "tool_specs",
        "transcripts",
    },
    "agentloop.tools": {
        "PermissionsFunction",
        "argument_converter",
        "structure_value",
        "synthesized_result",
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
