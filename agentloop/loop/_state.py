"""The driver's state machine, as tables: ``DriverState`` x ``DriverEvent`` ->
``TRANSITIONS``, and each call's ``CallStatus`` -> ``CALL_TRANSITIONS``; the
turn, round and call records; and the items the driver writes itself (all
deterministic: no clocks or random ids in text). See ``docs/loop.md``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import attrs

from ..core._cancellation import TurnCancellation
from ..core._errors import InvalidStateError, ProviderError
from ..core._items import Item, ItemKind, TextPart, ToolCallPart, ToolResultPart, Usage
from ..model._session_config import PromptCacheRequest, SessionConfig
from ..tools._questions import QuestionAnswer
from ..tools._tool import ToolRequest
from ._events import ExecutedToolCall, ModelCallRecord
from ._steps import (
    AfterToolResult,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    ChildApprovalRequest,
    Finished,
    Step,
)

__all__ = [
    "ANSWERED",
    "CALL_TRANSITIONS",
    "RESTING",
    "STEP_EVENTS",
    "STEP_KINDS",
    "TRANSITIONS",
    "WAITING_FOR_APPROVAL",
    "CallStatus",
    "DriverEvent",
    "DriverState",
    "next_state",
    "QueuedMessage",
    "Restored",
    "RetryPoint",
    "RoundCall",
    "StepKind",
    "ToolRound",
    "TurnPhase",
    "TurnState",
]

INTERRUPTED_KEY = "agentloop.interrupted"
INTERRUPT_STAGE_KEY = "agentloop.interrupt_stage"
LIMIT_KEY = "agentloop.limit"
NO_MODEL_CALL_KEY = "agentloop.no_model_call"
INTERRUPT_REASON_KEY = "agentloop.interrupt_reason"
ERROR_KIND_KEY = "agentloop.error_kind"
EMPTY_RESPONSE_KEY = "agentloop.empty_response"
FINAL_ANSWER_KEY = "agentloop.final_answer"
INTERRUPTED_TEXT = "Previous assistant response was interrupted by the user before completion."


class DriverState(StrEnum):
    """Where the driver is between (or during) steps."""

    IDLE = "IDLE"
    """No turn is waiting on the host; ``next()`` starts a turn or asks for input."""
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    """A tool round waits for approval answers."""
    AFTER_TOOL_RESULT = "AFTER_TOOL_RESULT"
    """Paused between a tool round and the next model call."""
    AWAITING_ANSWER = "AWAITING_ANSWER"
    """A running call of the round waits for the host's answer to its question."""
    AWAITING_RESOLUTION = "AWAITING_RESOLUTION"
    """A call left in doubt by a restore waits for the host to say what it came to."""
    STEPPING = "STEPPING"
    """Inside ``next()``."""
    FAILED = "FAILED"
    """A step raised; the driver refuses further steps."""


class DriverEvent(StrEnum):
    """What moves the driver from one state to the next (the keys of :data:`TRANSITIONS`)."""

    STEP = "step"
    """``next()`` begins a step."""
    FINISH = "finish"
    """The step ended the turn (``Finished``) or found nothing to do (``AwaitingInput``)."""
    ASK_APPROVAL = "ask_approval"
    """The step returned an ``ApprovalRequest``."""
    ASK_HOST = "ask_host"
    """The step returned a ``CallQuestion``: a running call waits for an answer."""
    ASK_RESOLUTION = "ask_resolution"
    """The step returned a ``CallInDoubt``: a call in doubt waits for the host."""
    PAUSE = "pause"
    """The step returned ``AfterToolResult``: a tool round ended, the model is next."""
    FAIL = "fail"
    """The step raised."""
    RETRY = "retry"
    """``retry()`` begins a step: the failed model call is issued again."""
    CONTINUE = "continue"
    """``continue_turn()`` begins a step: a model call from the transcript as it is."""
    HOST_CANCEL = "host_cancel"
    """The host cancelled the task awaiting ``next()``; the turn was closed as cancelled."""
    RESTORE = "restore"
    """A checkpoint with no turn waiting on the host was restored."""
    RESTORE_APPROVAL = "restore_approval"
    """A checkpoint whose round waits for approval answers was restored."""
    RESTORE_PAUSE = "restore_pause"
    """A checkpoint paused inside a turn (a pause, or a round to finish) was restored."""
    RESTORE_QUESTION = "restore_question"
    """A checkpoint whose round waits for the answer to a question that survives a
    restart (its call can resume from the answer) was restored."""
    RESTORE_IN_DOUBT = "restore_in_doubt"
    """A checkpoint whose round holds a call in doubt for the host to resolve was restored
    (or a restore left one in doubt and the agent asks the host)."""


@attrs.frozen
class StepKind:
    """One kind of step ``next()`` returns, declared once: the tables derive from it.

    ``event`` is what returning it does to the driver (``FINISH``, ``PAUSE``,
    ``ASK_APPROVAL``), ``state`` where the driver rests after it, ``tag`` its
    serialized name, and ``restore`` the event that restores a checkpoint saved
    in that state.
    """

    step: type[Step]
    tag: str
    event: DriverEvent
    state: DriverState
    restore: DriverEvent


STEP_KINDS: tuple[StepKind, ...] = (
    StepKind(Finished, "finished", DriverEvent.FINISH, DriverState.IDLE, DriverEvent.RESTORE),
    StepKind(
        AwaitingInput, "awaiting_input", DriverEvent.FINISH, DriverState.IDLE, DriverEvent.RESTORE
    ),
    StepKind(
        AfterToolResult,
        "after_tool_result",
        DriverEvent.PAUSE,
        DriverState.AFTER_TOOL_RESULT,
        DriverEvent.RESTORE_PAUSE,
    ),
    StepKind(
        ApprovalRequest,
        "approval_request",
        DriverEvent.ASK_APPROVAL,
        DriverState.AWAITING_APPROVAL,
        DriverEvent.RESTORE_APPROVAL,
    ),
    StepKind(
        ChildApprovalRequest,
        "child_approval_request",
        DriverEvent.ASK_HOST,
        DriverState.AWAITING_ANSWER,
        DriverEvent.RESTORE_QUESTION,
    ),
    StepKind(
        CallQuestion,
        "call_question",
        DriverEvent.ASK_HOST,
        DriverState.AWAITING_ANSWER,
        DriverEvent.RESTORE_QUESTION,
    ),
    StepKind(
        CallInDoubt,
        "call_in_doubt",
        DriverEvent.ASK_RESOLUTION,
        DriverState.AWAITING_RESOLUTION,
        DriverEvent.RESTORE_IN_DOUBT,
    ),
)
"""Every step kind (a new kind is one entry here, its class in ``_steps`` and the hosts
that match on ``Step``)."""

RESTING: tuple[DriverState, ...] = tuple(dict.fromkeys(kind.state for kind in STEP_KINDS))
"""The states a driver rests in between steps: the only ones a checkpoint holds."""

STEP_EVENTS: dict[type, DriverEvent] = {kind.step: kind.event for kind in STEP_KINDS}
"""The event returning each step kind is (``event_after``)."""

TRANSITIONS: dict[tuple[DriverState, DriverEvent], DriverState] = {
    **{(state, DriverEvent.STEP): DriverState.STEPPING for state in RESTING},
    (DriverState.IDLE, DriverEvent.RETRY): DriverState.STEPPING,
    (DriverState.IDLE, DriverEvent.CONTINUE): DriverState.STEPPING,
    **{(DriverState.STEPPING, kind.event): kind.state for kind in STEP_KINDS},
    (DriverState.STEPPING, DriverEvent.FAIL): DriverState.FAILED,
    (DriverState.STEPPING, DriverEvent.HOST_CANCEL): DriverState.IDLE,
    **{(DriverState.IDLE, kind.restore): kind.state for kind in STEP_KINDS},
}
"""Every transition the driver makes, keyed by (state, event); any other pair is refused."""


def next_state(state: DriverState, event: DriverEvent) -> DriverState:
    """The state ``event`` leads to from ``state``; raises for a transition not listed."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        allowed = sorted(e.value for (s, e) in TRANSITIONS if s is state)
        raise InvalidStateError(
            f"driver cannot handle event {event.value!r} in state {state}: "
            f"{'allowed there: ' + ', '.join(allowed) if allowed else 'no event is allowed there'}"
        ) from None


class CallStatus(StrEnum):
    """Life of one call in a round: prepared -> (approval) -> running -> answered.

    The answered statuses (:data:`ANSWERED`) are final; :data:`CALL_TRANSITIONS`
    lists every move, :meth:`RoundCall.move` refuses any other.
    """

    PREPARED = "prepared"
    """Not started yet (new, approved, or written as not started by a save)."""
    AWAITING_APPROVAL = "awaiting_approval"
    """A checker wants a human's answer; the host has not been shown it yet."""
    APPROVAL_SHOWN = "approval_shown"
    """Its ``ApprovalRequest`` was returned by ``next()``; no answer yet."""
    DECIDED = "decided"
    """The host answered; the next ``next()`` runs or denies it."""
    RUNNING = "running"
    """Its task executes in the foreground of the turn."""
    ANSWERED = "answered"
    """Has its result (a tool's, or one written by the pipeline or the executor)."""
    BACKGROUND = "background"
    """Started in the background: answered by a placeholder, its result comes later."""
    DETACHED = "detached"
    """Moved to the background while running: answered by a placeholder."""
    SKIPPED = "skipped"
    """Answered "skipped": a steering message arrived first."""
    DENIED = "denied"
    """Answered "denied": the host refused the approval."""
    CANCELLED = "cancelled"
    """Answered "cancelled": an interrupt ended the turn first."""
    IN_DOUBT = "in_doubt"
    """Answered "in doubt": it started before a restore and left no result."""
    RECONCILED = "reconciled"
    """Answered by its tool's ``reconcile``: it started before a restore and left no
    result, and the tool could tell what it came to."""


ANSWERED = frozenset(
    {
        CallStatus.ANSWERED,
        CallStatus.BACKGROUND,
        CallStatus.DETACHED,
        CallStatus.SKIPPED,
        CallStatus.DENIED,
        CallStatus.CANCELLED,
        CallStatus.IN_DOUBT,
        CallStatus.RECONCILED,
    }
)
"""The final call statuses: the call has its one result."""

WAITING_FOR_APPROVAL = frozenset(
    {CallStatus.AWAITING_APPROVAL, CallStatus.APPROVAL_SHOWN, CallStatus.DECIDED}
)
"""The call statuses that hold a round in ``AWAITING_APPROVAL``."""

_S = CallStatus
CALL_TRANSITIONS: dict[CallStatus, frozenset[CallStatus]] = {
    _S.PREPARED: frozenset(
        {
            _S.AWAITING_APPROVAL,
            _S.RUNNING,
            _S.ANSWERED,
            _S.SKIPPED,
            _S.CANCELLED,
            _S.IN_DOUBT,
            _S.RECONCILED,
        }
    ),
    _S.AWAITING_APPROVAL: frozenset(
        {_S.APPROVAL_SHOWN, _S.DECIDED, _S.SKIPPED, _S.CANCELLED, _S.IN_DOUBT, _S.RECONCILED}
    ),
    _S.APPROVAL_SHOWN: frozenset(
        {_S.DECIDED, _S.SKIPPED, _S.CANCELLED, _S.IN_DOUBT, _S.RECONCILED}
    ),
    _S.DECIDED: frozenset({_S.PREPARED, _S.DENIED, _S.CANCELLED, _S.IN_DOUBT, _S.RECONCILED}),
    _S.RUNNING: frozenset({_S.ANSWERED, _S.BACKGROUND, _S.DETACHED, _S.CANCELLED}),
    **{status: frozenset() for status in ANSWERED},
}
"""Every move of a call, from each status; an answered call never moves again."""


def _to_items(items: Any) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class QueuedMessage:
    """A steering or follow-up message waiting for its delivery point."""

    items: tuple[Item, ...] = attrs.field(converter=_to_items)
    label: str = "the user"
    """Who sent it; named in the "skipped" results a steering message causes."""


@attrs.define
class RoundCall:
    """One tool call of the active round (its status changes only through :meth:`move`)."""

    index: int
    call: ToolCallPart
    request: ToolRequest
    status: CallStatus = CallStatus.PREPARED
    approval: ApprovalRequest | None = None
    decision: ApprovalAnswer | None = None
    task_id: str | None = None
    started_at: float | None = None
    """``time.monotonic()`` when it started running."""
    started_wall: float | None = None
    """``time.time()`` when it started running."""
    cancellation: TurnCancellation | None = None
    """The call's own checkpoint (released when it moves to the background)."""
    question: CallQuestion | None = None
    """Its question shown to the host and not answered yet (the call runs, waiting)."""
    resumed: tuple[CallQuestion, QuestionAnswer] | None = None
    """A question asked before a restore and its answer: the call runs again from them."""
    doubt: CallInDoubt | None = None
    """It is in doubt after a restore and waits for the host's resolution."""
    rerun: str | None = None
    """The host chose to run it again after a restore left it in doubt: the claim key."""

    def move(self, status: CallStatus) -> None:
        """Move to ``status``; raises ``InvalidStateError`` for a move not listed."""
        if status not in CALL_TRANSITIONS[self.status]:
            raise InvalidStateError(
                f"call {self.call.id} cannot move from {self.status.value} to {status.value}"
            )
        self.status = status

    @property
    def undecided(self) -> bool:
        """Waiting for an approval answer that has not come."""
        return self.status in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVAL_SHOWN)

    @property
    def answered(self) -> bool:
        """Whether the call has its result."""
        return self.status in ANSWERED


@attrs.define
class ToolRound:
    """The calls of one model response, in the model's order."""

    calls: list[RoundCall]
    results: dict[int, ToolResultPart] = attrs.field(factory=dict)
    """Results not yet appended, by call index (appended in call order)."""

    @property
    def asked_host(self) -> bool:
        """Whether a call of this round waited for an approval (the round then goes
        straight on to the model: the host already spoke, no ``AfterToolResult`` pause)."""
        for call in self.calls:  # noqa: SIM110 (any() over a generator is slower; asked per round)
            if call.approval is not None:
                return True
        return False

    def all_background(self) -> bool:
        """Whether every call of this round went to the background."""
        for call in self.calls:  # noqa: SIM110 (all() over a generator is slower; asked per round)
            if call.status is not CallStatus.BACKGROUND:
                return False
        return True

    def running(self) -> bool:
        """Whether a call of this round is still running in the foreground."""
        for call in self.calls:  # noqa: SIM110 (any() over a generator is slower; asked per round)
            if call.status is CallStatus.RUNNING:
                return True
        return False

    def is_running(self, call_id: str) -> bool:
        """Whether call ``call_id`` of this round is running."""
        call = self.by_id(call_id)
        return call is not None and call.status is CallStatus.RUNNING

    def by_id(self, call_id: str) -> RoundCall | None:
        """The call with ``call_id``."""
        for call in self.calls:
            if call.call.id == call_id:
                return call
        return None


class TurnPhase(StrEnum):
    """Where the turn in progress is."""

    ACTIVE = "active"
    """Calling the model or running a round."""
    PAUSED = "paused"
    """Returned ``AfterToolResult``: the model is called next."""


@attrs.define
class TurnState:
    """The turn in progress."""

    turn_id: str
    cancellation: TurnCancellation | None
    model_calls: int = 0
    usage: Usage | None = None
    round: ToolRound | None = None
    phase: TurnPhase = TurnPhase.ACTIVE
    items: list[Item] = attrs.field(factory=list)
    """Every item the turn appended, in order."""
    tool_calls: list[ExecutedToolCall] = attrs.field(factory=list)
    """Every call of the turn that has its result, in the order they were appended."""
    model_call_records: list[ModelCallRecord] = attrs.field(factory=list)
    """One record per model call that answered or failed."""
    final_answer: bool = False
    """The model-call limit was reached: the next call withholds tools (``on_limit``)."""
    output: Any = None
    """The validated structured output the turn ends with (``agentloop.output``)."""

    @property
    def is_cancelled(self) -> bool:
        """Whether an interrupt hit this turn."""
        return self.cancellation is not None and self.cancellation.is_cancelled

    def add_usage(self, usage: Usage | None) -> None:
        """Add one model call's usage to the turn's total."""
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage


@attrs.frozen
class RetryPoint:
    """Where a turn ended because a model call failed: ``retry()`` calls the model again
    from here. ``point`` is the mutation point of the failed call."""

    turn_id: str
    point: str
    error: ProviderError = attrs.field(eq=False)


_INTERRUPT_REASONS = {
    "model": "interrupted while the model was answering",
    "tool": "interrupted while tool calls were running",
    "mutator": "interrupted while a transcript mutator ran",
    "approval": "interrupted while an approval was pending",
    "pause": "interrupted while paused after a tool round",
    "question": "interrupted while a tool call's question was pending",
    "in_doubt": "interrupted while a call in doubt waited for the host",
    "host": "the host cancelled the task awaiting next()",
}


def interrupted_metadata(stage: str) -> dict[str, Any]:
    """Metadata marking an item or result as written because of an interrupt."""
    return {INTERRUPTED_KEY: True, INTERRUPT_STAGE_KEY: stage}


def interrupted_turn_metadata(stage: str) -> dict[str, Any]:
    """The metadata of a turn an interrupt ended: stage and a stated reason."""
    reason = _INTERRUPT_REASONS.get(stage, f"interrupted at {stage}")
    return {**interrupted_metadata(stage), INTERRUPT_REASON_KEY: reason}


def interrupted_assistant_item(stage: str, created_at: float) -> Item:
    """The assistant item that closes a cancelled turn."""
    metadata = interrupted_metadata(stage)
    return Item(
        ItemKind.ASSISTANT,
        (TextPart(INTERRUPTED_TEXT, metadata=metadata),),
        metadata=metadata,
        created_at=created_at,
    )


def tool_result_item(result: ToolResultPart, created_at: float) -> Item:
    """A tool item holding one result."""
    return Item(ItemKind.TOOL, (result,), created_at=created_at)


@attrs.frozen(kw_only=True)
class Restored:
    """Everything a driver needs to continue where a checkpoint left off."""

    config: SessionConfig
    state: DriverState
    transcript: list[Item]
    pending_input: list[Item]
    turn_counter: int
    next_turn_cache: PromptCacheRequest | None
    detached: set[str]
    session_usage: Usage | None
    turn: TurnState | None
    """The live turn, not yet bound to a driver (see :func:`restore_turn`)."""
    steering: list[QueuedMessage]
    follow_ups: list[QueuedMessage]
    retry_point: RetryPoint | None = None
    session_tool_calls: int = 0
