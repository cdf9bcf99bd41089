"""Tools for testing agents and the components users plug into them.

Always available (no hypothesis needed): :class:`ScriptedModel` and its reply
builders, :func:`assert_transcript_valid`, :func:`format_transcript`, and the
host-action values.

Needs hypothesis (the testing extra: ``pip install 'agentloop-runtime[testing]'``), imported
lazily on first use of the name: the strategies (:func:`items`,
:func:`transcripts`, :func:`invalid_transcripts`, :func:`tool_specs`,
:func:`tool_inputs`, :func:`model_replies`, :func:`model_scripts`,
:func:`host_actions`, :func:`outputs`, :func:`invalid_outputs`,
:func:`output_reply`), :func:`check_mutator` and :class:`AgentStateMachine`.
Without hypothesis those names raise ``ImportError`` saying so, and
``from agentloop.testing import *`` needs hypothesis too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._extras import install_command
from ._actions import (
    Approve,
    ApproveWith,
    Cancel,
    CancelPoint,
    Continue,
    DenyCall,
    HostAction,
    Interject,
    Submit,
)
from ._assertions import assert_transcript_valid, format_transcript
from ._mutator_checks import check_mutator
from ._replay import ReplayDriftError, ReplayScript, request_digest
from ._replies import Reply, call, chunked, fail, hang, reasoning, text, tool_calls
from ._scripted import ScriptedModel

if TYPE_CHECKING:
    from ._json_strategies import json_values
    from ._mutator_checks import bounded_shrinking
    from ._output_strategies import invalid_outputs, output_reply, outputs
    from ._policy_strategies import (
        LAUNCHERS,
        CommandCase,
        PathCase,
        UrlCase,
        adversarial_commands,
        adversarial_paths,
        adversarial_urls,
        check_command_policy,
        check_path_policy,
        check_url_policy,
        path_sandbox,
    )
    from ._state_machine import PROBE_TOOL_NAME, AgentStateMachine
    from ._strategies import (
        VIOLATION_KINDS,
        InvalidTranscript,
        TranscriptEnding,
        TranscriptShape,
        continuations,
        invalid_transcripts,
        items,
        parts,
        transcripts,
    )
    from ._tool_strategies import (
        host_actions,
        model_replies,
        model_scripts,
        tool_inputs,
        tool_specs,
    )

__all__ = [
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
]

_LAZY = {
    "CommandCase": "_policy_strategies",
    "LAUNCHERS": "_policy_strategies",
    "PathCase": "_policy_strategies",
    "UrlCase": "_policy_strategies",
    "adversarial_commands": "_policy_strategies",
    "adversarial_paths": "_policy_strategies",
    "adversarial_urls": "_policy_strategies",
    "bounded_shrinking": "_mutator_checks",
    "check_command_policy": "_policy_strategies",
    "check_path_policy": "_policy_strategies",
    "check_url_policy": "_policy_strategies",
    "path_sandbox": "_policy_strategies",
    "AgentStateMachine": "_state_machine",
    "PROBE_TOOL_NAME": "_state_machine",
    "InvalidTranscript": "_strategies",
    "TranscriptEnding": "_strategies",
    "TranscriptShape": "_strategies",
    "VIOLATION_KINDS": "_strategies",
    "continuations": "_strategies",
    "invalid_transcripts": "_strategies",
    "items": "_strategies",
    "json_values": "_json_strategies",
    "invalid_outputs": "_output_strategies",
    "output_reply": "_output_strategies",
    "outputs": "_output_strategies",
    "parts": "_strategies",
    "transcripts": "_strategies",
    "host_actions": "_tool_strategies",
    "model_replies": "_tool_strategies",
    "model_scripts": "_tool_strategies",
    "tool_inputs": "_tool_strategies",
    "tool_specs": "_tool_strategies",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as error:
        if error.name != "hypothesis" and not (error.name or "").startswith("hypothesis."):
            raise
        raise ImportError(
            f"agentloop.testing.{name} needs hypothesis, which is not installed; "
            f"install it with {install_command('testing')} (or pip install hypothesis)"
        ) from error
    value = getattr(module, name)
    globals()[name] = value
    return value
