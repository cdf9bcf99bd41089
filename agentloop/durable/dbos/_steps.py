"""The model and tools of an agent, wrapped so each call is one DBOS step.

A step's result is recorded by DBOS; on recovery the workflow replays and the
wrapper returns the recorded result instead of asking the model (or running
the tool) again. Results cross the step boundary as JSON text produced by
``agentloop.unstructure``, and the first run goes through the same round
trip as a replay, so both see identical values.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import attrs
from dbos import DBOS

from ...core._cancellation import TurnCancellation
from ...core._errors import AgentLoopError, ModelProtocolError, ProviderError
from ...core._items import Part
from ...core._tool_spec import ToolSpec
from ...loop._agent_tool import AgentTool
from ...loop._converter import structure, unstructure
from ...loop._session_store import ClaimError, SessionStore, input_digest
from ...model._protocol import ModelAdapter, ModelEvent, ModelSession, ModelTurnResult, TurnRequest
from ...model._session_config import SessionConfig
from ...tools._errors import ToolInDoubtError
from ...tools._registry import ToolCatalogEvent, ToolSource
from ...tools._tool import Tool, ToolContext, ToolOutput, ToolRequest

__all__ = [
    "IN_DOUBT_TEXT",
    "MODEL_STEP",
    "TOOL_STEP",
    "DurableModel",
    "DurableToolSource",
    "RecordedToolFailure",
]

MODEL_STEP = "agentloop.model"
"""The DBOS step name of a model call."""
TOOL_STEP = "agentloop.tool"
"""The DBOS step name of a tool call (``agentloop.tool:<tool name>``)."""


class RecordedToolFailure(AgentLoopError):
    """Raised by a durable tool whose recorded step says the tool raised.

    The message is the original ``"<ExceptionType>: <message>"``; the
    executor turns it into an error result as it does any tool exception.
    """


class DurableModel:
    """A ``ModelAdapter`` whose every model call is a DBOS step (inside a workflow)."""

    def __init__(self, inner: ModelAdapter) -> None:
        self.inner = inner
        self.provider_name = getattr(inner, "provider_name", None)
        self.model_name = getattr(inner, "model_name", None)

    async def start_session(self, config: SessionConfig) -> ModelSession:
        """Open the inner model's session and wrap it."""
        return _DurableModelSession(await self.inner.start_session(config))


class _DurableModelSession:
    def __init__(self, inner: ModelSession) -> None:
        self._inner = inner

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        async def call_model() -> str:
            return await self._call_inner(request, cancellation)

        recorded: str = await DBOS.run_step_async({"name": MODEL_STEP}, call_model)
        document = json.loads(recorded)
        if "error" in document:  # a recorded failure: the turn ends ERROR, as it did
            raise structure(document["error"], ProviderError)
        return _replay(structure(document["result"], ModelTurnResult))

    async def _call_inner(self, request: TurnRequest, cancellation: TurnCancellation | None) -> str:
        # Streamed deltas are consumed here: only the closing result is recorded.
        # A ProviderError is a result too (recorded: a replay fails the same way).
        try:
            stream = await self._inner.begin_turn(request, cancellation)
        except ProviderError as error:
            return json.dumps({"error": unstructure(error)})
        try:
            async for event in stream:
                if isinstance(event, ModelTurnResult):
                    return json.dumps({"result": unstructure(event)})
        except ProviderError as error:
            return json.dumps({"error": unstructure(error)})
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        missing = ModelProtocolError("model stream ended without a ModelTurnResult")
        return json.dumps({"error": unstructure(missing)})


async def _replay(result: ModelTurnResult) -> AsyncIterator[ModelEvent]:
    yield result


class DurableToolSource:
    """A ``ToolSource`` whose tools run as DBOS steps.

    A tool whose spec is not marked idempotent is claimed in ``claims``
    (when given) inside its step, before it runs: a step DBOS runs again
    after a crash finds the claim and answers in doubt instead of repeating
    the side effect.
    """

    def __init__(
        self,
        inner: ToolSource,
        claims: SessionStore | None,
        child: Callable[[AgentTool], AgentTool] | None = None,
    ) -> None:
        self.inner = inner
        self.claims = claims
        self.child = child
        """How a tool that runs a child agent is made durable (``None``: like any tool)."""
        self.name = getattr(inner, "name", type(inner).__name__)

    def specs(self) -> list[ToolSpec]:
        """The inner source's specs."""
        return self.inner.specs()

    def get(self, name: str) -> Tool | None:
        """The inner tool called ``name``, wrapped."""
        tool = self.inner.get(name)
        if tool is None:
            return None
        if self.child is not None and isinstance(tool, AgentTool):
            return self.child(tool)  # not a step: the child's own calls are steps
        return _DurableTool(tool, self.claims)

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """The inner source's catalog changes."""
        return self.inner.drain_catalog_events()


IN_DOUBT_TEXT = (
    "in doubt: tool call {call_id} ({tool}) was started before a crash and may have run; "
    "it is not run again"
)


class _DurableTool:
    def __init__(self, inner: Tool, claims: SessionStore | None) -> None:
        self._inner = inner
        self._claims = claims
        for attribute in ("timeout", "max_output_chars"):
            if hasattr(inner, attribute):
                setattr(self, attribute, getattr(inner, attribute))

    @property
    def spec(self) -> ToolSpec:
        return self._inner.spec

    def current_spec(self) -> ToolSpec | None:
        dynamic = getattr(self._inner, "current_spec", None)
        return dynamic() if dynamic is not None else self._inner.spec

    def proposed_requests(self, request: ToolRequest) -> Sequence[Any]:
        propose = getattr(self._inner, "proposed_requests", None)
        return propose(request) if propose is not None else ()

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        async def call_tool() -> str:
            return await self._run_once(request, ctx)

        name = f"{TOOL_STEP}:{request.tool_name}"
        recorded: str = await DBOS.run_step_async({"name": name}, call_tool)
        return _restore_output(json.loads(recorded))

    async def _run_once(self, request: ToolRequest, ctx: ToolContext) -> str:
        if self._claims is not None and not self._inner.spec.annotations.idempotent:
            try:
                await self._claims.claim(
                    request.session_id,
                    request.call_id,
                    tool_name=request.tool_name,
                    input_digest=input_digest(request.tool_name, request.input),
                )
            except ClaimError as error:
                if error.reason != "claimed":
                    raise
                text = IN_DOUBT_TEXT.format(call_id=request.call_id, tool=request.tool_name)
                return json.dumps({"in_doubt": text})
        try:
            value = await self._inner.invoke(request, ctx)
        except Exception as error:  # a tool failure is a result, recorded like one
            return json.dumps({"raised": f"{type(error).__name__}: {error}"})
        return json.dumps(_output_document(value))


def _output_document(value: Any) -> dict[str, Any]:
    if isinstance(value, ToolOutput):
        return {
            "output": unstructure(value.value),
            "is_error": value.is_error,
            "metadata": dict(value.metadata),
        }
    if isinstance(value, (list, tuple)) and value and all(_is_part(part) for part in value):
        return {"parts": [unstructure(part) for part in value]}
    if attrs.has(type(value)):
        return {"value": unstructure(value)}
    return {"value": value}


def _is_part(value: Any) -> bool:
    return isinstance(value, Part.__args__)


def _restore_output(document: dict[str, Any]) -> Any:
    if "raised" in document:
        raise RecordedToolFailure(document["raised"])
    if "in_doubt" in document:
        raise ToolInDoubtError(document["in_doubt"])
    if "parts" in document:
        return [structure(part, Part) for part in document["parts"]]
    if "output" in document:
        return ToolOutput(document["output"], document["is_error"], document["metadata"])
    return document["value"]
