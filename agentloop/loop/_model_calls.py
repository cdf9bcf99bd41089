"""Model calls: mutators, limits, the streamed response, and what follows it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import nullcontext

import anyio
import attrs

from ..core._delta import Delta
from ..core._errors import MutatorError, ProviderError
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    ToolCallPart,
    Usage,
)
from ..core._transcript import TranscriptView, find_violation, has_pending_input
from ..model._protocol import ModelEvent, ModelTurnResult, TurnRequest
from ..tools._tool import ToolRequest
from ._core import LoopCore
from ._effects import CLEANUP_SECONDS, Effects
from ._events import (
    ContentDelta,
    MutationFinished,
    MutationStarted,
    ToolCallRequested,
    ToolCatalogChanged,
    UsageUpdated,
    Warning,
)
from ._mutators import MutationContext, MutationPoint, TranscriptCursor
from ._persistence import Persistence
from ._pipeline import ToolPipeline
from ._state import (
    LIMIT_KEY,
    NO_MODEL_CALL_KEY,
    RoundCall,
    ToolRound,
    TurnState,
)
from ._steps import (
    Step,
)

__all__ = ["ModelCaller"]


class ModelCaller:
    """Calls the model, layered by concern, and hands tool calls to the pipeline (internal).

    ``call_model`` -> ``_call_model_handling_mutators`` ->
    ``_call_model_handling_limits`` -> ``_stream_handling_timeout`` ->
    ``_stream_once``; ``_handle_response`` turns the result into a step.
    """

    def __init__(
        self, core: LoopCore, effects: Effects, persistence: Persistence, pipeline: ToolPipeline
    ) -> None:
        self._core = core
        self._fx = effects
        self._persistence = persistence
        self._pipeline = pipeline
        self._session = effects.parts.session
        self._executor = effects.parts.executor
        self._mutators = effects.parts.mutators

    async def call_model(self, turn: TurnState, point: MutationPoint) -> Step:
        """Deliver steering and pending input, then call the model for ``turn``."""
        self._core.deliver_steering()
        self._core.fold_pending_input()
        return await self._call_model_handling_mutators(turn, point)

    async def _call_model_handling_mutators(self, turn: TurnState, point: MutationPoint) -> Step:
        if self._mutators and (step := await self._run_mutators(turn, point)) is not None:
            return step
        transcript = self._core.transcript
        if not has_pending_input(transcript):
            # Nothing for the model to answer (e.g. a mutator removed the new
            # input): finish instead of sending an assistant-prefill request.
            reason = (
                "the transcript is empty"
                if not transcript
                else "the transcript ends with an item of kind "
                f"{transcript[-1].kind.value!r}, so there is nothing for the model to "
                "answer; submit input first"
            )
            if self._fx.observed:
                self._fx.emit(Warning(f"{turn.turn_id}: no model call: {reason}"))
            return self._pipeline.finish(
                turn, FinishReason.COMPLETED, (), {NO_MODEL_CALL_KEY: reason}
            )
        return await self._call_model_handling_limits(turn)

    async def _call_model_handling_limits(self, turn: TurnState) -> Step:
        if (limit := self._core.limit_reached(turn, self._fx.config.limits)) is not None:
            return self._pipeline.finish(turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: limit})
        turn.model_calls += 1
        changes = self._executor.drain_catalog_events()
        if self._fx.observed:
            for change in changes:
                self._fx.emit(
                    ToolCatalogChanged(change.source, change.added, change.removed, change.changed)
                )
        outcome = await self._stream_handling_timeout(turn, self._request(turn))
        if outcome is None:
            return await self._pipeline.finish_cancelled(turn, "model")
        if isinstance(outcome, str):
            return self._pipeline.finish(turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: outcome})
        return await self._handle_response(turn, *outcome)

    def _request(self, turn: TurnState) -> TurnRequest:
        core = self._core
        cache = core.next_turn_cache or self._fx.config.cache
        core.next_turn_cache = None
        return TurnRequest(
            self._fx.session_id,
            turn.turn_id,
            TranscriptView(core.transcript),
            tuple(self._executor.specs()),
            cache,
            self._fx.config.metadata,
        )

    async def _handle_response(
        self, turn: TurnState, result: ModelTurnResult, usage: Usage | None
    ) -> Step:
        core = self._core
        turn.add_usage(usage)
        core.add_session_usage(usage)
        now = time.time()
        output = tuple(
            _stamp_output(item, usage, result.finish_reason, now) for item in result.output_items
        )
        calls = [call for item in output for call in item.tool_calls()]
        core.check_call_ids(calls)
        for item in output:
            core.append(item)
        if not calls:
            if core.steering:  # a message arrived while the model answered: continue
                return await self.call_model(turn, MutationPoint.AFTER_TURN_ENDED)
            return self._pipeline.finish(turn, result.finish_reason, output, result.metadata)
        return await self._start_round(turn, calls)

    async def _start_round(self, turn: TurnState, calls: list[ToolCallPart]) -> Step:
        session_id = self._fx.session_id
        turn.round = ToolRound(
            [
                RoundCall(
                    index,
                    call,
                    ToolRequest(
                        call.id, call.name, call.input, session_id, turn.turn_id, call.metadata
                    ),
                )
                for index, call in enumerate(calls)
            ]
        )
        max_calls = self._fx.config.limits.max_tool_calls_per_round
        if max_calls is not None and len(calls) > max_calls:
            return self._pipeline.refuse(turn, turn.round, max_calls)
        await self._persistence.save_response(self._core)
        return await self._pipeline.advance(turn, turn.round, after_approval=False)

    async def _stream_handling_timeout(
        self, turn: TurnState, request: TurnRequest
    ) -> tuple[ModelTurnResult, Usage | None] | str | None:
        """The model's result and usage; ``None`` if cancelled; a limit name on timeout."""
        timeout = self._fx.config.limits.request_timeout
        with self._fx.cancel_scope(turn):
            try:
                with anyio.fail_after(timeout) if timeout is not None else nullcontext():
                    return await self._stream_once(turn, request)
            except TimeoutError:
                return "request_timeout"
        return None

    async def _stream_once(
        self, turn: TurnState, request: TurnRequest
    ) -> tuple[ModelTurnResult, Usage | None]:
        stream = await self._session.begin_turn(request, turn.cancellation)
        streamed_usage: Usage | None = None
        announced: set[str] = set()
        result: ModelTurnResult | None = None
        try:
            async for event in stream:
                if isinstance(event, ModelTurnResult):
                    result = event
                    break
                streamed_usage = self._on_model_event(event, announced) or streamed_usage
        except BaseException:
            await _close(stream, shielded=True)
            raise
        await _close(stream, shielded=False)
        if result is None:
            raise ProviderError(
                "model stream ended without a ModelTurnResult: every model turn must end "
                "with one (check the adapter)"
            )
        if self._fx.observed:
            for item in result.output_items:
                for call in item.tool_calls():
                    if call.id not in announced:
                        self._fx.emit(ToolCallRequested(call))
        return result, result.usage if result.usage is not None else streamed_usage

    def _on_model_event(self, event: ModelEvent, announced: set[str]) -> Usage | None:
        if isinstance(event, Delta):
            if self._fx.observed:
                self._fx.emit(ContentDelta(event))
            return None
        if isinstance(event, Usage):
            if self._fx.observed:
                self._fx.emit(UsageUpdated(event))
            return event
        if isinstance(event, ToolCallPart):
            announced.add(event.id)
            if self._fx.observed:
                self._fx.emit(ToolCallRequested(event))
            return None
        raise ProviderError(
            f"model stream yielded {type(event).__name__}; expected a Delta, ToolCallPart, "
            "Usage or ModelTurnResult"
        )

    # -- mutators ------------------------------------------------------------

    async def _run_mutators(self, turn: TurnState, point: MutationPoint) -> Step | None:
        session_id = self._fx.session_id
        cursor = TranscriptCursor(self._core.transcript)
        ctx = MutationContext(session_id, turn.turn_id, point, turn.cancellation, self._fx.emit)
        with self._fx.cancel_scope(turn):
            for mutator in self._mutators:
                name = str(getattr(mutator, "name", type(mutator).__name__))
                if self._fx.observed:
                    self._fx.emit(MutationStarted(session_id, turn.turn_id, name, point.value))
                before = cursor.items
                was_dirty = cursor.dirty
                try:
                    await mutator.mutate(cursor, ctx)
                except MutatorError:
                    raise
                except Exception as error:
                    raise MutatorError(
                        f"mutator {name!r} failed at {point.value}: {type(error).__name__}: {error}"
                    ) from error
                if self._fx.observed:
                    dirty = cursor.items is not before or (cursor.dirty and not was_dirty)
                    self._fx.emit(
                        MutationFinished(session_id, turn.turn_id, name, point.value, dirty)
                    )
            if cursor.dirty:
                violation = find_violation(cursor.items)
                if violation is not None:
                    raise MutatorError(
                        f"mutator pass at {point.value} broke the transcript: {violation.message}"
                    )
                self._core.replace_transcript(cursor.items)
            return None
        # Cancelled: the pass is discarded as a whole.
        return await self._pipeline.finish_cancelled(turn, "mutator")


def _stamp_output(item: Item, usage: Usage | None, reason: FinishReason, now: float) -> Item:
    if item.kind is ItemKind.ASSISTANT and (item.usage is None or item.finish_reason is None):
        return attrs.evolve(
            item,
            usage=item.usage if item.usage is not None else usage,
            finish_reason=item.finish_reason or reason,
            created_at=item.created_at if item.created_at is not None else now,
        )
    if item.created_at is None:
        return attrs.evolve(item, created_at=now)
    return item


async def _close(stream: AsyncIterator[ModelEvent], *, shielded: bool) -> None:
    """Close the model's stream (and its HTTP response); bounded and shielded on errors."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    if not shielded:
        await aclose()
        return
    with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
        await aclose()
