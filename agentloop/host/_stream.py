"""``stream()``: the events and steps of a run, in order, through a bounded channel.

Observers are synchronous, so the driver cannot wait for a slow consumer in
the middle of a step. A :class:`_Forwarder` observer offers each event to a
bounded anyio memory channel at once (``send_nowait``): while the consumer
keeps up, tokens reach it live. When the channel is full, events wait in a
per-step overflow queue (order is kept: once something waits, later events
queue behind it). After every ``next()`` the producer puts the step behind
them and awaits until the whole queue is in the channel before it calls
``next()`` again. So a slow consumer slows the loop, and at most
``buffer_size`` items plus one step's events are held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, Generic, TypeAlias

import anyio
import attrs
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from typing_extensions import TypeVar

from ..core._delta import AppendText, BeginPart, CommitPart
from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import Item, PartKind
from ..loop._agent import Agent
from ..loop._driver import LoopDriver
from ..loop._events import AgentEvent, ApprovalAnswered, ContentDelta
from ..loop._steps import ApprovalRequest, Step
from ..model._session_config import SessionConfig
from ._run import (
    DEFAULT_MAX_STEPS,
    Approver,
    DriveHooks,
    QuestionAnswerer,
    RunResult,
    TurnRetryPolicy,
    check_max_steps,
    check_retry,
    drive_run,
    prompt_items,
    session_config,
)

__all__ = ["DEFAULT_BUFFER_SIZE", "EventStream", "EventOrStep", "stream"]

DEFAULT_BUFFER_SIZE = 64
"""How many items the channel between the loop and the consumer holds by default."""

EventOrStep: TypeAlias = AgentEvent | Step
"""What a stream yields: every ``AgentEvent`` and every step, in the order they happened."""


class _Forwarder:
    """A synchronous observer that feeds the channel, queueing what does not fit."""

    def __init__(self, send: MemoryObjectSendStream[EventOrStep]) -> None:
        self._send = send
        self._overflow: deque[EventOrStep] = deque()
        self._detached = False
        self.sent = 0
        self.peak_overflow = 0
        self.resolved: set[str] = set()

    def handle_event(self, event: AgentEvent) -> None:
        if isinstance(event, ApprovalAnswered):
            self.resolved.add(event.call_id)
        self.offer(event)

    def offer(self, item: EventOrStep) -> None:
        if self._detached:
            return
        if not self._overflow:
            try:
                self._send.send_nowait(item)
            except anyio.WouldBlock:
                pass
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.detach()
                return
            else:
                self.sent += 1
                return
        self._overflow.append(item)
        self.peak_overflow = max(self.peak_overflow, len(self._overflow))

    async def flush(self) -> None:
        """Wait until every queued item is in the channel (this is the back-pressure)."""
        while self._overflow:
            await self._send.send(self._overflow[0])
            self._overflow.popleft()
            self.sent += 1

    def detach(self) -> None:
        self._detached = True
        self._overflow.clear()


class _StreamHooks(DriveHooks):
    def __init__(self, events: EventStream, forwarder: _Forwarder) -> None:
        self._events = events
        self._forwarder = forwarder

    async def after_step(self, step: Step) -> None:
        self._forwarder.offer(step)
        await self._forwarder.flush()

    async def resolved_by_host(self, request: ApprovalRequest) -> bool:
        # Let the consumer handle every item sent so far (the ApprovalRequest
        # included) first: it may answer the request inline.
        await self._events._caught_up(self._forwarder.sent)
        if request.call_id in self._forwarder.resolved:
            self._forwarder.resolved.discard(request.call_id)
            return True
        return False


OutT = TypeVar("OutT", default=Any)


class EventStream(Generic[OutT]):
    """An async context manager and async iterator over a run's events and steps.

    Use it through :func:`stream`. Leaving the ``async with`` block early
    cancels the run (the driver closes the turn, tool tasks are cancelled);
    an error raised by the run is raised from the iteration (or from
    :meth:`result`, or on leaving the block if neither saw it).
    """

    def __init__(
        self,
        agent: Agent,
        items: tuple[Item, ...],
        *,
        approve: Approver | None,
        max_steps: int,
        config: SessionConfig,
        buffer_size: int,
        retry: TurnRetryPolicy | None = None,
        answer: QuestionAnswerer | None = None,
    ) -> None:
        self._agent = agent
        self._items = items
        self._approve = approve
        self._answer = answer
        self._max_steps = max_steps
        self._config = config
        self._buffer_size = buffer_size
        self._retry = retry
        self._task_group: TaskGroup | None = None
        self._receive: MemoryObjectReceiveStream[EventOrStep] | None = None
        self._driver: LoopDriver | None = None
        self._forwarder: _Forwarder | None = None
        self._result: RunResult[OutT] | None = None
        self._error: Exception | None = None
        self._error_seen = False
        self._requested = 0
        self._wake: anyio.Event | None = None

    @property
    def driver(self) -> LoopDriver | None:
        """The driver of this run, once it started."""
        return self._driver

    @property
    def peak_overflow(self) -> int:
        """The most events ever queued behind the full channel (memory bound check)."""
        return self._forwarder.peak_overflow if self._forwarder is not None else 0

    async def __aenter__(self) -> EventStream[OutT]:
        if self._task_group is not None:
            raise InvalidStateError(
                "cannot enter a stream twice: it was already started; call stream() again"
            )
        send, self._receive = anyio.create_memory_object_stream[EventOrStep](self._buffer_size)
        self._forwarder = _Forwarder(send)
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._produce, send, self._forwarder)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        assert self._receive is not None
        # Cancel the producer (a no-op when it is done) and wait for it. The
        # body's own exception is not handed to the task group, so it
        # propagates as itself rather than inside an ExceptionGroup.
        self._task_group.cancel_scope.cancel()
        try:
            await self._task_group.__aexit__(None, None, None)
        finally:
            self._receive.close()
        if exc is None and self._error is not None and not self._error_seen:
            self._error_seen = True
            raise self._error
        return None

    def __aiter__(self) -> EventStream[OutT]:
        return self

    async def __anext__(self) -> EventOrStep:
        if self._receive is None:
            raise InvalidStateError(
                "cannot iterate a stream outside its block: use "
                "'async with agentloop.stream(...) as events: async for event in events'"
            )
        self._requested += 1
        if self._wake is not None:
            self._wake.set()
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            if self._error is not None:
                self._error_seen = True
                raise self._error from None
            raise StopAsyncIteration from None

    async def text_deltas(self) -> AsyncIterator[str]:
        """The answer's text as it streams: each ``AppendText`` of a text part, in order.

        ``async for text in events.text_deltas(): print(text, end="")``. It
        consumes the stream: the other events and steps are read and skipped
        (reasoning, tool-call arguments, approvals -- answer those with
        ``approve=``); ``await events.result()`` afterwards returns the result.
        """
        text_parts: set[str] = set()
        async for item in self:
            if not isinstance(item, ContentDelta):
                continue
            delta = item.delta
            if isinstance(delta, BeginPart):
                if delta.kind is PartKind.TEXT:
                    text_parts.add(delta.part_id)
            elif isinstance(delta, AppendText):
                if delta.part_id in text_parts:
                    yield delta.text
            elif isinstance(delta, CommitPart):
                text_parts.discard(delta.part_id)

    async def result(self) -> RunResult[OutT]:
        """The run's result; events not consumed yet are read and discarded first."""
        if self._result is None and self._receive is not None:
            async for _item in self:
                pass
        if self._result is None:
            raise InvalidStateError(
                "cannot get the stream's result: the run did not finish (the block was left "
                "early or never entered); await events.result() inside 'async with'"
            )
        return self._result

    async def _caught_up(self, sent: int) -> None:
        """Wait until the consumer has taken ``sent`` items and asks for another."""
        while self._requested <= sent:
            self._wake = anyio.Event()
            await self._wake.wait()
        self._wake = None

    async def _produce(
        self, send: MemoryObjectSendStream[EventOrStep], forwarder: _Forwarder
    ) -> None:
        try:
            agent = attrs.evolve(
                self._agent,
                input=self._agent.input + self._items,
                observers=(*self._agent.observers, forwarder),
            )
            self._driver = await agent.start(self._config)
            self._result = await drive_run(
                self._driver,
                self._agent,
                self._config,
                approve=self._approve,
                answer=self._answer,
                max_steps=self._max_steps,
                hooks=_StreamHooks(self, forwarder),
                retry=self._retry,
            )
        except Exception as error:
            self._error = error
        finally:
            forwarder.detach()
            send.close()


def stream(
    agent: Agent[Any, OutT],
    prompt: str | Sequence[Item],
    *,
    approve: Approver | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    config: SessionConfig | str | None = None,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    retry: TurnRetryPolicy | None = None,
    answer: QuestionAnswerer | None = None,
) -> EventStream[OutT]:
    """Run ``agent`` on ``prompt`` and yield every event and step as it happens.

    ``async with agentloop.stream(agent, "hi") as events: async for item in events``;
    then ``await events.result()``. Approvals: ``approve`` answers them; else
    the consumer may answer the ``ApprovalRequest`` step it receives
    (``item.approve()``) before asking for the next item; else the run stops
    with ``stop_reason="approval_required"``. ``answer`` answers the questions of
    running calls (``CallQuestion``), else the run stops with
    ``stop_reason="question_pending"``. See :func:`~agentloop.run` for
    ``max_steps``, ``config`` and ``retry`` (a failed turn's retries appear in
    the stream as a ``Finished`` step with ``FinishReason.ERROR`` followed by
    the retried turn's events).
    """
    items = prompt_items("stream", prompt)
    check_max_steps("stream", max_steps)
    check_retry("stream", retry)
    if not isinstance(buffer_size, int) or buffer_size < 1:
        raise InvalidInputError(f"stream: buffer_size must be an int >= 1, got {buffer_size!r}")
    return EventStream(
        agent,
        items,
        approve=approve,
        max_steps=max_steps,
        config=session_config(config),
        buffer_size=buffer_size,
        retry=retry,
        answer=answer,
    )
