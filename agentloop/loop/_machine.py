"""The core that decides: fed facts, it says what the driver does next.

:class:`LoopMachine` holds a session's :class:`~agentloop.loop._core.LoopCore`
and makes every decision of a step, synchronously, with no I/O: which phase a
step starts in (:meth:`LoopMachine.begin`, the table in ``docs/loop.md``),
whether the next model call may be made and with what request, what a model's
answer or failure means, and (in :class:`~agentloop.loop._rounds.RoundRules`)
what each call of a tool round and the round's end mean. Each decision
returns an :mod:`~agentloop.loop._actions` value; the driver performs it and
feeds the outcome back.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..core._cancellation import CancellationHandle
from ..core._errors import (
    InvalidInputError,
    InvalidStateError,
    ModelProtocolError,
    ProviderError,
    ProviderErrorKind,
)
from ..core._items import FinishReason, Item, Metadata, ToolCallPart, Usage
from ..core._tool_spec import ToolSpec
from ..core._transcript import TranscriptView, has_pending_input
from ..model._pricing import DEFAULT_PRICES
from ..model._protocol import ModelTurnResult, TurnRequest
from ..model._session_config import LimitAction, SessionConfig
from ..output._answer import Accepted, Exhausted, Rejected, judge, offered_tools
from ..tasks._protocol import TaskResult
from ..tools._tool import ToolRequest
from ._actions import (
    Action,
    CallModel,
    FinishCancelled,
    Hand,
    RecordDecisions,
    RunRound,
)
from ._call_results import duplicate
from ._core import LoopCore
from ._events import ModelCallRecord
from ._host_calls import begin_step, refuse_outside_idle
from ._mutators import LoopMutator, MutationPoint
from ._nested import host_step
from ._observer import Nobody
from ._output import OUTPUT_ACCEPTED_KEY, unrun_answer
from ._response_admission import admit_response, empty_reason, response_model, stamp_output
from ._rounds import RoundRules, shown_question
from ._state import (
    EMPTY_RESPONSE_KEY,
    FINAL_ANSWER_KEY,
    LIMIT_KEY,
    NO_MODEL_CALL_KEY,
    CallStatus,
    DriverEvent,
    RoundCall,
    ToolRound,
    TurnPhase,
    TurnState,
)
from ._steps import AwaitingInput, Finished, Resolver

__all__ = ["Background", "Catalog", "LoopMachine", "ModelAnswer"]


def _cancelled_stage(turn: TurnState) -> str:
    """Where an interrupt found a turn resting on the host."""
    if turn.phase is TurnPhase.PAUSED:
        return "pause"
    if turn.round is not None and shown_question(turn.round) is not None:
        return "question"
    if turn.round is not None and any(call.doubt is not None for call in turn.round.calls):
        return "in_doubt"
    if turn.round is not None and not any(
        call.status in _APPROVAL_STATUSES for call in turn.round.calls
    ):
        return "tool"  # e.g. its question was withdrawn: the call runs on
    return "approval"


_APPROVAL_STATUSES = (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVAL_SHOWN, CallStatus.DECIDED)


class Background(Protocol):
    """Where the background results come from (the tool I/O's task manager)."""

    def take_background(self) -> list[TaskResult]:
        """The background results that finished since the last look."""
        ...


class Catalog(Protocol):
    """The tools a model call offers (the tool I/O reads them from the executor)."""

    def changes(self) -> tuple[Sequence[Any], tuple[ToolSpec, ...] | None]:
        """The catalog's changes since the last model call, and the specs to offer when
        there were none (``None``: ask :meth:`specs` once observers were told)."""
        ...

    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs to offer."""
        ...


class ModelAnswer:
    """What one model call came to, as the model I/O saw it: ``result`` and the usage
    streamed, or the ``error`` it failed with, or ``timed_out``, or nothing (the turn's
    scope was cancelled). ``duration`` is measured from the request."""

    __slots__ = ("duration", "error", "result", "timed_out", "usage")

    def __init__(
        self,
        duration: float,
        result: ModelTurnResult | None = None,
        usage: Usage | None = None,
        error: ProviderError | None = None,
        timed_out: bool = False,
    ) -> None:
        self.duration = duration
        self.result = result
        self.usage = usage
        self.error = error
        self.timed_out = timed_out


class LoopMachine(RoundRules):
    """A session's decisions (the core's data is ``core``); see the module docstring."""

    __slots__ = (
        "cancellation",
        "config",
        "core",
        "model_name",
        "observer",
        "prices",
        "session_id",
        "tasks_name",
    )

    def __init__(
        self,
        core: LoopCore,
        config: SessionConfig,
        observer: Nobody,
        *,
        cancellation: CancellationHandle | None,
        model_name: str | None,
        tasks_name: str,
    ) -> None:
        self.core = core
        self.config = config
        self.session_id = config.session_id
        self.observer = observer
        self.cancellation = cancellation
        self.model_name = model_name
        self.tasks_name = tasks_name
        self.prices = config.price_table or DEFAULT_PRICES
        self.late = None

    # -- a step's phases -------------------------------------------------------

    def begin(self, resolver: Resolver, background: Background) -> Action:
        """The first action of a step (``next()``), in this order: finish a turn an
        interrupt cancelled while it waited on the host; record and apply answered
        approvals; surface an approval; continue the round; else the model phase, with
        the background results taken from ``background`` (only then)."""
        turn = self.core.turn
        if turn is None or (turn.round is None and not turn.is_cancelled):
            return self.model_phase(background.take_background(), resolver)
        if turn.is_cancelled:
            return FinishCancelled(turn, _cancelled_stage(turn))
        tool_round = turn.round
        assert tool_round is not None
        for call in tool_round.calls:
            if call.doubt is not None:  # in doubt after a restore: the host resolves it first
                return Hand(call.doubt)
        for call in tool_round.calls:
            if call.status is CallStatus.DECIDED:
                return RecordDecisions(turn, tool_round)
        return self.after_decisions(turn, tool_round, resolver)

    def after_decisions(self, turn: TurnState, tool_round: ToolRound, resolver: Resolver) -> Action:
        """The host's answers are recorded: run or deny them, else surface an approval,
        else continue the round (calls to start, running, or results to append)."""
        if not self.apply_decisions(tool_round):
            if (approval := self.surface_approval(tool_round)) is not None:
                return Hand(approval)
            if (question := shown_question(tool_round)) is not None:
                # Asked again: the host has not answered it.
                return Hand(host_step(question, resolver))
        return RunRound(turn, tool_round)

    def model_phase(self, done: Sequence[TaskResult], resolver: Resolver) -> Action:
        """The model phase, with the background results ``done`` just taken: resume a
        paused turn, or start a turn for input (or those results), or wait for input."""
        for update in done:
            self.append_result(update.result, background=True)
        core = self.core
        turn = core.turn
        if turn is not None and turn.phase is TurnPhase.PAUSED:
            turn.phase = TurnPhase.ACTIVE
            return CallModel(turn, MutationPoint.AFTER_TOOL_RESULT)
        if not core.pending_input and not done:
            return Hand(self._awaiting_input(resolver))
        return CallModel(self.start_turn(), MutationPoint.AFTER_TURN_ENDED)

    def _awaiting_input(self, resolver: Resolver) -> AwaitingInput:
        retry_point = self.core.retry_point
        if retry_point is None:
            return AwaitingInput(self.session_id, driver=resolver)
        error = retry_point.error
        return AwaitingInput(
            self.session_id,
            f"{retry_point.turn_id} ended because a model call failed "
            f"({error.kind.value}: {error}); call retry() or submit input",
            driver=resolver,
        )

    def start_turn(self) -> TurnState:
        """Open the next turn (bound to a snapshot of the session's cancellation)."""
        cancellation = self.cancellation
        turn = self.core.start_turn(cancellation.snapshot() if cancellation else None)
        self.observer.turn_started(self.session_id, turn.turn_id)
        return turn

    def retry(self, mutators: Sequence[LoopMutator]) -> CallModel:
        """``retry()``: the failed model call again, in a new turn (the step begun), with
        ``mutators`` first; refused, changing nothing, with no retry point or bad mutators."""
        core = self.core
        for position, mutator in enumerate(mutators):
            if not callable(getattr(mutator, "mutate", None)):
                raise InvalidInputError(
                    f"retry(): mutators[{position}] is a {type(mutator).__name__}, not a "
                    "LoopMutator (it needs an async mutate(cursor, ctx) method)"
                )
        if core.retry_point is None:
            refuse_outside_idle(core, "retry()")
            raise InvalidStateError(
                "cannot retry(): no model call failed since the last turn started; "
                "use continue_turn() to call the model on the transcript as it is, "
                "or submit input and call next()"
            )
        begin_step(core, DriverEvent.RETRY, "retry()")
        point = MutationPoint(core.retry_point.point)
        return CallModel(self.start_turn(), point, False, tuple(mutators))

    def continue_turn(self) -> CallModel:
        """``continue_turn()``: a model call on the transcript as it is, in a new turn (the
        step begun); refused, changing nothing, outside IDLE or without a user tail."""
        core = self.core
        refuse_outside_idle(core, "continue_turn()")
        point = MutationPoint(core.continue_point("continue_turn()"))
        begin_step(core, DriverEvent.CONTINUE, "continue_turn()")
        return CallModel(self.start_turn(), point, False)

    # -- a model call ----------------------------------------------------------

    def nothing_to_answer(self, turn: TurnState) -> Hand | None:
        """Finish instead of an assistant-prefill request (e.g. a mutator removed the new
        input); ``None`` when the transcript ends in something the model can answer."""
        transcript = self.core.transcript
        if has_pending_input(transcript):
            return None
        reason = (
            "the transcript is empty"
            if not transcript
            else "the transcript ends with an item of kind "
            f"{transcript[-1].kind.value!r}, so there is nothing for the model to "
            "answer; submit input first"
        )
        self.observer.warning(f"{turn.turn_id}: no model call: {reason}")
        return Hand(self.finish(turn, FinishReason.COMPLETED, {NO_MODEL_CALL_KEY: reason}))

    def next_request(self, turn: TurnState, catalog: Catalog) -> TurnRequest | Hand:
        """The next model call's request (counted, the catalog's changes told), or the step
        that ends the turn at a limit (the catalog is then not read)."""
        limits = self.config.limits
        withhold_tools = False
        if (limit := self.core.limit_reached(turn, limits)) is not None:
            if (
                limit == "max_model_calls_per_turn"
                and limits.on_limit is LimitAction.FINAL_ANSWER
                and not turn.final_answer
                and self.core.usage_limit_reached(turn, limits) is None
            ):
                # One last call without tools, so the user gets an answer (N+1 calls).
                turn.final_answer = withhold_tools = True
            else:
                return Hand(self.finish(turn, FinishReason.LIMIT_REACHED, {LIMIT_KEY: limit}))
        turn.model_calls += 1
        # The catalog's changes are told to the observers as they are read (the tool
        # I/O); the call, as the model I/O makes it.
        _, listed = catalog.changes()
        core = self.core
        cache = core.next_turn_cache or self.config.cache
        core.next_turn_cache = None
        tools = () if withhold_tools else listed if listed is not None else catalog.specs()
        output = self.config.output
        if output is not None:  # and the final-answer tool, in its mode
            tools = offered_tools(output, tools)
        request = TurnRequest(
            self.session_id,
            turn.turn_id,
            TranscriptView(core.transcript),
            tools,
            cache,
            self.config.metadata,
            output=output,
        )
        return request

    def model_answered(
        self, turn: TurnState, point: MutationPoint, answer: ModelAnswer, resolver: Resolver
    ) -> Action:
        """What the model call's outcome means: the turn ends, a round starts, or (a
        steering message arrived meanwhile) the model is called again."""
        index = turn.model_calls
        if answer.error is not None:
            if turn.is_cancelled:  # the error is the interrupt's echo: a cancelled turn
                return FinishCancelled(turn, "model")
            return Hand(self._failed(turn, index, answer.duration, point, answer.error))
        if answer.timed_out:
            record = ModelCallRecord(
                index=index,
                finish_reason=FinishReason.LIMIT_REACHED,
                duration=answer.duration,
                model=self.model_name,
            )
            turn.model_call_records.append(record)
            metadata = {LIMIT_KEY: "request_timeout"}
            return Hand(self.finish(turn, FinishReason.LIMIT_REACHED, metadata))
        if answer.result is None:
            return FinishCancelled(turn, "model")
        return self._response(turn, index, answer, point)

    def _response(
        self, turn: TurnState, index: int, answer: ModelAnswer, point: MutationPoint
    ) -> Action:
        result = answer.result
        assert result is not None
        core = self.core
        model, usage = self._priced(turn, result, answer.usage)
        try:
            admitted, duplicates = admit_response(result.output_items, core.call_ids)
        except ModelProtocolError as refused:
            return Hand(self._failed(turn, index, answer.duration, point, refused, usage=usage))
        output, calls = _stamped(admitted, usage, result.finish_reason)
        if not calls and (empty := empty_reason(output, result.finish_reason)) is not None:
            error = ProviderError(
                f"the model returned an empty response ({empty})",
                error_type="empty_response",
                kind=ProviderErrorKind.INVALID_RESPONSE,
            )
            metadata: dict[str, object] = {EMPTY_RESPONSE_KEY: empty}
            return Hand(self._failed(turn, index, answer.duration, point, error, metadata, usage))
        spec = self.config.output  # structured output: judge the answer (agentloop.output)
        verdict = judge(spec, output, calls, turn.items) if spec is not None else None
        if isinstance(verdict, Exhausted):
            failed = self._failed(turn, index, answer.duration, point, verdict.error, usage=usage)
            return Hand(failed)
        turn.model_call_records.append(
            ModelCallRecord(
                index=index,
                finish_reason=result.finish_reason,
                usage=usage,
                duration=answer.duration,
                model=model,
            )
        )
        reason = result.finish_reason
        self.observer.model_call_finished(turn.turn_id, index, reason, usage, answer.duration)
        for item in output:
            core.append(item)
        if verdict is not None:
            return self._judged(turn, verdict, result.metadata)
        if calls:
            return self._start_round(turn, calls, duplicates)
        return self._text_answer(turn, result)

    def count_usage(
        self, turn: TurnState, result: ModelTurnResult, usage: Usage | None
    ) -> tuple[str | None, Usage | None]:
        """A model call made for a tool (a question for the model): its model and usage,
        priced and added to the turn's and the session's totals."""
        return self._priced(turn, result, usage)

    def _priced(
        self, turn: TurnState, result: ModelTurnResult, usage: Usage | None
    ) -> tuple[str | None, Usage | None]:
        """The answering model and the call's usage priced for it, added to the totals."""
        model = response_model(result.output_items) or self.model_name
        if usage is not None:
            usage = self.prices.fill(model, usage)
        turn.add_usage(usage)
        self.core.add_session_usage(usage)
        return model, usage

    def _text_answer(self, turn: TurnState, result: ModelTurnResult) -> Action:
        """An answer without tool calls: the turn ends (or goes on for a steering message)."""
        core = self.core
        if turn.final_answer:
            final: dict[str, object] = {**result.metadata, LIMIT_KEY: "max_model_calls_per_turn",
                        FINAL_ANSWER_KEY: True}  # fmt: skip
            return Hand(self.finish(turn, FinishReason.LIMIT_REACHED, final))
        if core.steering:  # a message arrived while the model answered: continue
            return CallModel(turn, MutationPoint.AFTER_TURN_ENDED)
        return Hand(self.finish(turn, result.finish_reason, result.metadata))

    def _judged(self, turn: TurnState, verdict: Accepted | Rejected, metadata: Metadata) -> Action:
        """The turn's structured output was judged: accepted, it ends the turn; rejected,
        the problems go back to the model and it answers again."""
        for item in verdict.items:
            self.core.append(item)
        if not isinstance(verdict, Accepted):
            return CallModel(turn, MutationPoint.AFTER_TURN_ENDED)
        turn.output = verdict.value
        accepted = {**metadata, OUTPUT_ACCEPTED_KEY: True}
        return Hand(self.finish(turn, FinishReason.COMPLETED, accepted))

    def _start_round(
        self, turn: TurnState, calls: list[ToolCallPart], duplicates: dict[str, str]
    ) -> Action:
        """The round of ``calls`` to run (set on the turn), or the step refusing it."""
        session_id = self.session_id
        tool_round = turn.round = ToolRound(
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
        limits = self.config.limits
        if turn.final_answer:
            # The model asked for tools although none were offered: answer, then stop.
            limit = limits.max_model_calls_per_turn or 0
            return Hand(self.refuse(turn, tool_round, ("max_model_calls_per_turn", limit)))
        refusal = self.core.tool_call_limit(turn, len(calls), limits)
        if refusal is not None:
            return Hand(self.refuse(turn, tool_round, refusal))
        spec = self.config.output
        if duplicates or spec is not None:
            for call in tool_round.calls:
                if call.call.id in duplicates:
                    tool_round.results[call.index] = duplicate(call, duplicates[call.call.id])
                elif (unrun := unrun_answer(spec, call)) is not None:
                    tool_round.results[call.index] = unrun
        return RunRound(turn, tool_round, fresh=True)

    def _failed(
        self,
        turn: TurnState,
        index: int,
        duration: float,
        point: MutationPoint,
        error: ProviderError,
        metadata: dict[str, object] | None = None,
        usage: Usage | None = None,
    ) -> Finished:
        """End ``turn``: its model call ``index`` failed (``retry()`` issues it again)."""
        turn.model_call_records.append(
            ModelCallRecord(
                index=index,
                finish_reason=FinishReason.ERROR,
                usage=usage,
                duration=duration,
                model=self.model_name,
                error_kind=error.kind.value,
            )
        )
        self.observer.model_call_failed(turn.turn_id, index, error.kind.value, str(error), duration)
        return self.finish_failed(turn, error, point.value, metadata)


def _stamped(
    admitted: Sequence[Item], usage: Usage | None, reason: FinishReason
) -> tuple[list[Item], list[ToolCallPart]]:
    """The response's items stamped with usage, reason and time, and its tool calls."""
    now = time.time()
    output: list[Item] = []
    calls: list[ToolCallPart] = []
    for item in admitted:  # one pass, no generators: once per model call
        output.append(stamped := stamp_output(item, usage, reason, now))
        for part in stamped.parts:
            if isinstance(part, ToolCallPart):
                calls.append(part)
    return output, calls
