"""The driver's synchronous state core: no awaits, no I/O (h11's ``Connection`` style).

``LoopCore`` owns what one session is made of between effects: the
transcript, pending input, the steering and follow-up queues, the turn, its
round and each call's record, and the driver's :class:`DriverState`.
:meth:`LoopCore.handle` is the one method that changes the state, through
the :data:`TRANSITIONS` table (restoring a checkpoint goes through it too).
The decisions over this state are ``_machine.py`` and ``_rounds.py``; the
driver's step loop (``_step_runner.py``) performs their actions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..core._errors import InvalidInputError, InvalidStateError, ProviderError
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    ResultOutcome,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    result_outcome,
)
from ..core._transcript import has_pending_input
from ..model._session_config import LoopLimits, PromptCacheRequest, QueueMode, SessionConfig
from ._events import TurnResult
from ._state import (
    STEP_EVENTS,
    WAITING_FOR_APPROVAL,
    DriverEvent,
    DriverState,
    QueuedMessage,
    Restored,
    RetryPoint,
    RoundCall,
    TurnPhase,
    TurnState,
    next_state,
    tool_result_item,
)
from ._steps import Step

__all__ = ["LoopCore", "checked_input", "event_after"]


_NONE_DETACHED: frozenset[str] = frozenset()
"""Shared by every core with no detached call (``frozenset()`` is a new object each time)."""


class LoopCore:
    """Everything a session holds between effects, and the one state-changing method."""

    __slots__ = (
        "_on_append",
        "call_ids",
        "detached",
        "failure",
        "follow_up_mode",
        "follow_ups",
        "next_turn_cache",
        "pending_input",
        "retry_point",
        "session_id",
        "session_tool_calls",
        "session_usage",
        "state",
        "steering",
        "steering_mode",
        "transcript",
        "turn",
        "turn_counter",
    )

    def __init__(
        self,
        config: SessionConfig,
        transcript: Sequence[Item],
        pending: Sequence[Item],
        on_append: Callable[[Item], None] | None,
    ) -> None:
        self.session_id = config.session_id
        self.steering_mode = config.steering_mode
        self.follow_up_mode = config.follow_up_mode
        self.transcript: list[Item] = list(transcript)
        # Every call id of the transcript: a dict as an ordered set (a third of a set's size).
        self.call_ids: dict[str, None] = _call_ids(self.transcript)
        self.pending_input: tuple[Item, ...] = tuple(pending)  # usually the shared ()
        # Queued messages, oldest first: tuples (usually empty, so shared; a list
        # each would cost every session ~140 bytes).
        self.steering: tuple[QueuedMessage, ...] = ()
        self.follow_ups: tuple[QueuedMessage, ...] = ()
        self.turn: TurnState | None = None
        self.turn_counter = 0
        self.next_turn_cache: PromptCacheRequest | None = None
        self.detached: frozenset[str] = _NONE_DETACHED
        """Calls answered by a background placeholder whose real result is still due
        (immutable: a call is added with ``add_detached``)."""
        self.session_usage: Usage | None = None
        self.state = DriverState.IDLE
        self.failure: BaseException | None = None
        self.retry_point: RetryPoint | None = None
        """Set when a turn ended because a model call failed; ``retry()`` resumes there."""
        self.session_tool_calls = 0
        """Tool calls answered in this session (for ``max_tool_calls_per_session``)."""
        self._on_append = on_append

    # -- the state machine ---------------------------------------------------

    def handle(self, event: DriverEvent) -> DriverState:
        """Apply ``event``: the only place the state changes (see ``TRANSITIONS``)."""
        self.state = next_state(self.state, event)
        return self.state

    def restore(self, restored: Restored, turn: TurnState | None) -> DriverState:
        """Take a parsed checkpoint's state (``turn`` already rebuilt) and apply its event."""
        self.turn_counter = restored.turn_counter
        self.next_turn_cache = restored.next_turn_cache
        self.detached = frozenset(restored.detached)
        self.session_usage = restored.session_usage
        self.steering = tuple(restored.steering)
        self.follow_ups = tuple(restored.follow_ups)
        self.retry_point = restored.retry_point
        self.session_tool_calls = restored.session_tool_calls
        if turn is not None and turn.round is None and not turn.is_cancelled:
            # Saved between a round and the model call after it (a journal made
            # just before the model was waited for): the model is next, as after
            # a pause. Restored as anything else, the turn would never continue.
            turn.phase = TurnPhase.PAUSED
        self.turn = turn
        return self.handle(self.restore_event())

    def restore_event(self) -> DriverEvent:
        """The event that restores this core's turn (the turn set from a checkpoint)."""
        turn = self.turn
        if turn is not None and turn.round is not None:
            if any(call.doubt is not None for call in turn.round.calls):
                return DriverEvent.RESTORE_IN_DOUBT  # a call in doubt the host resolves
            if any(call.status in WAITING_FOR_APPROVAL for call in turn.round.calls):
                return DriverEvent.RESTORE_APPROVAL
            if any(call.question is not None for call in turn.round.calls):
                return DriverEvent.RESTORE_QUESTION  # a question that survives the restore
            # A round to finish (calls never started, results not yet appended) is
            # a pause inside the turn: input submitted now lands before the next
            # model call, after the round's results, never in place of them.
            return DriverEvent.RESTORE_PAUSE
        if turn is not None and turn.phase is TurnPhase.PAUSED:
            return DriverEvent.RESTORE_PAUSE
        return DriverEvent.RESTORE

    # -- turns ---------------------------------------------------------------

    def start_turn(self, cancellation: Any) -> TurnState:
        """Open the next turn."""
        self.turn_counter += 1
        self.turn = TurnState(f"turn-{self.turn_counter}", cancellation)
        self.retry_point = None
        return self.turn

    def finish_turn(
        self,
        turn: TurnState,
        reason: FinishReason,
        metadata: Any,
        error: ProviderError | None = None,
    ) -> TurnResult:
        """Close ``turn``; a turn that finished (not cancelled, not failed) releases the
        follow-ups."""
        result = TurnResult(
            turn.turn_id,
            reason,
            turn.items,
            turn.usage,
            metadata or {},
            tool_calls=turn.tool_calls,
            model_calls=turn.model_call_records,
            error=error,
            output=turn.output,
        )
        self.turn = None
        if reason not in (FinishReason.CANCELLED, FinishReason.ERROR) and self.follow_ups:
            # The next next() starts the follow-up as a new turn.
            taken, self.follow_ups = take(self.follow_ups, self.follow_up_mode)
            self.pending_input = (*self.pending_input, *taken)
        return result

    def deliver_steering(self) -> None:
        """Move queued steering messages into the pending input (a model call is next)."""
        if self.steering:
            taken, self.steering = take(self.steering, self.steering_mode)
            self.pending_input = (*self.pending_input, *taken)

    def add_session_usage(self, usage: Usage | None) -> None:
        """Add one model call's usage to the session's total."""
        if usage is not None:
            self.session_usage = usage if self.session_usage is None else self.session_usage + usage

    def limit_reached(self, turn: TurnState, limits: LoopLimits) -> str | None:
        """The name of the first limit the next model call would break, if any."""
        if limits.max_model_calls_per_turn is not None and (
            turn.model_calls >= limits.max_model_calls_per_turn
        ):
            return "max_model_calls_per_turn"
        return self.usage_limit_reached(turn, limits)

    def usage_limit_reached(self, turn: TurnState, limits: LoopLimits) -> str | None:
        """The name of the first token or cost limit already reached, if any."""
        checks = (
            ("turn", turn.usage, limits.max_input_tokens_per_turn,
             limits.max_output_tokens_per_turn, limits.max_total_tokens_per_turn,
             limits.max_cost_per_turn),
            ("session", self.session_usage, limits.max_input_tokens_per_session,
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

    # -- the transcript ------------------------------------------------------

    def append(self, item: Item) -> None:
        """The one place items enter the transcript."""
        self.transcript.append(item)
        if self.turn is not None:
            self.turn.items.append(item)
        for part in item.parts:
            if isinstance(part, ToolCallPart):
                self.call_ids[part.id] = None
        if self._on_append is not None:
            self._on_append(item)

    def replace_transcript(self, items: Sequence[Item]) -> None:
        """Take a mutator pass's (already checked) transcript."""
        self.transcript = list(items)
        self.call_ids = _call_ids(self.transcript)

    def fold_pending_input(self) -> None:
        """Append the pending input (stamped with the time if it has none)."""
        pending = self.pending_input
        if not pending:  # every model call of a turn but the first
            return
        self.pending_input = ()
        now = time.time()
        for item in pending:
            self.append(item if item.created_at is not None else attrs.evolve(item, created_at=now))

    def add_detached(self, call_id: str) -> None:
        """``call_id`` was answered by a placeholder; its real result is still due."""
        self.detached = self.detached | {call_id}

    def append_result(
        self, result: ToolResultPart, *, background: bool = False, at: float | None = None
    ) -> None:
        """Append ``result`` stamped ``at`` (default: now); a background call's real
        result becomes a notification."""
        now = time.time() if at is None else at
        if (background or result.call_id in self.detached) and not _is_placeholder(result):
            if result.call_id in self.detached:
                self.detached = self.detached - {result.call_id}
            label = "failed" if result.is_error else "completed"
            text = f"Background tool call {result.call_id} {label}: {_brief(result.output)}"
            self.append(Item(ItemKind.NOTIFICATION, (TextPart(text),), created_at=now))
            return
        self.append(tool_result_item(result, now))

    # -- approvals -----------------------------------------------------------

    def tool_call_limit(
        self, turn: TurnState, count: int, limits: LoopLimits
    ) -> tuple[str, int] | None:
        """The tool-call limit (name, value) that ``count`` more calls would break, if any."""
        per_turn = len(turn.tool_calls)
        checks = (
            ("max_tool_calls_per_round", 0, limits.max_tool_calls_per_round),
            ("max_tool_calls_per_turn", per_turn, limits.max_tool_calls_per_turn),
            ("max_tool_calls_per_session", self.session_tool_calls,
             limits.max_tool_calls_per_session),
        )  # fmt: skip
        for name, used, limit in checks:
            if limit is not None and used + count > limit:
                return name, limit
        return None

    def continue_point(self, operation: str) -> str:
        """The mutation point a model call on the transcript as it is runs at; raises
        ``InvalidStateError`` when the transcript ends in nothing the model can answer."""
        transcript = self.transcript
        if not has_pending_input(transcript):
            found = (
                "the transcript is empty"
                if not transcript
                else f"the transcript ends with an item of kind {transcript[-1].kind.value!r}"
            )
            raise InvalidStateError(
                f"cannot {operation}: {found}, so there is nothing for the model to "
                "answer (an assistant tail would be an assistant-prefill request); submit "
                "input and call next()"
            )
        return "after_tool_result" if transcript[-1].kind is ItemKind.TOOL else "after_turn_ended"

    def undecided_calls(self) -> list[RoundCall]:
        """The calls of the round still waiting for an approval answer."""
        turn = self.turn
        if turn is None or turn.round is None:
            return []
        return [call for call in turn.round.calls if call.undecided]

    def require_state(self, operation: str, *allowed: DriverState) -> None:
        """Raise ``InvalidStateError`` naming ``operation`` unless the state is in ``allowed``."""
        if self.state in allowed:
            return
        if self.state is DriverState.AWAITING_APPROVAL:
            ids = ", ".join(call.call.id for call in self.undecided_calls())
            raise InvalidStateError(
                f"cannot {operation} in state AWAITING_APPROVAL: {ids or 'an approval'} is "
                "unresolved; approve() or deny() it first, then call next()"
            )
        if self.state is DriverState.AWAITING_ANSWER:
            raise InvalidStateError(
                f"cannot {operation} in state AWAITING_ANSWER: a running tool call waits "
                "for the answer to its question; answer(), decline() or cancel() the "
                "CallQuestion, then call next()"
            )
        if self.state is DriverState.AWAITING_RESOLUTION:
            raise InvalidStateError(
                f"cannot {operation} in state AWAITING_RESOLUTION: a call left in doubt by "
                "a restore waits for the host; settle(), fail() or run_again() the "
                "CallInDoubt, then call next()"
            )
        raise InvalidStateError(
            f"cannot {operation} in state {self.state}: "
            + (
                "a step is running; wait for next() to return"
                if self.state is DriverState.STEPPING
                else f"an earlier step raised {type(self.failure).__name__}: {self.failure}"
            )
        )


def event_after(step: Step) -> DriverEvent:
    """The event a step's return is (declared with its kind in ``STEP_KINDS``)."""
    return STEP_EVENTS[type(step)]


def take(
    queue: tuple[QueuedMessage, ...], mode: QueueMode
) -> tuple[list[Item], tuple[QueuedMessage, ...]]:
    """The items of the next message (``ONE_AT_A_TIME``) or of all of them, and the
    messages left."""
    count = len(queue) if mode is QueueMode.ALL else 1
    return [item for message in queue[:count] for item in message.items], queue[count:]


def _is_placeholder(result: ToolResultPart) -> bool:
    return result_outcome(result) in (ResultOutcome.BACKGROUND, ResultOutcome.DETACHED)


def _brief(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list) and output and not isinstance(output[0], dict | list | str):
        return f"[{len(output)} parts]"
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)


def _call_ids(items: Sequence[Item]) -> dict[str, None]:
    return dict.fromkeys(call.id for item in items for call in item.tool_calls())


def checked_input(items: Sequence[Item], operation: str = "submit_input") -> tuple[Item, ...]:
    """``items`` as a tuple, refusing anything but Items without tool parts."""
    if isinstance(items, Item):
        raise InvalidInputError(
            f"{operation} expects a sequence of Items, got a single Item; wrap it in a list"
        )
    checked = tuple(items)
    for position, item in enumerate(checked):
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"{operation} expects Items; element {position} is {type(item).__name__}"
            )
        if any(isinstance(part, ToolCallPart | ToolResultPart) for part in item.parts):
            raise InvalidInputError(
                f"{operation}: element {position} holds a tool_call or tool_result part; "
                "only the driver writes those"
            )
    return checked
