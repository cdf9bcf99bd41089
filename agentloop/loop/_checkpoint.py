"""Checkpoint documents: the state core between steps, as JSON.

The document's schema is declared once, as attrs classes mirroring the state
core (:class:`CheckpointDocument`, :class:`TurnDocument`, :class:`RoundDocument`,
:class:`CallDocument`); a converter with strict scalar hooks turns them into
JSON-compatible data and back. ``capture`` unstructures a core; ``parse``
structures a document, rebuilds the live turn, then runs the consistency
checks, so a corrupted or inconsistent document never half-restores (fail
closed). Version 1 documents are upgraded to version 2 before structuring.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..core._cancellation import TurnCancellation
from ..core._converter import configure_core
from ..core._errors import CheckpointError, InvalidStateError, ProviderError
from ..core._items import Item, Part, ToolCallPart, ToolResultPart, Usage
from ..model._config_codec import configure_model
from ..model._session_config import PromptCacheRequest, SessionConfig
from ..tools._tool import ToolRequest
from ._call_results import answer
from ._checkpoint_checks import check_consistency
from ._checkpoint_memo import CaptureMemo
from ._converter import configure_loop, structure, unstructure
from ._events import ExecutedToolCall, ModelCallRecord
from ._state import (
    ANSWERED,
    RESTING,
    CallStatus,
    DriverState,
    QueuedMessage,
    Restored,
    RetryPoint,
    RoundCall,
    ToolRound,
    TurnPhase,
    TurnState,
)
from ._steps import ApprovalAnswer, ApprovalRequest, CallInDoubt, CallQuestion, Step

TaggedT = TypeVar("TaggedT", ToolCallPart, ToolResultPart, ApprovalRequest)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "CheckpointDocument",
    "Restored",
    "capture",
    "check_checkpointable",
    "parse",
    "restore_turn",
]

CHECKPOINT_FORMAT = "agentloop.checkpoint"
"""The ``format`` field of every checkpoint document."""

CHECKPOINT_VERSION = 2
"""The newest checkpoint version this agentloop writes and reads.

Version 2 adds ``retry_point`` (a turn that ended because a model call failed),
``session_tool_calls``, and the turn's ``items``, ``tool_calls``,
``model_calls`` and ``final_answer``; version-1 documents restore with none.
"""

_RETRY_POINTS = ("after_turn_ended", "after_tool_result")


def _count(_instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative integer, got {value!r}")


# -- the schema ----------------------------------------------------------------------

# How each call status is written (versions 1 and 2 of the format): a status word and flags.
_STATUS_WORD: dict[CallStatus, str] = {
    CallStatus.PREPARED: "unstarted",
    CallStatus.RUNNING: "unstarted",  # saved at rest: a restore runs it again or doubts it
    CallStatus.AWAITING_APPROVAL: "awaiting_approval",
    CallStatus.APPROVAL_SHOWN: "awaiting_approval",
    CallStatus.DECIDED: "awaiting_approval",
    **dict.fromkeys(ANSWERED, "done"),
}


class SessionState(Protocol):
    """What a checkpoint is written from: a session's state (``LoopCore`` is one)."""

    @property
    def state(self) -> DriverState: ...
    @property
    def failure(self) -> BaseException | None: ...
    @property
    def transcript(self) -> Sequence[Item]: ...
    @property
    def pending_input(self) -> Sequence[Item]: ...
    @property
    def turn(self) -> TurnState | None: ...
    @property
    def turn_counter(self) -> int: ...
    @property
    def next_turn_cache(self) -> PromptCacheRequest | None: ...
    @property
    def detached(self) -> frozenset[str]: ...
    @property
    def session_usage(self) -> Usage | None: ...
    @property
    def steering(self) -> Sequence[QueuedMessage]: ...
    @property
    def follow_ups(self) -> Sequence[QueuedMessage]: ...
    @property
    def retry_point(self) -> RetryPoint | None: ...
    @property
    def session_tool_calls(self) -> int: ...


@attrs.frozen(kw_only=True)
class CallDocument:
    """One call of the active round: its status as a word plus two flags."""

    index: int = attrs.field(validator=_count)
    call: ToolCallPart
    status: str
    approval: ApprovalRequest | None
    surfaced: bool
    """The approval was shown (only unanswered approvals read it)."""
    decision: ApprovalAnswer | None
    task_id: str | None
    background: bool
    question: CallQuestion | None = None
    """The question it waited on, unanswered (written only when there is one): a
    restore answers the call in doubt (its task is gone with the process)."""
    doubt: CallInDoubt | None = None
    """The host has not resolved it yet after a restore left it in doubt (written only
    then): a restore asks again."""

    @classmethod
    def of(cls, call: RoundCall) -> CallDocument:
        """The document of a live call."""
        return cls(
            index=call.index,
            call=call.call,
            status=_STATUS_WORD[call.status],
            approval=call.approval,
            # Version 1 kept "surfaced" for good; an approval answered before it
            # was shown is written as shown.
            surfaced=call.approval is not None and call.status is not CallStatus.AWAITING_APPROVAL,
            decision=call.decision,
            task_id=call.task_id,
            background=call.status is CallStatus.BACKGROUND,
            # A question answered but not yet acted on is written unanswered: a restore
            # before the rerun claimed it asks it again.
            question=call.question if call.resumed is None else call.resumed[0],
            doubt=call.doubt,
        )

    def live(self, session_id: str, turn_id: str) -> RoundCall:
        """The live call this document describes."""
        call = self.call
        status = self._status(call.id)
        return RoundCall(
            self.index,
            call,
            ToolRequest(call.id, call.name, call.input, session_id, turn_id, call.metadata),
            status=status,
            approval=self.approval,
            decision=self.decision,
            # A call saved while it ran restores as not started: the task that ran it
            # was another process's, and its id may be the next one this process gives.
            task_id=None if status is CallStatus.PREPARED else self.task_id,
            question=self.question,
            doubt=self.doubt,
        )

    def _status(self, call_id: str) -> CallStatus:
        word = self.status
        if word == "unstarted":
            return CallStatus.PREPARED
        if word == "awaiting_approval":
            if self.decision is not None:
                return CallStatus.DECIDED
            return CallStatus.APPROVAL_SHOWN if self.surfaced else CallStatus.AWAITING_APPROVAL
        if word == "done":
            return CallStatus.BACKGROUND if self.background else CallStatus.ANSWERED
        if word == "running":
            raise CheckpointError(
                f"cannot restore a checkpoint: call {call_id} is marked running; "
                "a checkpoint is only taken while no tool executes"
            )
        raise ValueError(f"{word!r} is not a valid call status")


@attrs.frozen(kw_only=True)
class ResultDocument:
    """A result not yet appended, with the index of the call it answers."""

    index: int = attrs.field(validator=_count)
    result: ToolResultPart


@attrs.frozen(kw_only=True)
class RoundDocument:
    """The active tool round."""

    calls: list[CallDocument]
    results: list[ResultDocument]

    @classmethod
    def of(cls, tool_round: ToolRound) -> RoundDocument:
        """The document of a live round."""
        return cls(
            calls=[CallDocument.of(call) for call in tool_round.calls],
            results=[
                ResultDocument(index=index, result=result)
                for index, result in sorted(tool_round.results.items())
            ],
        )

    def live(self, session_id: str, turn_id: str) -> ToolRound:
        """The live round this document describes."""
        results = {entry.index: entry.result for entry in self.results}
        return ToolRound([call.live(session_id, turn_id) for call in self.calls], results)


@attrs.frozen(kw_only=True)
class TurnDocument:
    """The turn in progress."""

    turn_id: str
    model_calls: int = attrs.field(validator=_count)
    usage: Usage | None
    paused: bool
    interrupted: bool
    """An interrupt hit the turn: the next step closes it as cancelled."""
    items: list[Item]
    tool_calls: list[ExecutedToolCall]
    model_calls_made: list[ModelCallRecord]
    final_answer: bool
    round: RoundDocument | None

    @classmethod
    def of(cls, turn: TurnState) -> TurnDocument:
        """The document of a live turn."""
        return cls(
            turn_id=turn.turn_id,
            model_calls=turn.model_calls,
            usage=turn.usage,
            paused=turn.phase is TurnPhase.PAUSED,
            interrupted=turn.is_cancelled,
            items=turn.items,
            tool_calls=turn.tool_calls,
            model_calls_made=turn.model_call_records,
            final_answer=turn.final_answer,
            round=None if turn.round is None else RoundDocument.of(turn.round),
        )

    def live(self, session_id: str) -> TurnState:
        """The live turn (its cancellation is set when it is bound to a driver)."""
        return TurnState(
            self.turn_id,
            TurnCancellation.fired() if self.interrupted else None,
            model_calls=self.model_calls,
            usage=self.usage,
            round=None if self.round is None else self.round.live(session_id, self.turn_id),
            phase=TurnPhase.PAUSED if self.paused else TurnPhase.ACTIVE,
            items=list(self.items),
            tool_calls=list(self.tool_calls),
            model_call_records=list(self.model_calls_made),
            final_answer=self.final_answer,
        )


@attrs.frozen(kw_only=True)
class CheckpointDocument:
    """A whole checkpoint: the header, the session's config and its state core."""

    format: str
    version: int
    session_id: str
    state: DriverState
    config: SessionConfig
    transcript: list[Item]
    pending_input: list[Item]
    turn_counter: int = attrs.field(validator=_count)
    next_turn_cache: PromptCacheRequest | None
    detached: list[str]
    session_usage: Usage | None
    turn: TurnDocument | None
    steering: list[QueuedMessage]
    follow_ups: list[QueuedMessage]
    retry_point: RetryPoint | None
    session_tool_calls: int = attrs.field(validator=_count)

    @classmethod
    def of(
        cls, core: SessionState, state: DriverState, config: SessionConfig
    ) -> CheckpointDocument:
        """The document of ``core`` (its transcript is written by :func:`capture`)."""
        return cls(
            format=CHECKPOINT_FORMAT,
            version=CHECKPOINT_VERSION,
            session_id=config.session_id,
            state=state,
            config=config,
            transcript=[],
            pending_input=list(core.pending_input),
            turn_counter=core.turn_counter,
            next_turn_cache=core.next_turn_cache,
            detached=sorted(core.detached),
            session_usage=core.session_usage,
            turn=None if core.turn is None else TurnDocument.of(core.turn),
            steering=list(core.steering),
            follow_ups=list(core.follow_ups),
            retry_point=core.retry_point,
            session_tool_calls=core.session_tool_calls,
        )


# -- the converter -------------------------------------------------------------------


def _strict(cls: type) -> Callable[[Any, Any], Any]:
    """A structure hook taking only exact ``cls`` values (no ``str(5)``, no ``int(True)``);
    a subclass asked for (a ``StrEnum``, an ``IntEnum``) is built from such a value."""

    accepted = (int, float) if cls is float else (cls,)

    def structure_scalar(value: Any, target: Any) -> Any:
        if type(value) not in accepted:
            raise TypeError(f"expected {cls.__name__}, got {value!r}")
        return value if target is cls and type(value) is cls else target(value)

    return structure_scalar


def _tagged(data: Any, union: Any, cls: type[TaggedT]) -> TaggedT:
    """A member of a tagged union (its document carries a ``type`` tag)."""
    value = structure(data, union)
    if not isinstance(value, cls):
        raise CheckpointError(
            f"cannot restore a checkpoint: expected a {cls.__name__}, found {type(value).__name__}"
        )
    return value


def _structure_message(data: Any, _cls: Any) -> QueuedMessage:
    label = data["label"]
    if type(label) is not str or not label:
        raise CheckpointError(
            f"cannot restore a checkpoint: a queued message's label must be a non-empty str, "
            f"got {label!r}"
        )
    return QueuedMessage(_CONVERTER.structure(data["items"], list[Item]), label)


def _structure_retry(data: Any, _cls: Any) -> RetryPoint:
    point = data["point"]
    if point not in _RETRY_POINTS:
        raise CheckpointError(
            f"cannot restore a checkpoint: retry point {point!r} is not a mutation point"
        )
    error = _CONVERTER.structure(data["error"], ProviderError)
    return RetryPoint(_CONVERTER.structure(data["turn_id"], str), point, error)


def _tagged_hook(union: Any, cls: type[TaggedT]) -> Callable[[Any, Any], TaggedT | None]:
    def structure_member(data: Any, _cls: Any) -> TaggedT | None:
        return None if data is None else _tagged(data, union, cls)

    return structure_member


def configure_strict_scalars(target: cattrs.Converter) -> None:
    """Take only exact ``int``, ``bool`` and ``str`` values (``float`` also takes an ``int``).

    Register before any other layer: hooks generated earlier inline the lax defaults.
    """
    for cls in (int, bool, str, float):
        target.register_structure_hook(cls, _strict(cls))


def configure_checkpoint(target: cattrs.Converter) -> None:
    """Register the checkpoint schema's hooks: tagged calls, results and
    approvals, checked queues and retry points, and the document written without its
    transcript, its config and its turn's lists (:func:`capture` writes them,
    reusing the documents of unchanged values)."""
    target.register_structure_hook(QueuedMessage, _structure_message)
    target.register_structure_hook(RetryPoint, _structure_retry)
    _configure_round(target)
    # Before the document's hook: a generated hook binds its fields' hooks when made.
    target.register_unstructure_hook(
        TurnDocument,
        make_dict_unstructure_fn(
            TurnDocument,
            target,
            _cattrs_omit_if_default=False,
            items=override(omit=True),
            tool_calls=override(omit=True),
            model_calls_made=override(omit=True),
        ),
    )
    target.register_unstructure_hook(
        CheckpointDocument,
        make_dict_unstructure_fn(
            CheckpointDocument,
            target,
            _cattrs_omit_if_default=False,
            config=override(omit=True),
            transcript=override(omit=True),
        ),
    )


def _configure_round(target: cattrs.Converter) -> None:
    """A round's calls and results, each with its union's ``type`` tag."""
    tagged = override(unstruct_hook=unstructure)
    target.register_structure_hook(
        CallDocument,
        make_dict_structure_fn(
            CallDocument,
            target,
            call=override(struct_hook=_tagged_hook(Part, ToolCallPart)),
            approval=override(struct_hook=_tagged_hook(Step, ApprovalRequest)),
            question=override(struct_hook=_tagged_hook(Step, CallQuestion)),
            doubt=override(struct_hook=_tagged_hook(Step, CallInDoubt)),
        ),
    )
    target.register_unstructure_hook(
        CallDocument,
        make_dict_unstructure_fn(
            CallDocument,
            target,
            _cattrs_omit_if_default=False,
            call=tagged,
            approval=tagged,
            question=override(unstruct_hook=unstructure, omit_if_default=True),
            doubt=override(unstruct_hook=unstructure, omit_if_default=True),
        ),
    )
    target.register_structure_hook(
        ResultDocument,
        make_dict_structure_fn(
            ResultDocument,
            target,
            result=override(struct_hook=_tagged_hook(Part, ToolResultPart)),
        ),
    )
    target.register_unstructure_hook(
        ResultDocument,
        make_dict_unstructure_fn(
            ResultDocument, target, _cattrs_omit_if_default=False, result=tagged
        ),
    )


_DOCUMENT_KEYS = tuple(a.name for a in attrs.fields(CheckpointDocument) if a.name != "transcript")
_TURN_KEYS = tuple(a.name for a in attrs.fields(TurnDocument))


def _make_converter() -> cattrs.Converter:
    """The package's layers (core, model, loop) plus the checkpoint's own hooks."""
    target = cattrs.Converter(forbid_extra_keys=True)
    configure_strict_scalars(target)
    configure_core(target)
    configure_model(target)
    configure_loop(target)
    configure_checkpoint(target)
    return target


_CONVERTER = _make_converter()


# -- writing -------------------------------------------------------------------------


def capture(
    core: SessionState,
    state: DriverState,
    config: SessionConfig,
    memo: CaptureMemo | None = None,
) -> dict[str, Any]:
    """The checkpoint document of ``core``, recorded as ``state`` (checked at rest by the caller).

    Calls still running are written as not started (a restore runs them again,
    or answers them as in doubt when they were recorded as started).
    ``memo`` keeps the documents of the last capture: a store-bound driver
    passes its own, so a value unchanged since its last save (a transcript
    item, an item, tool call or model-call record of the turn, the config)
    keeps the same document object and only new values are converted
    (default: a fresh memo, every document is new).
    """
    memo = memo or CaptureMemo()
    written: dict[str, Any] = _CONVERTER.unstructure(CheckpointDocument.of(core, state, config))
    transcript, shared = memo.documents("transcript", core.transcript, _write_item)
    written["config"] = memo.document("config", config, _write_config)
    turn = core.turn
    if turn is not None:
        # The turn's items are the transcript's new items too: the same documents.
        fresh = dict(zip(map(id, core.transcript[shared:]), transcript[shared:], strict=True))

        def write_turn_item(item: Item) -> Any:
            found = fresh.get(id(item))  # the transcript holds the item: its id is its own
            return _write_item(item) if found is None else found

        lists = {
            "items": memo.documents("items", turn.items, write_turn_item)[0],
            "tool_calls": memo.documents("tool_calls", turn.tool_calls, _write_tool_call)[0],
            "model_calls_made": memo.documents(
                "model_calls_made", turn.model_call_records, _write_record
            )[0],
        }
        partial = written["turn"]
        written["turn"] = {key: lists[key] if key in lists else partial[key] for key in _TURN_KEYS}
    document = {key: written[key] for key in _DOCUMENT_KEYS}
    document["transcript"] = transcript
    return document


def _write_item(item: Item) -> Any:
    return _CONVERTER.unstructure(item, Item)


def _write_config(config: SessionConfig) -> Any:
    return _CONVERTER.unstructure(config, SessionConfig)


def _write_tool_call(call: ExecutedToolCall) -> Any:
    return _CONVERTER.unstructure(call, ExecutedToolCall)


def _write_record(record: ModelCallRecord) -> Any:
    return _CONVERTER.unstructure(record, ModelCallRecord)


def check_checkpointable(core: SessionState) -> None:
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
        # A call waiting on its question is written with it (a restore answers it in doubt).
        running = [
            c.call.id
            for c in turn.round.calls
            if c.status is CallStatus.RUNNING and c.question is None
        ]
        if running:
            fix = (
                "answer the pending approval and call next(), then checkpoint"
                if state is DriverState.AWAITING_APPROVAL
                else "call next() until they are, then checkpoint"
            )
            raise InvalidStateError(
                f"cannot checkpoint in state {state}: calls {', '.join(running)} are "
                "still executing or their results are not taken yet; " + fix
            )


# -- reading -------------------------------------------------------------------------


def parse(document: Any) -> Restored:
    """Read and check a checkpoint document; raise ``CheckpointError`` on any defect."""
    if not isinstance(document, Mapping):
        raise CheckpointError(
            f"cannot restore a checkpoint: expected a mapping, got {type(document).__name__}"
        )
    _check_header(document)
    _check_plain_json(document)
    try:
        parsed = _CONVERTER.structure(_upgraded(document), CheckpointDocument)
        restored = _restored(parsed)
    except CheckpointError:
        raise
    except cattrs.BaseValidationError as error:
        # A check inside a hook (a queue's label, a retry point) says what is wrong.
        found = [leaf for leaf in _leaves(error) if isinstance(leaf, CheckpointError)]
        if found:
            raise found[0] from error
        raise CheckpointError(
            f"cannot restore a checkpoint: the document is malformed ({_describe(error)}); "
            "nothing was restored"
        ) from error
    except (KeyError, TypeError, ValueError, AttributeError) as error:
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


def _check_plain_json(document: Mapping[str, Any]) -> None:
    """Refuse what ``driver.checkpoint()`` never writes and no JSON text can hold: NaN or
    infinite numbers (``json.loads`` reads ``NaN``), values of other types, cycles."""
    try:
        json.dumps(document, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise CheckpointError(
            f"cannot restore a checkpoint: it is not plain JSON ({error}); nothing was restored"
        ) from None


def _upgraded(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """A version-1 document as version 2 (the fields version 2 adds, at their defaults)."""
    if document["version"] >= 2:
        return document
    upgraded = {**document, "version": 2, "retry_point": None, "session_tool_calls": 0}
    turn = document["turn"]
    if isinstance(turn, Mapping):
        upgraded["turn"] = {
            **turn,
            "items": [],
            "tool_calls": [],
            "model_calls_made": [],
            "final_answer": False,
        }
    return upgraded


def _restored(document: CheckpointDocument) -> Restored:
    config = document.config
    if document.session_id != config.session_id:
        raise CheckpointError(
            f"cannot restore a checkpoint: session_id {document.session_id!r} does not "
            f"match its config's {config.session_id!r}"
        )
    if document.state not in RESTING:
        raise CheckpointError(
            f"cannot restore a checkpoint in state {document.state}: only "
            f"{', '.join(RESTING)} are checkpointed"
        )
    return Restored(
        config=config,
        state=document.state,
        transcript=document.transcript,
        pending_input=document.pending_input,
        turn_counter=document.turn_counter,
        next_turn_cache=document.next_turn_cache,
        detached=set(document.detached),
        session_usage=document.session_usage,
        turn=None if document.turn is None else document.turn.live(config.session_id),
        steering=document.steering,
        follow_ups=document.follow_ups,
        retry_point=document.retry_point,
        session_tool_calls=document.session_tool_calls,
    )


def restore_turn(
    turn: TurnState,
    cancellation: TurnCancellation | None,
    started_calls: frozenset[str],
    driver: Any,
) -> list[RoundCall]:
    """Bind a restored ``turn`` to ``driver`` (its approvals, its cancellation unless an
    interrupt already hit it); return the calls in doubt (they started before the
    restore and left no result), not yet answered."""
    if turn.cancellation is None:
        turn.cancellation = cancellation
    doubted: list[RoundCall] = []
    if turn.round is None:
        return doubted
    for call in turn.round.calls:
        if call.approval is not None:
            call.approval = attrs.evolve(call.approval, driver=driver)
        question = call.question
        if (
            question is not None
            and question.question.resume is not None
            and f"{call.call.id}#{question.id}" not in started_calls
        ):
            # It can go on from the answer: asked again, run again once answered.
            call.question = attrs.evolve(question, driver=driver)
            continue
        call.question = None  # its task is gone: it waits for nothing any more
        asked, call.doubt = call.doubt is not None, None  # in doubt, unresolved: asked again
        if call.answered or (call.call.id not in started_calls and question is None and not asked):
            continue
        # At most once: it started before the restart and left no result (answered by
        # ``settle_doubted``: reconciled by its tool, else in doubt; never run again).
        call.decision = None
        doubted.append(call)
    return doubted


def answer_in_doubt(turn: TurnState, call: RoundCall) -> None:
    """Answer ``call`` of ``turn``'s round "in doubt"."""
    assert turn.round is not None
    turn.round.results[call.index] = answer(call, CallStatus.IN_DOUBT)


def _describe(error: BaseException) -> str:
    if isinstance(error, cattrs.BaseValidationError):
        leaves = [_leaf(leaf) for leaf in _leaves(error) if str(leaf).strip()]
        return "; ".join(leaves[:3]) or str(error)
    return _leaf(error)


def _leaf(error: BaseException) -> str:
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return f"{type(error).__name__}: {error}"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in _leaves(sub)]
    return [error]
