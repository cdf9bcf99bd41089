"""Model I/O: the mutator pass before a call, and the call itself.

:meth:`ModelIO.stream` makes one request and reads its stream under the turn's
cancel scope and the request deadline, and reports what it came to as a
:class:`~agentloop.loop._machine.ModelAnswer`: the result, a ``ProviderError``
(the adapter's or a broken stream's), a timeout, or nothing (cancelled). What
the answer means is the core's decision.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

import anyio

from ..core._delta import Delta
from ..core._errors import ModelProtocolError, MutatorError, ProviderError
from ..core._items import Item, ToolCallPart, Usage
from ..core._transcript import find_violation
from ..model._protocol import ModelEvent, ModelSession, ModelTurnResult, TurnRequest
from ._effects import CLEANUP_SECONDS, UNGUARDED, cancel_scope
from ._machine import ModelAnswer
from ._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor
from ._observer import Nobody
from ._state import TurnState

__all__ = ["MUTATORS_CANCELLED", "ModelIO"]


class MutatorsCancelled:
    """The turn was cancelled while a mutator ran: the pass is discarded as a whole."""


MUTATORS_CANCELLED = MutatorsCancelled()


class ModelIO:
    """One driver's model effects (see the module docstring)."""

    __slots__ = ("_observer", "_session", "_session_id", "_timeout")

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

    async def stream(self, turn: TurnState, request: TurnRequest) -> ModelAnswer:
        """Make ``request`` and read its stream to the end (see the module docstring)."""
        started = time.monotonic()
        observer, timeout = self._observer, self._timeout
        try:
            # Read here, not in a coroutine of its own: a turn waiting for its model
            # holds one frame less (W3). Without a cancellation handle or a request
            # timeout both blocks are shared null contexts.
            with cancel_scope(turn):
                try:
                    with anyio.fail_after(timeout) if timeout is not None else UNGUARDED:
                        stream = await self._session.begin_turn(request, turn.cancellation)
                        streamed: Usage | None = None
                        result: ModelTurnResult | None = None
                        try:
                            async for event in stream:
                                if isinstance(event, ModelTurnResult):
                                    result = event
                                    break
                                streamed = _on_event(event, observer) or streamed
                        except BaseException:
                            await _close(stream, shielded=True)
                            raise
                        await _close(stream, shielded=False)
                        if result is None:
                            raise ModelProtocolError(
                                "model stream ended without a ModelTurnResult: every model "
                                "turn must end with one (check the adapter)"
                            )
                        observer.stream_ended(result)
                        usage = result.usage if result.usage is not None else streamed
                        return ModelAnswer(time.monotonic() - started, result, usage)
                except TimeoutError:
                    return ModelAnswer(time.monotonic() - started, timed_out=True)
        except ProviderError as error:
            return ModelAnswer(time.monotonic() - started, error=error)
        return ModelAnswer(time.monotonic() - started)  # cancelled: no result

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


def _on_event(event: ModelEvent, observer: Nobody) -> Usage | None:
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
