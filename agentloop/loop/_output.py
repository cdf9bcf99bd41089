"""The loop's side of structured output: the spec a session answers with, and the
results of final-answer calls the round does not run (see ``agentloop.output``)."""

from __future__ import annotations

from typing import Any

import attrs

from ..core._errors import CheckpointError
from ..core._items import ToolResultPart
from ..model._session_config import SessionConfig
from ..output._answer import premature_answer
from ..output._spec import OutputMode, OutputSpec
from ._state import CallStatus, RoundCall

__all__ = ["OUTPUT_ACCEPTED_KEY", "session_config", "unrun_answer"]

OUTPUT_ACCEPTED_KEY = "agentloop.output_accepted"
"""``TurnResult.metadata``: the turn ended with a validated ``TurnResult.output``."""


def session_config(
    config: SessionConfig, spec: OutputSpec[Any] | None, session: Any
) -> SessionConfig:
    """``config`` with the output spec the session answers with: the agent's ``spec``
    (its mode resolved for ``session``: ``AUTO`` is ``NATIVE`` when the adapter has a
    native mode, else ``TOOL``), or the one ``config`` already holds (a restored
    checkpoint's). Raises ``CheckpointError`` when both are given with different schemas."""
    held = config.output
    if spec is None:
        return config
    if held is not None and (held.schema != spec.schema or held.wrapped != spec.wrapped):
        raise CheckpointError(
            f"cannot start session {config.session_id!r}: its output schema {held.name!r} "
            f"differs from the agent's {spec.name!r} ({dict(held.schema)!r} != "
            f"{dict(spec.schema)!r}); resume it with an agent built with the same .output()"
        )
    if spec.mode is OutputMode.AUTO:
        native = bool(getattr(session, "native_output", False))
        spec = spec.with_mode(OutputMode.NATIVE if native else OutputMode.TOOL)
    return _evolve(config, spec)


def _evolve(config: SessionConfig, spec: OutputSpec[Any]) -> SessionConfig:
    return attrs.evolve(config, output=spec)


def unrun_answer(spec: OutputSpec[Any] | None, call: RoundCall) -> ToolResultPart | None:
    """The result of a final-answer ``call`` in a round with other calls (not run, the
    model is told to answer alone); ``None`` for any other call."""
    if spec is None:
        return None
    result = premature_answer(spec, call.call)
    if result is not None:
        call.move(CallStatus.ANSWERED)
    return result
