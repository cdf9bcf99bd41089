"""Checkpoint documents: the driver's whole state between steps, as JSON.

``capture`` writes a versioned document from a driver's state; ``parse`` reads
one back into a :class:`Restored` value, checking it completely first so a
corrupted or inconsistent document never half-restores (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs

from ..core._cancellation import TurnCancellation
from ..core._errors import CheckpointError, InvalidStateError
from ..core._items import Item, Part, ToolCallPart, ToolResultPart, Usage
from ..model._config import PromptCacheRequest, SessionConfig
from ..store._documents import CHECKPOINT_FORMAT
from ..tools._tool import ToolRequest
from ._checkpoint_checks import check_consistency
from ._core import LoopCore
from ._events import ExecutedToolCall, ModelCallRecord
from ._results import answer
from ._serde import provider_error_document, structure, structure_provider_error, unstructure
from ._state import (
    ANSWERED,
    CallStatus,
    DriverState,
    QueuedMessage,
    RetryPoint,
    RoundCall,
    ToolRound,
    TurnPhase,
    TurnState,
)
from ._steps import ApprovalDecision, ApprovalRequest, Step

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "Restored",
    "RestoredTurn",
    "capture",
    "check_checkpointable",
    "parse",
    "restore_turn",
]

CHECKPOINT_VERSION = 2
"""The newest checkpoint version this agentloop writes and reads.

Version 2 adds ``retry_point`` (a turn that ended because a model call failed),
``session_tool_calls``, and the turn's ``items``, ``tool_calls``,
``model_calls`` and ``final_answer``; version-1 documents restore with none.
"""

TaggedT = TypeVar("TaggedT", ToolCallPart, ToolResultPart, ApprovalRequest)

_RESTING = (DriverState.IDLE, DriverState.AWAITING_APPROVAL, DriverState.AFTER_TOOL_RESULT)


@attrs.frozen(kw_only=True)
class RestoredTurn:
    """The turn in progress, as a checkpoint recorded it."""

    turn_id: str
    model_calls: int
    usage: Usage | None
    paused: bool
    interrupted: bool
    round: ToolRound | None
    items: list[Item] = attrs.field(factory=list)
    tool_calls: list[ExecutedToolCall] = attrs.field(factory=list)
    model_calls_made: list[ModelCallRecord] = attrs.field(factory=list)
    final_answer: bool = False


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
    turn: RestoredTurn | None
    steering: list[QueuedMessage]
    follow_ups: list[QueuedMessage]
    retry_point: RetryPoint | None = None
    session_tool_calls: int = 0


def capture(
    core: LoopCore,
    state: DriverState,
    config: SessionConfig,
    item_document: Callable[[Item], Any] | None = None,
) -> dict[str, Any]:
    """The checkpoint document of ``core``, recorded as ``state`` (checked at rest by the caller).

    Calls still running are written as not started (a restore runs them again,
    or answers them as in doubt when they were recorded as started).
    ``item_document`` turns a transcript item into its document (default: a
    fresh ``unstructure``); a store-bound driver passes a memo, so unchanged
    items keep the same document object from save to save.
    """
    item_document = item_document or unstructure
    turn = core.turn
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "session_id": config.session_id,
        "state": state.value,
        "config": unstructure(config),
        "transcript": [item_document(item) for item in core.transcript],
        "pending_input": [unstructure(item) for item in core.pending_input],
        "turn_counter": core.turn_counter,
        "next_turn_cache": unstructure(core.next_turn_cache),
        "detached": sorted(core.detached),
        "session_usage": unstructure(core.session_usage),
        "turn": None if turn is None else _turn_document(turn),
        "steering": [_message_document(message) for message in core.steering],
        "follow_ups": [_message_document(message) for message in core.follow_ups],
        "retry_point": None if core.retry_point is None else _retry_document(core.retry_point),
        "session_tool_calls": core.session_tool_calls,
    }


def _retry_document(point: RetryPoint) -> dict[str, Any]:
    return {
        "turn_id": point.turn_id,
        "point": point.point,
        "error": provider_error_document(point.error),
    }


def _structure_retry(document: Any) -> RetryPoint | None:
    if document is None:
        return None
    point = str(document["point"])
    if point not in ("after_turn_ended", "after_tool_result"):
        raise CheckpointError(
            f"cannot restore a checkpoint: retry point {point!r} is not a mutation point"
        )
    return RetryPoint(str(document["turn_id"]), point, structure_provider_error(document["error"]))


def check_checkpointable(core: LoopCore) -> None:
    """Raise ``InvalidStateError`` unless ``core`` rests where a checkpoint can be taken."""
    state, failure = core.state, core.failure
    if state in (DriverState.STEPPING, DriverState.FAILED):
        raise InvalidStateError(
            f"cannot checkpoint in state {state}: "
            + (
                "a step is running (a model call streams or a tool executes); "
                "checkpoint between steps"
                if state is DriverState.STEPPING
                else f"an earlier step raised {type(failure).__name__}: {failure}"
            )
        )
    turn = core.turn
    if turn is not None and turn.round is not None:
        running = [c.call.id for c in turn.round.calls if c.status is CallStatus.RUNNING]
        if running:
            raise InvalidStateError(
                f"cannot checkpoint in state {state}: calls {', '.join(running)} are "
                "still executing; answer the pending approval and call next(), then "
                "checkpoint"
            )


def _message_document(message: QueuedMessage) -> dict[str, Any]:
    return {"label": message.label, "items": [unstructure(item) for item in message.items]}


def _structure_message(document: Mapping[str, Any]) -> QueuedMessage:
    label = document["label"]
    if not isinstance(label, str) or not label:
        raise CheckpointError(
            f"cannot restore a checkpoint: a queued message's label must be a non-empty str, "
            f"got {label!r}"
        )
    return QueuedMessage([structure(item, Item) for item in _list(document, "items")], label)


def _turn_document(turn: TurnState) -> dict[str, Any]:
    tool_round = turn.round
    return {
        "turn_id": turn.turn_id,
        "model_calls": turn.model_calls,
        "usage": unstructure(turn.usage),
        "paused": turn.phase is TurnPhase.PAUSED,
        "interrupted": turn.is_cancelled,
        "items": [unstructure(item) for item in turn.items],
        "tool_calls": [unstructure(call) for call in turn.tool_calls],
        "model_calls_made": [unstructure(record) for record in turn.model_call_records],
        "final_answer": turn.final_answer,
        "round": None
        if tool_round is None
        else {
            "calls": [_call_document(call) for call in tool_round.calls],
            "results": [
                {"index": index, "result": unstructure(result)}
                for index, result in sorted(tool_round.results.items())
            ],
        },
    }


# How each call status is written (versions 1 and 2 of the format): a status word and flags.
_DOCUMENT_STATUS: dict[CallStatus, str] = {
    CallStatus.PREPARED: "unstarted",
    CallStatus.RUNNING: "unstarted",  # saved at rest: a restore runs it again or doubts it
    CallStatus.AWAITING_APPROVAL: "awaiting_approval",
    CallStatus.APPROVAL_SHOWN: "awaiting_approval",
    CallStatus.DECIDED: "awaiting_approval",
    **dict.fromkeys(ANSWERED, "done"),
}


def _call_document(call: RoundCall) -> dict[str, Any]:
    return {
        "index": call.index,
        "call": unstructure(call.call),
        "status": _DOCUMENT_STATUS[call.status],
        "approval": unstructure(call.approval),
        # Version 1 kept a "surfaced" flag for good; an approval answered before
        # it was shown is now written as shown (only unanswered ones read it).
        "surfaced": call.approval is not None and call.status is not CallStatus.AWAITING_APPROVAL,
        "decision": unstructure(call.decision),
        "task_id": call.task_id,
        "background": call.status is CallStatus.BACKGROUND,
    }


def _call_status(document: Mapping[str, Any], call_id: str, decided: bool) -> CallStatus:
    """The call status a version-1 document's status word and flags describe."""
    word = document["status"]
    surfaced = _flag(document["surfaced"], "surfaced")
    background = _flag(document["background"], "background")
    if word == "unstarted":
        return CallStatus.PREPARED
    if word == "awaiting_approval":
        if decided:
            return CallStatus.DECIDED
        return CallStatus.APPROVAL_SHOWN if surfaced else CallStatus.AWAITING_APPROVAL
    if word == "done":
        return CallStatus.BACKGROUND if background else CallStatus.ANSWERED
    if word == "running":
        raise CheckpointError(
            f"cannot restore a checkpoint: call {call_id} is marked running; "
            "a checkpoint is only taken while no tool executes"
        )
    raise ValueError(f"{word!r} is not a valid call status")


# -- restoring ----------------------------------------------------------------------


def restore_turn(
    restored: RestoredTurn,
    cancellation: TurnCancellation | None,
    started_calls: frozenset[str],
    driver: Any,
) -> tuple[TurnState, list[RoundCall]]:
    """The live turn for ``restored``, its approvals bound to ``driver``; and the calls
    answered as in doubt (they started before the restore and left no result)."""
    turn = TurnState(
        restored.turn_id,
        cancellation,
        model_calls=restored.model_calls,
        usage=restored.usage,
        round=restored.round,
        phase=TurnPhase.PAUSED if restored.paused else TurnPhase.ACTIVE,
        interrupted=restored.interrupted,
        items=list(restored.items),
        tool_calls=list(restored.tool_calls),
        model_call_records=list(restored.model_calls_made),
        final_answer=restored.final_answer,
    )
    doubted: list[RoundCall] = []
    if turn.round is None:
        return turn, doubted
    for call in turn.round.calls:
        if call.approval is not None:
            call.approval = attrs.evolve(call.approval, driver=driver)
        if call.answered or call.call.id not in started_calls:
            continue
        # At most once: it started before the restart and left no result.
        call.decision = None
        turn.round.results[call.index] = answer(call, CallStatus.IN_DOUBT)
        doubted.append(call)
    return turn, doubted


# -- reading ------------------------------------------------------------------------


def parse(document: Any) -> Restored:
    """Read and check a checkpoint document; raise ``CheckpointError`` on any defect."""
    if not isinstance(document, Mapping):
        raise CheckpointError(
            f"cannot restore a checkpoint: expected a mapping, got {type(document).__name__}"
        )
    _check_header(document)
    try:
        restored = _structure_document(document)
    except CheckpointError:
        raise
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(
            f"cannot restore a checkpoint: the document is malformed ({_describe(error)}); "
            "nothing was restored"
        ) from error
    check_consistency(restored)
    return restored


def _check_header(document: Mapping[str, Any]) -> None:
    found = document.get("format")
    if found != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"cannot restore a checkpoint: format is {found!r}, expected {CHECKPOINT_FORMAT!r}"
        )
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(
            f"cannot restore a checkpoint: version is {version!r}, expected a positive integer"
        )
    if version > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"cannot restore a checkpoint of version {version}: this agentloop reads versions "
            f"up to {CHECKPOINT_VERSION}; upgrade agentloop to restore it"
        )


def _structure_document(document: Mapping[str, Any]) -> Restored:
    config: SessionConfig = structure(document["config"], SessionConfig)
    if document["session_id"] != config.session_id:
        raise CheckpointError(
            f"cannot restore a checkpoint: session_id {document['session_id']!r} does not "
            f"match its config's {config.session_id!r}"
        )
    state = DriverState(document["state"])
    if state not in _RESTING:
        raise CheckpointError(
            f"cannot restore a checkpoint in state {state}: only IDLE, AWAITING_APPROVAL and "
            "AFTER_TOOL_RESULT are checkpointed"
        )
    turn_document = document["turn"]
    version = document["version"]
    retry_point = _structure_retry(document["retry_point"]) if version >= 2 else None
    session_tool_calls = (
        _count(document["session_tool_calls"], "session_tool_calls") if version >= 2 else 0
    )
    return Restored(
        config=config,
        state=state,
        transcript=[structure(item, Item) for item in _list(document, "transcript")],
        pending_input=[structure(item, Item) for item in _list(document, "pending_input")],
        turn_counter=_count(document["turn_counter"], "turn_counter"),
        next_turn_cache=structure(document["next_turn_cache"], PromptCacheRequest | None),
        detached={str(call_id) for call_id in _list(document, "detached")},
        session_usage=structure(document["session_usage"], Usage | None),
        turn=None
        if turn_document is None
        else _structure_turn(turn_document, config.session_id, version),
        steering=[_structure_message(message) for message in _list(document, "steering")],
        follow_ups=[_structure_message(message) for message in _list(document, "follow_ups")],
        retry_point=retry_point,
        session_tool_calls=session_tool_calls,
    )


def _structure_turn(document: Mapping[str, Any], session_id: str, version: int) -> RestoredTurn:
    turn_id = str(document["turn_id"])
    round_document = document["round"]
    tool_round: ToolRound | None = None
    if round_document is not None:
        calls = [
            _structure_call(call, session_id, turn_id) for call in _list(round_document, "calls")
        ]
        results: dict[int, ToolResultPart] = {
            _count(entry["index"], "result index"): _tagged(entry["result"], Part, ToolResultPart)
            for entry in _list(round_document, "results")
        }
        tool_round = ToolRound(calls, results)
    return RestoredTurn(
        turn_id=turn_id,
        model_calls=_count(document["model_calls"], "model_calls"),
        usage=structure(document["usage"], Usage | None),
        paused=_flag(document["paused"], "paused"),
        interrupted=_flag(document["interrupted"], "interrupted"),
        round=tool_round,
        **(_turn_records(document) if version >= 2 else {}),
    )


def _turn_records(document: Mapping[str, Any]) -> dict[str, Any]:
    """The version-2 fields of a turn document."""
    return {
        "items": [structure(item, Item) for item in _list(document, "items")],
        "tool_calls": [structure(call, ExecutedToolCall) for call in _list(document, "tool_calls")],
        "model_calls_made": [
            structure(record, ModelCallRecord) for record in _list(document, "model_calls_made")
        ],
        "final_answer": _flag(document["final_answer"], "final_answer"),
    }


def _structure_call(document: Mapping[str, Any], session_id: str, turn_id: str) -> RoundCall:
    call = _tagged(document["call"], Part, ToolCallPart)
    approval_document = document["approval"]
    approval = (
        None if approval_document is None else _tagged(approval_document, Step, ApprovalRequest)
    )
    decision: ApprovalDecision | None = structure(document["decision"], ApprovalDecision | None)
    return RoundCall(
        _count(document["index"], "call index"),
        call,
        ToolRequest(call.id, call.name, call.input, session_id, turn_id, call.metadata),
        status=_call_status(document, call.id, decided=decision is not None),
        approval=approval,
        decision=decision,
        task_id=document["task_id"],
    )


def _tagged(data: Any, union: Any, cls: type[TaggedT]) -> TaggedT:
    """Structure a member of a tagged union (its document carries a ``type`` tag)."""
    value = structure(data, union)
    if not isinstance(value, cls):
        raise CheckpointError(
            f"cannot restore a checkpoint: expected a {cls.__name__}, found {type(value).__name__}"
        )
    return value


def _list(document: Mapping[str, Any], key: str) -> list[Any]:
    value = document[key]
    if not isinstance(value, list):
        raise CheckpointError(
            f"cannot restore a checkpoint: {key!r} must be a list, got {type(value).__name__}"
        )
    return value


def _count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointError(
            f"cannot restore a checkpoint: {name} must be a non-negative integer, got {value!r}"
        )
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise CheckpointError(
            f"cannot restore a checkpoint: {name} must be a boolean, got {value!r}"
        )
    return value


def _describe(error: BaseException) -> str:
    if isinstance(error, cattrs.BaseValidationError):
        leaves = [f"{type(leaf).__name__}: {leaf}" for leaf in _leaves(error) if str(leaf).strip()]
        return "; ".join(leaves[:3]) or str(error)
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return f"{type(error).__name__}: {error}"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in _leaves(sub)]
    return [error]
