"""The driver's shared state and the transcript bookkeeping every part of it uses.

``DriverBase`` holds what one session is made of and writes the transcript
(the one place items enter it), ends turns, and emits events. The tool-round
and model-call logic build on it (``_rounds.py``, ``_model_calls.py``);
``LoopDriver`` (``_driver.py``) adds the public surface and the state machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio
import attrs
import structlog

from ..core._cancellation import CancellationHandle
from ..core._errors import InvalidInputError
from ..core._items import (
    FinishReason,
    Item,
    ItemKind,
    ResultOutcome,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..model._config import PromptCacheRequest, QueueMode, SessionConfig
from ..model._protocol import ModelSession
from ..permissions._requests import PermissionChecker
from ..store._protocol import SessionStore
from ..tasks._protocol import TaskManager
from ..tools._executor import ToolExecutor, interrupted_result, synthesized_result
from ._checkpoint import RestoredTurn, capture
from ._events import (
    AgentEvent,
    LoopObserver,
    ToolExecutionFinished,
    ToolResultReceived,
    TranscriptObserver,
    TurnFinished,
    TurnResult,
    Warning,
)
from ._mutators import LoopMutator, MutationPoint
from ._state import (
    CallStatus,
    DriverState,
    QueuedMessage,
    RoundCall,
    ToolRound,
    TurnState,
    interrupted_assistant_item,
    interrupted_metadata,
    tool_result_item,
)
from ._steps import (
    Finished,
    Step,
)

__all__ = ["DriverBase", "DriverParts"]

log = structlog.get_logger("agentloop")

_CLEANUP_SECONDS = 5.0


@attrs.frozen
class DriverParts:
    """Everything an ``Agent`` hands a new driver (internal)."""

    config: SessionConfig
    session: ModelSession
    executor: ToolExecutor
    task_manager: TaskManager
    permissions: PermissionChecker
    resources: Any
    cancellation: CancellationHandle | None
    mutators: tuple[LoopMutator, ...]
    observers: tuple[LoopObserver, ...]
    transcript_observers: tuple[TranscriptObserver, ...]
    store: SessionStore | None = None


class DriverBase:
    """State and transcript bookkeeping shared by the driver's parts (internal)."""

    def __init__(
        self, parts: DriverParts, transcript: Sequence[Item], pending: Sequence[Item]
    ) -> None:
        self._config = parts.config
        self._session = parts.session
        self._executor = parts.executor
        self._tasks = parts.task_manager
        self._permissions = parts.permissions
        self._resources = parts.resources
        self._cancellation = parts.cancellation
        self._mutators = parts.mutators
        self._observers = parts.observers
        self._transcript_observers = parts.transcript_observers
        self._store = parts.store
        self._item_documents: dict[int, tuple[Item, Any]] = {}
        self._transcript: list[Item] = list(transcript)
        self._call_ids: set[str] = _call_ids(self._transcript)
        self._pending_input: list[Item] = list(pending)
        self._steering: list[QueuedMessage] = []
        self._follow_ups: list[QueuedMessage] = []
        self._turn: TurnState | None = None
        self._turn_counter = 0
        self._next_turn_cache: PromptCacheRequest | None = None
        self._detached: set[str] = set()
        self._session_usage: Usage | None = None
        self._drained = False
        self._state = DriverState.IDLE
        self._failure: BaseException | None = None

    @property
    def session_id(self) -> str:
        """The session this driver advances."""
        return self._config.session_id

    async def _call_model(self, turn: TurnState, point: MutationPoint) -> Step:
        """Call the model for ``turn`` (implemented in ``_model_calls.py``)."""
        raise NotImplementedError

    # -- turn endings --------------------------------------------------------

    def _finish_turn(
        self,
        turn: TurnState,
        reason: FinishReason,
        items: Sequence[Item],
        metadata: Any = None,
    ) -> Finished:
        result = TurnResult(turn.turn_id, reason, items, turn.usage, metadata or {})
        self._turn = None
        if reason is not FinishReason.CANCELLED and self._follow_ups:
            # The next next() starts the follow-up as a new turn.
            self._pending_input.extend(self._take(self._follow_ups, self._config.follow_up_mode))
        if self._observers:
            self._emit(TurnFinished(result))
        return Finished(result)

    async def _finish_cancelled(self, turn: TurnState, stage: str) -> Finished:
        """Answer every open call of the turn, close it with an interrupted item."""
        tool_round = turn.round
        if tool_round is not None:
            self._append_results(tool_round)
            if any(call.status is CallStatus.RUNNING for call in tool_round.calls):
                with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
                    await self._tasks.on_turn_interrupted(turn.turn_id)
            for call in tool_round.calls:
                if call.status is CallStatus.DONE:
                    continue
                waiting = call.status is CallStatus.AWAITING_APPROVAL
                call.status = CallStatus.DONE
                self._append_result(
                    interrupted_result(self._executor, call.call.id)
                    or synthesized_result(
                        call.call.id,
                        "cancelled: the turn was interrupted before this call "
                        + ("was approved" if waiting else "finished"),
                        ResultOutcome.CANCELLED,
                    )
                )
            turn.round = None
        item = interrupted_assistant_item(stage, time.time())
        self._append(item)
        turn.paused = False
        return self._finish_turn(turn, FinishReason.CANCELLED, (item,), interrupted_metadata(stage))

    # -- transcript ----------------------------------------------------------

    def _fold_pending_input(self) -> None:
        pending, self._pending_input = self._pending_input, []
        now = time.time()
        for item in pending:
            self._append(
                item if item.created_at is not None else attrs.evolve(item, created_at=now)
            )

    def _append(self, item: Item) -> None:
        """The one place items enter the transcript."""
        self._transcript.append(item)
        for part in item.parts:
            if isinstance(part, ToolCallPart):
                self._call_ids.add(part.id)
        for observer in self._transcript_observers:
            try:
                observer.on_item_appended(item)
            except Exception:
                log.exception("transcript observer raised", observer=type(observer).__name__)

    def _append_results(self, tool_round: ToolRound) -> None:
        results = tool_round.results
        for index in sorted(results):
            call = tool_round.calls[index]
            result = results[index]
            if self._observers and call.started_at is not None:
                self._emit(
                    ToolExecutionFinished(
                        call.call.id,
                        call.call.name,
                        time.monotonic() - call.started_at,
                        result.is_error,
                    )
                )
            self._append_result(result)
        results.clear()

    def _append_result(self, result: ToolResultPart, *, background: bool = False) -> None:
        """Append ``result``; a background call's real result becomes a notification."""
        if self._observers:
            self._emit(ToolResultReceived(result))
        now = time.time()
        if (background or result.call_id in self._detached) and not _is_placeholder(result):
            self._detached.discard(result.call_id)
            label = "failed" if result.is_error else "completed"
            text = f"Background tool call {result.call_id} {label}: {_brief(result.output)}"
            self._append(Item(ItemKind.NOTIFICATION, (TextPart(text),), created_at=now))
            return
        self._append(tool_result_item(result, now))

    def _skip(self, call: RoundCall, results: dict[int, ToolResultPart]) -> None:
        call.status = CallStatus.DONE
        call.decision = None
        results[call.index] = synthesized_result(
            call.call.id,
            f"skipped: {self._steering[0].label} sent a new message",
            ResultOutcome.SKIPPED,
        )

    @staticmethod
    def _take(queue: list[QueuedMessage], mode: QueueMode) -> list[Item]:
        taken = queue[:] if mode is QueueMode.ALL else queue[:1]
        del queue[: len(taken)]
        return [item for message in taken for item in message.items]

    # -- persistence ----------------------------------------------------------------

    def _capture(self, state: DriverState, *, for_store: bool = False) -> dict[str, Any]:
        """The checkpoint document of the current state, recorded as ``state``.

        ``for_store`` reuses each unchanged item's document object from the
        last save (the store then skips re-encoding it); documents handed to
        the host are always fresh.
        """
        turn = self._turn
        restored_turn: RestoredTurn | None = None
        if turn is not None:
            restored_turn = RestoredTurn(
                turn_id=turn.turn_id,
                model_calls=turn.model_calls,
                usage=turn.usage,
                paused=turn.paused,
                interrupted=turn.is_cancelled,
                round=_at_rest(turn.round),
            )
        return capture(
            config=self._config,
            state=state,
            transcript=self._transcript,
            pending_input=self._pending_input,
            turn_counter=self._turn_counter,
            next_turn_cache=self._next_turn_cache,
            detached=self._detached,
            session_usage=self._session_usage,
            turn=restored_turn,
            steering=self._steering,
            follow_ups=self._follow_ups,
            item_document=self._memo_item_document() if for_store else None,
        )

    def _memo_item_document(self) -> Callable[[Item], Any]:
        from .._serde import unstructure

        previous = self._item_documents
        current: dict[int, tuple[Item, Any]] = {}
        self._item_documents = current  # only the current transcript's items are kept

        def document(item: Item) -> Any:
            known = previous.get(id(item))
            data = known[1] if known is not None and known[0] is item else unstructure(item)
            current[id(item)] = (item, data)
            return data

        return document

    async def _save(self, state: DriverState) -> None:
        """Save a checkpoint to the store; a storage fault warns instead of losing the step."""
        assert self._store is not None
        try:
            await self._store.save_checkpoint(self.session_id, self._capture(state, for_store=True))
        except Exception as error:
            # The step happened; losing it to a storage fault would be worse.
            # The next save tries again.
            log.exception("saving the checkpoint failed", session_id=self.session_id)
            if self._observers:
                self._emit(Warning(f"checkpoint not saved: {type(error).__name__}: {error}"))

    # -- plumbing ------------------------------------------------------------

    def _cancel_scope(self, turn: TurnState) -> AbstractContextManager[Any]:
        if turn.cancellation is None:
            return nullcontext()
        return turn.cancellation.scope()

    def _emit(self, event: AgentEvent) -> None:
        for observer in self._observers:
            try:
                observer.handle_event(event)
            except Exception:
                log.exception("observer raised", observer=type(observer).__name__)


def _at_rest(tool_round: ToolRound | None) -> ToolRound | None:
    """``tool_round`` with running calls written as not started (for a store's save).

    A restore runs such a call again, or answers it as in doubt when it was
    recorded as started; the public ``checkpoint()`` refuses instead.
    """
    if tool_round is None or all(c.status is not CallStatus.RUNNING for c in tool_round.calls):
        return tool_round
    calls = [
        attrs.evolve(call, status=CallStatus.UNSTARTED, journaled=False)
        if call.status is CallStatus.RUNNING
        else call
        for call in tool_round.calls
    ]
    return ToolRound(calls, dict(tool_round.results))


def _is_placeholder(result: ToolResultPart) -> bool:
    from ..core._items import result_outcome

    return result_outcome(result) in (ResultOutcome.BACKGROUND, ResultOutcome.DETACHED)


def _brief(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list) and output and not isinstance(output[0], dict | list | str):
        return f"[{len(output)} parts]"
    import json

    return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)


def _call_ids(items: Sequence[Item]) -> set[str]:
    return {call.id for item in items for call in item.tool_calls()}


def _checked_input(items: Sequence[Item], operation: str = "submit_input") -> tuple[Item, ...]:
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
