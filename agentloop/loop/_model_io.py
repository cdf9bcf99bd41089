"""Model I/O: the mutator pass before a call, and the call itself.

:meth:`ModelIO.stream` makes one request and reads its stream, and reports
what it came to as a :class:`~agentloop.loop._machine.ModelAnswer`: the
result, a ``ProviderError`` (the adapter's or a broken stream's), a timeout,
or nothing (cancelled). What the answer means is the core's decision.

A driver gets the reader it needs once, when it is made (:func:`model_io_for`):
the plain :class:`ModelIO`; :class:`GuardedModelIO` under the turn's cancel
scope and the request deadline, when the session has a cancellation handle or
a deadline; :class:`ObservedModelIO` telling the observers about the call and
each streamed event, when there are observers. No path checks for the others.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial

import anyio

from ..core._cancellation import CancellationHandle
from ..core._delta import Delta
from ..core._errors import ModelProtocolError, MutatorError, ProviderError
from ..core._items import Item, ToolCallPart, Usage
from ..core._transcript import find_violation
from ..model._protocol import ModelEvent, ModelSession, ModelTurnResult, TurnRequest
from ._driver_parts import CLEANUP_SECONDS, UNGUARDED, cancel_scope
from ._machine import ModelAnswer
from ._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor
from ._observer import NOBODY, Nobody
from ._state import TurnState

__all__ = ["MUTATORS_CANCELLED", "GuardedModelIO", "ModelIO", "ObservedModelIO", "model_io_for"]


class MutatorsCancelled:
    """The turn was cancelled while a mutator ran: the pass is discarded as a whole."""


MUTATORS_CANCELLED = MutatorsCancelled()


class ModelIO:
    """One driver's model effects (see the module docstring): the plain reader, for a
    driver with no cancellation handle, no request deadline and no observers."""

    __slots__ = ("_observer", "_on_event", "_session", "_session_id", "_timeout")

    def __init__(
        self,
        session: ModelSession,
        session_id: str,
        timeout: float | None,
        observer: Nobody,
    ) -> None:
        self._session = session
        self._session_id = session_id
        self._timeout = timeout
        self._observer = observer
        self._on_event: Callable[[ModelEvent], Usage | None] = _read_event
        """Checks one streamed event (and tells the observers, if any); its usage."""

    async def stream(self, turn: TurnState, request: TurnRequest) -> ModelAnswer:
        """Make ``request`` and read its stream to the end (see the module docstring)."""
        started = time.monotonic()
        try:
            # Read here, not in a coroutine of its own: a turn waiting for its model
            # holds one frame less (W3).
            stream = await self._session.begin_turn(request, turn.cancellation)
            on_event = self._on_event
            streamed: Usage | None = None
            result: ModelTurnResult | None = None
            try:
                async for event in stream:
                    if isinstance(event, ModelTurnResult):
                        result = event
                        break
                    streamed = on_event(event) or streamed
            except BaseException:
                await _close_after_fault(stream)
                raise
            if (aclose := getattr(stream, "aclose", None)) is not None:
                await aclose()  # the model's stream (and its HTTP response)
            if result is None:
                raise ModelProtocolError(
                    "model stream ended without a ModelTurnResult: every model "
                    "turn must end with one (check the adapter)"
                )
        except TimeoutError:
            return ModelAnswer(time.monotonic() - started, timed_out=True)
        except ProviderError as error:
            return ModelAnswer(time.monotonic() - started, error=error)
        usage = result.usage if result.usage is not None else streamed
        return ModelAnswer(time.monotonic() - started, result, usage)

    async def run_mutators(
        self,
        turn: TurnState,
        point: MutationPoint,
        mutators: Sequence[LoopMutator],
        transcript: list[Item],
    ) -> Sequence[Item] | MutatorsCancelled | None:
        """Run ``mutators`` over ``transcript``: the checked new transcript if they changed
        it, ``None`` if not, :data:`MUTATORS_CANCELLED` if the turn was cancelled."""
        session_id, observer = self._session_id, self._observer
        cursor = TranscriptCursor(transcript)
        ctx = MutationContext(session_id, turn.turn_id, point, turn.cancellation, observer.emit)
        with cancel_scope(turn):
            for mutator in mutators:
                name = str(getattr(mutator, "name", type(mutator).__name__))
                observer.mutation_started(session_id, turn.turn_id, name, point.value)
                before, was_dirty = cursor.items, cursor.dirty
                try:
                    await mutator.mutate(cursor, ctx)
                except MutatorError:
                    raise
                except Exception as error:
                    raise MutatorError(
                        f"mutator {name!r} failed at {point.value}: {type(error).__name__}: {error}"
                    ) from error
                dirty = cursor.items is not before or (cursor.dirty and not was_dirty)
                observer.mutation_finished(session_id, turn.turn_id, name, point.value, dirty)
            if not cursor.dirty:
                return None
            violation = find_violation(cursor.items)
            if violation is not None:
                raise MutatorError(
                    f"mutator pass at {point.value} broke the transcript: {violation.message}"
                )
            return cursor.items
        return MUTATORS_CANCELLED


class GuardedModelIO(ModelIO):
    """The model I/O of a driver with a cancellation handle or a request deadline: the
    plain reader under the turn's cancel scope and the deadline."""

    __slots__ = ()

    async def stream(self, turn: TurnState, request: TurnRequest) -> ModelAnswer:
        started, timeout = time.monotonic(), self._timeout
        with cancel_scope(turn):
            try:
                with anyio.fail_after(timeout) if timeout is not None else UNGUARDED:
                    return await super().stream(turn, request)
            except TimeoutError:
                return ModelAnswer(time.monotonic() - started, timed_out=True)
        return ModelAnswer(time.monotonic() - started)  # cancelled: no result


class ObservedModelIO(ModelIO):
    """The model I/O of a driver with observers: tells the observers about the call, each
    streamed event and the stream's end."""

    __slots__ = ()

    def __init__(
        self, session: ModelSession, session_id: str, timeout: float | None, observer: Nobody
    ) -> None:
        super().__init__(session, session_id, timeout, observer)
        self._on_event = partial(_on_event, observer)

    async def stream(self, turn: TurnState, request: TurnRequest) -> ModelAnswer:
        observer = self._observer
        # The request is the call counted last; a request made after the limit is
        # the one last call without tools (``on_limit=FINAL_ANSWER``).
        observer.model_call_started(
            turn.turn_id,
            turn.model_calls,
            len(request.transcript),
            len(request.available_tools),
            turn.final_answer,
        )
        answer = await super().stream(turn, request)
        if answer.result is not None:
            observer.stream_ended(answer.result)
        return answer


class _ObservedGuardedModelIO(ObservedModelIO, GuardedModelIO):
    """Observed, under the turn's cancel scope and the request deadline."""

    __slots__ = ()


def model_io_for(
    session: ModelSession,
    session_id: str,
    timeout: float | None,
    observer: Nobody,
    cancellation: CancellationHandle | None,
) -> ModelIO:
    """The model I/O for a driver, chosen once: with observers or without, guarded (a cancellation
    handle or a request deadline) or not."""
    guarded = cancellation is not None or timeout is not None
    told = observer is not NOBODY
    kind = (
        (_ObservedGuardedModelIO if guarded else ObservedModelIO)
        if told
        else (GuardedModelIO if guarded else ModelIO)
    )
    return kind(session, session_id, timeout, observer)


def _read_event(event: ModelEvent) -> Usage | None:
    """Check one streamed event; the usage it carries, if any."""
    if isinstance(event, Delta):
        return None
    if isinstance(event, Usage):
        return event
    if isinstance(event, ToolCallPart):
        return None
    raise ModelProtocolError(
        f"model stream yielded {type(event).__name__}; expected a Delta, ToolCallPart, "
        "Usage or ModelTurnResult"
    )


def _on_event(observer: Nobody, event: ModelEvent) -> Usage | None:
    """Tell observers about one streamed event; the usage it carries, if any."""
    if isinstance(event, Delta):
        observer.content_delta(event)
        return None
    if isinstance(event, Usage):
        observer.usage_updated(event)
        return event
    if isinstance(event, ToolCallPart):
        observer.tool_call_requested(event)
        return None
    raise ModelProtocolError(
        f"model stream yielded {type(event).__name__}; expected a Delta, ToolCallPart, "
        "Usage or ModelTurnResult"
    )


async def _close_after_fault(stream: AsyncIterator[ModelEvent]) -> None:
    """Close the model's stream (and its HTTP response) after a fault: bounded, shielded."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
        await aclose()
