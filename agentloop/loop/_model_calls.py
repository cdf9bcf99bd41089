"""Model calls: mutators, limits, the streamed response, and what follows it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Sequence

import anyio

from ..core._delta import Delta
from ..core._errors import ModelProtocolError, MutatorError, ProviderError, ProviderErrorKind
from ..core._items import (
    FinishReason,
    Item,
    ToolCallPart,
    Usage,
)
from ..core._tool_spec import ToolSpec
from ..core._transcript import TranscriptView, find_violation, has_pending_input
from ..model._config import LimitAction
from ..model._pricing import DEFAULT_PRICES
from ..model._protocol import ModelEvent, ModelTurnResult, TurnRequest
from ..output._answer import Accepted, Exhausted, judge, offered_tools
from ..tools._tool import ToolRequest
from ._core import LoopCore
from ._effects import CLEANUP_SECONDS, UNGUARDED, Effects
from ._events import (
    ContentDelta,
    LoopWarning,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallRecord,
    ModelCallStarted,
    MutationFinished,
    MutationStarted,
    ToolCallRequested,
    ToolCatalogChanged,
    UsageUpdated,
)
from ._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor
from ._output import OUTPUT_ACCEPTED_KEY, unrun_answer
from ._persistence import Persistence
from ._pipeline import ToolPipeline
from ._responses import admit_response, empty_reason, response_model, stamp_output
from ._results import duplicate
from ._state import (
    EMPTY_RESPONSE_KEY,
    FINAL_ANSWER_KEY,
    LIMIT_KEY,
    NO_MODEL_CALL_KEY,
    RoundCall,
    ToolRound,
    TurnState,
)
from ._steps import (
    Step,
)

__all__ = ["ModelCaller", "ready"]


class _Steered:
    """``_handle_response``: a steering message came; call the model again."""


_STEERED = _Steered()


class ModelCaller:
    """Calls the model, layered by concern, and hands tool calls to the pipeline (internal).

    ``call_model`` (input, mutators) -> ``_call_model_handling_limits`` (limits, the
    request, the stream read under the turn's scope and deadline, ``_streamed``);
    ``_handle_response`` turns the result into a step.
    """

    __slots__ = (
        "_core",
        "_drain_with_specs",
        "_executor",
        "_fx",
        "_model_name",
        "_mutators",
        "_persistence",
        "_pipeline",
        "_prices",
        "_session",
    )

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
        self._prices = effects.config.price_table or DEFAULT_PRICES
        self._model_name = effects.parts.model_name
        # BasicToolExecutor drains catalog changes and lists specs in one pass. The
        # class's function, not a bound method: one object less per session (W3).
        self._drain_with_specs = getattr(type(self._executor), "_drain_with_specs", None)

    def call_model(
        self,
        turn: TurnState,
        point: MutationPoint,
        *,
        fold_input: bool = True,
        extra_mutators: Sequence[LoopMutator] = (),
    ) -> Awaitable[Step]:
        """Deliver steering and pending input (unless ``fold_input`` is false: ``retry()``
        and ``continue_turn()`` send the transcript as it is), then call the model.

        ``extra_mutators`` run once, before the agent's own (``retry(mutators=...)``).
        Returns what to await: without mutators no coroutine of its own (one frame
        less for every step to create and resume).
        """
        if fold_input:
            self._core.deliver_steering()
            self._core.fold_pending_input()
        mutators = (*extra_mutators, *self._mutators) if extra_mutators else self._mutators
        if mutators:
            return self._call_model_after_mutators(turn, point, mutators)
        if (finished := self._nothing_to_answer(turn)) is not None:
            return ready(finished)
        return self._call_model_handling_limits(turn, point)

    async def _call_model_after_mutators(
        self, turn: TurnState, point: MutationPoint, mutators: Sequence[LoopMutator]
    ) -> Step:
        if (step := await self._run_mutators(turn, point, mutators)) is not None:
            return step
        if (finished := self._nothing_to_answer(turn)) is not None:
            return finished
        return await self._call_model_handling_limits(turn, point)

    def _nothing_to_answer(self, turn: TurnState) -> Step | None:
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
                self._fx.emit(LoopWarning(f"{turn.turn_id}: no model call: {reason}"))
            return self._pipeline.finish(turn, FinishReason.COMPLETED, {NO_MODEL_CALL_KEY: reason})
        return None

    def _next_request(self, turn: TurnState) -> TurnRequest | Step:
        """The next model call's request (counted, catalog changes told), or the step
        that ends the turn at a limit. Apart from the read: fewer locals in the frame
        a turn waiting for its model holds (W3)."""
        limits = self._fx.config.limits
        withhold_tools = False
        if (limit := self._core.limit_reached(turn, limits)) is not None:
            if (
                limit == "max_model_calls_per_turn"
                and limits.on_limit is LimitAction.FINAL_ANSWER
                and not turn.final_answer
                and self._core.usage_limit_reached(turn, limits) is None
            ):
                # One last call without tools, so the user gets an answer (N+1 calls).
                turn.final_answer = withhold_tools = True
            else:
                return self._pipeline.finish(turn, FinishReason.LIMIT_REACHED, {LIMIT_KEY: limit})
        turn.model_calls += 1
        drain_with_specs = self._drain_with_specs
        if drain_with_specs is not None:  # BasicToolExecutor: one listing for both
            changes, specs = drain_with_specs(self._executor)
        else:
            changes, specs = self._executor.drain_catalog_events(), None
        if self._fx.observed:
            for change in changes:
                self._fx.emit(
                    ToolCatalogChanged(change.source, change.added, change.removed, change.changed)
                )
        request = self._request(turn, withhold_tools, specs)
        if self._fx.observed:
            self._fx.emit(
                ModelCallStarted(
                    turn.turn_id,
                    turn.model_calls,
                    len(request.transcript),
                    len(request.available_tools),
                    withhold_tools,
                )
            )
        return request

    async def _call_model_handling_limits(self, turn: TurnState, point: MutationPoint) -> Step:
        if self._persistence.enabled:
            # A round's results before the model is waited for, and before the call
            # is counted: a restore from this save makes the same call, counted once.
            await self._persistence.save_results(self._core)
        request = self._next_request(turn)
        if not isinstance(request, TurnRequest):
            return request
        index = turn.model_calls
        started = time.monotonic()
        timeout = self._fx.config.limits.request_timeout
        outcome: tuple[ModelTurnResult, Usage | None] | str | None = None
        try:
            # Read here, not in a coroutine of its own: a turn waiting for its model
            # holds one frame less (W3). Without a cancellation handle or a request
            # timeout both blocks are shared null contexts.
            with self._fx.cancel_scope(turn):  # cancelled: ``outcome`` stays None
                try:
                    with anyio.fail_after(timeout) if timeout is not None else UNGUARDED:
                        stream = await self._session.begin_turn(request, turn.cancellation)
                        streamed_usage: Usage | None = None
                        # The calls already announced one by one (observers only).
                        announced: set[str] | None = set() if self._fx.observed else None
                        result: ModelTurnResult | None = None
                        try:
                            async for event in stream:
                                if isinstance(event, ModelTurnResult):
                                    result = event
                                    break
                                got = self._on_model_event(event, announced)
                                streamed_usage = got or streamed_usage
                        except BaseException:
                            await _close(stream, shielded=True)
                            raise
                        await _close(stream, shielded=False)
                        outcome = self._streamed(result, streamed_usage, announced)
                except TimeoutError:
                    outcome = "request_timeout"
        except ProviderError as error:
            if turn.is_cancelled:  # the error is the interrupt's echo: a cancelled turn
                return await self._pipeline.finish_cancelled(turn, "model")
            return self._failed(turn, index, started, point, error)
        if outcome is None:
            return await self._pipeline.finish_cancelled(turn, "model")
        if isinstance(outcome, str):
            turn.model_call_records.append(
                ModelCallRecord(
                    index=index,
                    finish_reason=FinishReason.LIMIT_REACHED,
                    duration=time.monotonic() - started,
                    model=self._model_name,
                )
            )
            return self._pipeline.finish(turn, FinishReason.LIMIT_REACHED, {LIMIT_KEY: outcome})
        after = self._handle_response(turn, index, started, point, *outcome)
        # What needs an await is done here, not in a coroutine of its own: a
        # suspended turn holds one frame less per layer (W3) and creates fewer.
        if after is _STEERED:  # a message arrived while the model answered: continue
            return await self.call_model(turn, MutationPoint.AFTER_TURN_ENDED)
        if isinstance(after, ToolRound):
            if self._persistence.enabled:
                await self._persistence.save_response(self._core)
            return await self._pipeline.advance(turn, after)
        assert not isinstance(after, _Steered)
        return after

    def _failed(
        self,
        turn: TurnState,
        index: int,
        started: float,
        point: MutationPoint,
        error: ProviderError,
        metadata: dict[str, object] | None = None,
        usage: Usage | None = None,
    ) -> Step:
        """End ``turn``: its model call ``index`` failed (``retry()`` issues it again)."""
        duration = time.monotonic() - started
        turn.model_call_records.append(
            ModelCallRecord(
                index=index,
                finish_reason=FinishReason.ERROR,
                usage=usage,
                duration=duration,
                model=self._model_name,
                error_kind=error.kind.value,
            )
        )
        if self._fx.observed:
            self._fx.emit(
                ModelCallFailed(turn.turn_id, index, error.kind.value, str(error), duration)
            )
        return self._pipeline.finish_failed(turn, error, point.value, metadata)

    def _request(
        self,
        turn: TurnState,
        withhold_tools: bool = False,
        specs: tuple[ToolSpec, ...] | None = None,
    ) -> TurnRequest:
        core = self._core
        cache = core.next_turn_cache or self._fx.config.cache
        core.next_turn_cache = None
        output = self._fx.config.output
        tools = () if withhold_tools else specs if specs is not None else self._executor.specs()
        return TurnRequest(
            self._fx.session_id,
            turn.turn_id,
            TranscriptView(core.transcript),
            offered_tools(output, tuple(tools)),
            cache,
            self._fx.config.metadata,
            output=output,
        )

    def _handle_response(
        self,
        turn: TurnState,
        index: int,
        started: float,
        point: MutationPoint,
        result: ModelTurnResult,
        usage: Usage | None,
    ) -> Step | ToolRound | _Steered:
        """The step the response ends the turn with, else the round to run (or
        ``_STEERED``: call the model again)."""
        core = self._core
        model = response_model(result.output_items) or self._model_name
        if usage is not None:
            usage = self._prices.fill(model, usage)
        turn.add_usage(usage)
        core.add_session_usage(usage)
        duration = time.monotonic() - started
        try:
            admitted, duplicates = admit_response(result.output_items, self._core.call_ids)
        except ModelProtocolError as refused:
            return self._failed(turn, index, started, point, refused, usage=usage)
        now = time.time()
        output: list[Item] = []
        calls: list[ToolCallPart] = []
        for item in admitted:  # one pass, no generators: once per model call
            output.append(stamped := stamp_output(item, usage, result.finish_reason, now))
            for part in stamped.parts:
                if isinstance(part, ToolCallPart):
                    calls.append(part)
        if not calls and (empty := empty_reason(output, result.finish_reason)) is not None:
            empty_error = ProviderError(
                f"the model returned an empty response ({empty})",
                error_type="empty_response",
                kind=ProviderErrorKind.INVALID_RESPONSE,
            )
            return self._failed(
                turn, index, started, point, empty_error, {EMPTY_RESPONSE_KEY: empty}, usage
            )
        spec = self._fx.config.output  # structured output: judge the answer (agentloop.output)
        verdict = judge(spec, output, calls, turn.items) if spec is not None else None
        if isinstance(verdict, Exhausted):
            return self._failed(turn, index, started, point, verdict.error, usage=usage)
        turn.model_call_records.append(
            ModelCallRecord(
                index=index,
                finish_reason=result.finish_reason,
                usage=usage,
                duration=duration,
                model=model,
            )
        )
        if self._fx.observed:
            self._fx.emit(
                ModelCallFinished(turn.turn_id, index, result.finish_reason, usage, duration)
            )
        for item in output:
            core.append(item)
        if verdict is not None:
            for item in verdict.items:
                core.append(item)
            if not isinstance(verdict, Accepted):
                return _STEERED  # the problems went back to the model: it answers again
            turn.output = verdict.value
            metadata = {**result.metadata, OUTPUT_ACCEPTED_KEY: True}
            return self._pipeline.finish(turn, FinishReason.COMPLETED, metadata)
        if not calls:
            if turn.final_answer:
                metadata = {**result.metadata, LIMIT_KEY: "max_model_calls_per_turn",
                            FINAL_ANSWER_KEY: True}  # fmt: skip
                return self._pipeline.finish(turn, FinishReason.LIMIT_REACHED, metadata)
            if core.steering:  # a message arrived while the model answered: continue
                return _STEERED
            return self._pipeline.finish(turn, result.finish_reason, result.metadata)
        return self._start_round(turn, calls, duplicates)

    def _start_round(
        self, turn: TurnState, calls: list[ToolCallPart], duplicates: dict[str, str]
    ) -> Step | ToolRound:
        """The round of ``calls`` to run (set on the turn), or the step refusing it."""
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
        if turn.final_answer:
            # The model asked for tools although none were offered: answer, then stop.
            limit = self._fx.config.limits.max_model_calls_per_turn or 0
            return self._pipeline.refuse(turn, turn.round, ("max_model_calls_per_turn", limit))
        refusal = self._core.tool_call_limit(turn, len(calls), self._fx.config.limits)
        if refusal is not None:
            return self._pipeline.refuse(turn, turn.round, refusal)
        spec = self._fx.config.output
        for call in turn.round.calls:
            if call.call.id in duplicates:
                result = duplicate(call, duplicates[call.call.id])
                turn.round.results[call.index] = result
            elif (unrun := unrun_answer(spec, call)) is not None:
                turn.round.results[call.index] = unrun
        return turn.round

    def _streamed(
        self, result: ModelTurnResult | None, usage: Usage | None, announced: set[str] | None
    ) -> tuple[ModelTurnResult, Usage | None]:
        """The model's result and usage once its stream ended (announcing the calls the
        stream did not announce one by one)."""
        if result is None:
            raise ModelProtocolError(
                "model stream ended without a ModelTurnResult: every model turn must end "
                "with one (check the adapter)"
            )
        if announced is not None:
            for item in result.output_items:
                for call in item.tool_calls():
                    if call.id not in announced:
                        self._fx.emit(ToolCallRequested(call))
        return result, result.usage if result.usage is not None else usage

    def _on_model_event(self, event: ModelEvent, announced: set[str] | None) -> Usage | None:
        if isinstance(event, Delta):
            if self._fx.observed:
                self._fx.emit(ContentDelta(event))
            return None
        if isinstance(event, Usage):
            if self._fx.observed:
                self._fx.emit(UsageUpdated(event))
            return event
        if isinstance(event, ToolCallPart):
            if announced is not None:
                announced.add(event.id)
                self._fx.emit(ToolCallRequested(event))
            return None
        raise ModelProtocolError(
            f"model stream yielded {type(event).__name__}; expected a Delta, ToolCallPart, "
            "Usage or ModelTurnResult"
        )

    # -- mutators ------------------------------------------------------------

    async def _run_mutators(
        self, turn: TurnState, point: MutationPoint, mutators: Sequence[LoopMutator]
    ) -> Step | None:
        session_id = self._fx.session_id
        cursor = TranscriptCursor(self._core.transcript)
        ctx = MutationContext(session_id, turn.turn_id, point, turn.cancellation, self._fx.emit)
        with self._fx.cancel_scope(turn):
            for mutator in mutators:
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


async def ready(step: Step) -> Step:
    """``step`` as an awaitable (a path that decided without awaiting anything)."""
    return step
