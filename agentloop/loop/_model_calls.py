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
from ._driver_base import _CLEANUP_SECONDS, _call_ids
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
from ._rounds import RoundRunner
from ._state import (
    LIMIT_KEY,
    NO_MODEL_CALL_KEY,
    DriverState,
    RoundCall,
    ToolRound,
    TurnState,
)
from ._steps import (
    Step,
)

__all__ = ["ModelCaller"]


class ModelCaller(RoundRunner):
    """Calls the model and hands tool calls to the round runner (internal)."""

    async def _call_model(self, turn: TurnState, point: MutationPoint) -> Step:
        if self._steering:
            self._pending_input.extend(self._take(self._steering, self._config.steering_mode))
        self._fold_pending_input()
        if self._mutators and (step := await self._run_mutators(turn, point)) is not None:
            return step
        if not has_pending_input(self._transcript):
            # Nothing for the model to answer (e.g. a mutator removed the new
            # input): finish instead of sending an assistant-prefill request.
            reason = (
                "the transcript is empty"
                if not self._transcript
                else "the transcript ends with an item of kind "
                f"{self._transcript[-1].kind.value!r}, so there is nothing for the model to "
                "answer; submit input first"
            )
            if self._observers:
                self._emit(Warning(f"{turn.turn_id}: no model call: {reason}"))
            return self._finish_turn(turn, FinishReason.COMPLETED, (), {NO_MODEL_CALL_KEY: reason})
        if (limit := self._limit_reached(turn)) is not None:
            return self._finish_turn(turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: limit})
        turn.model_calls += 1
        if self._observers:
            for change in self._executor.drain_catalog_events():
                self._emit(
                    ToolCatalogChanged(change.source, change.added, change.removed, change.changed)
                )
        else:
            self._executor.drain_catalog_events()
        cache = self._next_turn_cache or self._config.cache
        self._next_turn_cache = None
        request = TurnRequest(
            self.session_id,
            turn.turn_id,
            TranscriptView(self._transcript),
            tuple(self._executor.specs()),
            cache,
            self._config.metadata,
        )
        outcome = await self._stream_model(turn, request)
        if outcome is None:
            return await self._finish_cancelled(turn, "model")
        if isinstance(outcome, str):
            return self._finish_turn(turn, FinishReason.LIMIT_REACHED, (), {LIMIT_KEY: outcome})
        result, usage = outcome
        turn.add_usage(usage)
        if usage is not None:
            self._session_usage = (
                usage if self._session_usage is None else self._session_usage + usage
            )
        now = time.time()
        output = tuple(
            _stamp_output(item, usage, result.finish_reason, now) for item in result.output_items
        )
        calls = [call for item in output for call in item.tool_calls()]
        self._check_call_ids(calls)
        for item in output:
            self._append(item)
        if not calls:
            if self._steering:  # a message arrived while the model answered: continue
                return await self._call_model(turn, MutationPoint.AFTER_TURN_ENDED)
            return self._finish_turn(turn, result.finish_reason, output, result.metadata)
        turn.round = ToolRound(
            [
                RoundCall(
                    index,
                    call,
                    ToolRequest(
                        call.id, call.name, call.input, self.session_id, turn.turn_id, call.metadata
                    ),
                )
                for index, call in enumerate(calls)
            ]
        )
        max_calls = self._config.limits.max_tool_calls_per_round
        if max_calls is not None and len(calls) > max_calls:
            return self._refuse_round(turn, turn.round, max_calls)
        if self._store is not None:
            # Journal the response before any call starts: a restore then runs the
            # calls that never started and answers started ones as in doubt,
            # instead of asking the model again.
            await self._save(DriverState.AFTER_TOOL_RESULT)
        return await self._advance_round(turn, turn.round, after_approval=False)

    async def _stream_model(
        self, turn: TurnState, request: TurnRequest
    ) -> tuple[ModelTurnResult, Usage | None] | str | None:
        """The model's result and usage; ``None`` if cancelled; a limit name on timeout."""
        timeout = self._config.limits.request_timeout
        with self._cancel_scope(turn):
            try:
                with anyio.fail_after(timeout) if timeout is not None else nullcontext():
                    return await self._consume(turn, request)
            except TimeoutError:
                return "request_timeout"
        return None

    async def _consume(
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
        if self._observers:
            for item in result.output_items:
                for call in item.tool_calls():
                    if call.id not in announced:
                        self._emit(ToolCallRequested(call))
        return result, result.usage if result.usage is not None else streamed_usage

    def _on_model_event(self, event: ModelEvent, announced: set[str]) -> Usage | None:
        if isinstance(event, Delta):
            if self._observers:
                self._emit(ContentDelta(event))
            return None
        if isinstance(event, Usage):
            if self._observers:
                self._emit(UsageUpdated(event))
            return event
        if isinstance(event, ToolCallPart):
            announced.add(event.id)
            if self._observers:
                self._emit(ToolCallRequested(event))
            return None
        raise ProviderError(
            f"model stream yielded {type(event).__name__}; expected a Delta, ToolCallPart, "
            "Usage or ModelTurnResult"
        )

    def _check_call_ids(self, calls: list[ToolCallPart]) -> None:
        seen: set[str] = set()
        for call in calls:
            if not call.id:
                raise ProviderError(f"model returned a call of {call.name!r} with an empty id")
            if call.id in self._call_ids or call.id in seen:
                raise ProviderError(
                    f"model returned tool call id {call.id!r}, which is already used in this "
                    "transcript; call ids must be unique"
                )
            seen.add(call.id)

    def _limit_reached(self, turn: TurnState) -> str | None:
        limits = self._config.limits
        if limits.max_model_calls_per_turn is not None and (
            turn.model_calls >= limits.max_model_calls_per_turn
        ):
            return "max_model_calls_per_turn"
        checks = (
            ("turn", turn.usage, limits.max_input_tokens_per_turn,
             limits.max_output_tokens_per_turn, limits.max_total_tokens_per_turn,
             limits.max_cost_per_turn),
            ("session", self._session_usage, limits.max_input_tokens_per_session,
             limits.max_output_tokens_per_session, limits.max_total_tokens_per_session,
             limits.max_cost_per_session),
        )  # fmt: skip
        for scope, usage, max_input, max_output, max_total, max_cost in checks:
            if usage is None:
                continue
            if max_input is not None and usage.input_tokens >= max_input:
                return f"max_input_tokens_per_{scope}"
            if max_output is not None and usage.output_tokens >= max_output:
                return f"max_output_tokens_per_{scope}"
            if max_total is not None and usage.total_tokens >= max_total:
                return f"max_total_tokens_per_{scope}"
            if max_cost is not None and (usage.cost or 0.0) >= max_cost:
                return f"max_cost_per_{scope}"
        return None

    # -- mutators ------------------------------------------------------------

    async def _run_mutators(self, turn: TurnState, point: MutationPoint) -> Step | None:
        cursor = TranscriptCursor(self._transcript)
        ctx = MutationContext(self.session_id, turn.turn_id, point, turn.cancellation, self._emit)
        with self._cancel_scope(turn):
            for mutator in self._mutators:
                name = str(getattr(mutator, "name", type(mutator).__name__))
                if self._observers:
                    self._emit(MutationStarted(self.session_id, turn.turn_id, name, point.value))
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
                if self._observers:
                    dirty = cursor.items is not before or (cursor.dirty and not was_dirty)
                    self._emit(
                        MutationFinished(self.session_id, turn.turn_id, name, point.value, dirty)
                    )
            if cursor.dirty:
                violation = find_violation(cursor.items)
                if violation is not None:
                    raise MutatorError(
                        f"mutator pass at {point.value} broke the transcript: {violation.message}"
                    )
                self._transcript = list(cursor.items)
                self._call_ids = _call_ids(self._transcript)
            return None
        # Cancelled: the pass is discarded as a whole.
        return await self._finish_cancelled(turn, "mutator")


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
    with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
        await aclose()
