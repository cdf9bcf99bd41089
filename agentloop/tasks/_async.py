"""``AsyncTaskManager``: concurrent foreground calls, background calls, detach, cancel.

Every task is owned by the manager's anyio task group, so the manager must be
entered (``async with AsyncTaskManager(...) as manager:``) before the driver
starts calls, and leaving the block cancels whatever still runs.

Where a task's result goes (decided when it finishes, never before):

- a **foreground** task's result is queued for its turn and handed to the
  driver by ``wait_for_turn`` (the driver appends results in call order); a
  round's only call (``TaskLaunch.sole``) runs in the caller's task instead and
  ``start_task`` returns its result;
- a **background** task's result (routed there, or detached, or cancelled
  through the handle) is collected by ``take_background_results``;
- a foreground task cancelled by ``on_turn_interrupted`` delivers nothing: the
  driver answers its call with a "cancelled" result itself.

Every task emits ``TaskStarted`` and then exactly one of ``TaskSucceeded``,
``TaskFailed`` (an error result) or ``TaskCancelled``; a detached task also
emits ``TaskDetached`` in between. Waiters re-check state after every change
(one ``anyio.Event`` per change, taken before awaiting), so no wakeup is lost.

One manager may serve many drivers (an ``Agent`` built with it starts every
session on it): ``Agent.start`` gives each driver a view from
:meth:`AsyncTaskManager.for_session`, whose waits and interrupts see only the
tasks that driver started, and whose background results are its session's
(any driver of the session takes them: one resumed from a checkpoint too), so
no session ever receives another's results. The handle sees every task
(``TaskSnapshot.session_id``).

Events are recorded for the handle's reader only: from the first ``handle()``
call on (before it nobody can read them), and at most ``MAX_UNREAD_EVENTS``
unread at a time (the oldest are dropped beyond that, with one warning), so a
manager whose events nobody reads holds none.
"""

from __future__ import annotations

import contextvars
import math
import time
import weakref
from collections import deque
from collections.abc import Iterable
from enum import StrEnum
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import attrs

from .._anyio import PUBLIC_BACKEND, event_loop_backend
from .._log import get_logger
from ..core._errors import InvalidStateError
from ..core._items import ResultOutcome, ToolResultPart
from ..core._synthesized_results import synthesized_result
from ..tools._tool import ToolRequest
from ._contained import run_contained
from ._inline import InContext
from ._protocol import (
    TaskCancelled,
    TaskDetached,
    TaskEvent,
    TaskFailed,
    TaskKind,
    TaskLaunch,
    TaskLaunched,
    TaskResult,
    TaskSnapshot,
    TaskStarted,
    TaskSucceeded,
    TurnUpdate,
)
from ._routing import DetachAfter, Routing, TaskRoute, route_request

__all__ = ["AsyncSessionTasks", "AsyncTaskManager", "AsyncTaskManagerHandle", "TaskManagerState"]

log = get_logger()

MAX_UNREAD_EVENTS = 10_000
"""How many task events a handle's reader may leave unread; older ones are dropped."""


class TaskManagerState(StrEnum):
    """An ``AsyncTaskManager``'s life: entered once, closed once."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


_TRANSITIONS: dict[TaskManagerState, frozenset[TaskManagerState]] = {
    TaskManagerState.NEW: frozenset({TaskManagerState.OPEN}),
    TaskManagerState.OPEN: frozenset({TaskManagerState.CLOSED}),
    TaskManagerState.CLOSED: frozenset(),
}


def _moved(state: TaskManagerState, new: TaskManagerState) -> TaskManagerState:
    if new not in _TRANSITIONS[state]:
        raise InvalidStateError(f"AsyncTaskManager cannot go from {state} to {new}")
    return new


class _CancelReason(StrEnum):
    INTERRUPT = "interrupt"  # the turn was interrupted; the driver answers the call
    HOST = "host"  # handle.cancel(task_id)
    SHUTDOWN = "shutdown"  # the manager's block was left


@attrs.define(eq=False)
class _Task:
    """A running task (internal). ``snapshot.kind`` flips to BACKGROUND on detach."""

    snapshot: TaskSnapshot
    launch: TaskLaunch
    detach_at: float | None  # anyio clock deadline; only while foreground
    owner: object
    """Who started it: a session view (``for_session``), or the manager itself."""
    scope: Any = None
    """What cancels the task: the anyio task handle (its own cancel scope), or a
    ``CancelScope`` of ours where ``start_soon`` returns no handle (anyio < 4.14)."""
    own_scope: bool = False
    cancel_reason: _CancelReason | None = None

    @property
    def foreground(self) -> bool:
        return self.snapshot.kind is TaskKind.FOREGROUND

    def request_cancel(self, reason: _CancelReason) -> bool:
        """Cancel the task for ``reason``; ``False`` if it is being cancelled already."""
        if self.cancel_reason is not None:
            return False
        self.cancel_reason = reason
        self.scope.cancel()
        return True

    def cancelled_result(self) -> ToolResultPart:
        """The "cancelled" result of a task cancelled by the host or the shutdown."""
        snapshot = self.snapshot
        if self.cancel_reason is _CancelReason.HOST:
            why = "the host cancelled it"
        elif self.cancel_reason is _CancelReason.INTERRUPT:  # pragma: no cover - see _run_here
            why = "the turn was interrupted"
        else:
            why = "the task manager shut down"
        return synthesized_result(
            snapshot.call_id,
            f"cancelled: task {snapshot.task_id} ({snapshot.tool_name}) did not finish: {why}",
            ResultOutcome.CANCELLED,
        )

    def detach(self) -> TaskDetached:
        """Move the task to the background (its detach deadline passed)."""
        self.snapshot = attrs.evolve(self.snapshot, kind=TaskKind.BACKGROUND)
        self.detach_at = None
        return TaskDetached(self.snapshot)


def _routed(
    routing: Routing | None, detach_after: float | None, request: ToolRequest
) -> tuple[TaskKind, float | None]:
    """Where ``request``'s task runs, and the anyio clock time a foreground task moves to
    the background (``None``: never)."""
    if routing is None:
        decision: TaskRoute = TaskKind.FOREGROUND
    else:
        decision = route_request(routing, request)
    if decision is TaskKind.BACKGROUND:
        return TaskKind.BACKGROUND, None
    detach = decision.seconds if isinstance(decision, DetachAfter) else detach_after
    return TaskKind.FOREGROUND, None if detach is None else anyio.current_time() + detach


class AsyncTaskManager:
    """Runs tool calls as concurrent tasks in an owned anyio task group.

    ``routing`` (a :class:`~agentloop.RoutingPolicy` or a callable from the
    ``ToolRequest``) picks ``TaskKind.FOREGROUND``, ``TaskKind.BACKGROUND`` or
    ``DetachAfter(seconds)`` per call; without one every call is foreground.
    ``detach_after`` (seconds) moves any foreground call still running after
    that long to the background, unless its route says otherwise. Task ids
    are ``task-N`` unless the driver supplies one.
    """

    __slots__ = (
        "__weakref__",
        "_backend",
        "_background_results",
        "_changed",
        "_counter",
        "_detach_after",
        "_dropped_events",
        "_events",
        "_group",
        "_handle",
        "_routing",
        "_state",
        "_tasks",
        "_turn_results",
    )

    def __init__(self, routing: Routing | None = None, detach_after: float | None = None) -> None:
        if detach_after is not None:
            DetachAfter(detach_after)  # validates
        self._routing = routing
        self._detach_after = detach_after
        self._state = TaskManagerState.NEW
        self._group: anyio.abc.TaskGroup | None = None
        self._counter = 0
        self._tasks: dict[str, _Task] = {}  # running tasks, in start order
        # Per turn, a short list (a deque's empty block alone is ~0.6 KiB).
        self._turn_results: dict[tuple[object, str], list[TaskResult]] = {}
        # By the session that started the task: any driver of it may take them.
        # Made by the first one (most sessions never run a call in the background).
        self._background_results: list[tuple[str, TaskResult]] | None = None
        # Made by the first handle() call: until then nobody can read events.
        self._events: deque[TaskEvent] | None = None
        self._dropped_events = False
        self._changed: anyio.Event | None = None
        # Weak: the handle refers to the manager, so a strong reference back would
        # make every manager a cycle only the garbage collector frees.
        self._handle: weakref.ref[AsyncTaskManagerHandle] | None = None
        self._backend: Any = PUBLIC_BACKEND
        """The event loop's anyio backend, looked up once on entry (see ``_anyio``)."""

    # -- lifecycle -----------------------------------------------------------------

    @property
    def state(self) -> TaskManagerState:
        """``NEW`` until entered, ``OPEN`` inside the ``async with`` block, then ``CLOSED``."""
        return self._state

    async def __aenter__(self) -> AsyncTaskManager:
        if self._state is not TaskManagerState.NEW:
            raise InvalidStateError(
                f"cannot enter AsyncTaskManager in state {self._state.name}: a manager is "
                "entered once; create a new AsyncTaskManager for a new block"
            )
        self._backend = event_loop_backend()
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        self._state = _moved(self._state, TaskManagerState.OPEN)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        group = self._group
        assert group is not None
        self._state = _moved(self._state, TaskManagerState.CLOSED)
        for task in list(self._tasks.values()):
            task.request_cancel(_CancelReason.SHUTDOWN)
        try:
            # The block's own exception is not the group's business: it
            # propagates unwrapped (no ExceptionGroup around a host error).
            await group.__aexit__(None, None, None)
        finally:
            self._group = None
            self._notify()
        return None

    # -- the TaskManager protocol ----------------------------------------------------

    def for_session(self, session_id: str) -> AsyncSessionTasks:
        """A view of this manager for one driver of ``session_id`` (``Agent.start`` takes
        one per driver): its waits, interrupts and background results concern only
        the tasks started through it. Each call makes a new, separate view."""
        return AsyncSessionTasks(self, session_id)

    async def start_task(self, launch: TaskLaunch, turn_id: str) -> TaskResult | TaskLaunched:
        """Route the call and spawn it (``TaskLaunched`` at once); a round's only foreground
        call without a detach limit runs here instead and returns its ``TaskResult``."""
        return await self._start(launch, turn_id, self)

    async def _start(
        self, launch: TaskLaunch, turn_id: str, owner: object
    ) -> TaskResult | TaskLaunched:
        await self._backend.checkpoint_if_cancelled()
        request = launch.request
        if self._state is not TaskManagerState.OPEN or self._group is None:
            raise InvalidStateError(
                f"cannot start a task for call {request.call_id} ({request.tool_name}): "
                f"AsyncTaskManager is in state {self._state.name}, expected OPEN; use it as "
                "`async with AsyncTaskManager(...) as manager:` and run the driver inside"
            )
        if self._routing is None and self._detach_after is None:  # no call per task
            kind, detach_at = TaskKind.FOREGROUND, None
        else:
            kind, detach_at = _routed(self._routing, self._detach_after, request)
        task_id = launch.task_id or self._next_id()
        if task_id in self._tasks:
            raise InvalidStateError(
                f"cannot start task {task_id} for call {request.call_id}: a task with that id "
                f"is still running ({self._tasks[task_id].snapshot.tool_name}); task ids must "
                "be unique among running tasks"
            )
        snapshot = TaskSnapshot(
            task_id,
            request.call_id,
            request.tool_name,
            kind,
            turn_id,
            time.time(),
            request.session_id,
        )
        task = _Task(snapshot, launch, detach_at, owner)
        self._tasks[task_id] = task
        if self._events is not None:  # else nobody can read it: not even built
            self._emit(TaskStarted(snapshot))
        elif (changed := self._changed) is not None:  # _notify(), inline (once per call)
            self._changed = None
            changed.set()
        if launch.sole and detach_at is None and kind is TaskKind.FOREGROUND:
            # The driver would only wait for this call: run it here, in the task
            # awaiting start_task, instead of spawning a task and waiting for it.
            return await self._run_here(task)
        # No await after this point: the driver always learns about a spawned task.
        handle = self._group.start_soon(self._run, task, name=f"agentloop {task_id}")
        if callable(getattr(handle, "cancel", None)):
            task.scope = handle  # cancels the task's own scope: no second one needed
        else:  # pragma: no cover - anyio < 4.14 returns no handle
            task.scope = anyio.CancelScope()
            task.own_scope = True
        return TaskLaunched(task_id, kind)

    async def wait_for_turn(self, turn_id: str) -> TurnUpdate | None:
        """The turn's next finished foreground result or detach, in the order they happened.

        ``None`` once no foreground task of the turn runs and none is queued.
        """
        return await self._wait_for_turn(turn_id, self)

    async def _wait_for_turn(self, turn_id: str, owner: object) -> TurnUpdate | None:
        await self._backend.checkpoint_if_cancelled()
        key = (owner, turn_id)
        while True:
            queued = self._turn_results.get(key)
            if queued:
                update = queued.pop(0)
                if not queued:  # a turn's list lives only while it holds results
                    del self._turn_results[key]
                return update
            running = self._foreground(turn_id, owner)
            if not running:
                self._turn_results.pop(key, None)
                return None
            deadline = math.inf
            now: float | None = None  # read the clock only for a task with a detach limit
            for task in running:
                if task.detach_at is None or task.cancel_reason is not None:
                    continue
                if now is None:
                    now = anyio.current_time()
                if task.detach_at <= now:
                    detached = task.detach()
                    self._emit(detached)
                    return detached
                deadline = min(deadline, task.detach_at)
            changed = self._wait_event()
            if deadline == math.inf:  # no detach limit: no cancel scope to open
                await changed.wait()
                continue
            with anyio.move_on_at(deadline):
                await changed.wait()

    def take_background_results(self) -> list[TaskResult]:
        """Results of background tasks that finished since the last call, in finish order:
        every session's (a driver's view takes only its own session's)."""
        done, self._background_results = self._background_results, None
        return [] if done is None else [result for _, result in done]

    def _take_background_results(self, session_id: str) -> list[TaskResult]:
        results = self._background_results
        if not results:
            return []
        mine = [result for who, result in results if who == session_id]
        if mine:
            others = [(who, result) for who, result in results if who != session_id]
            self._background_results = others or None
        return mine

    async def on_turn_interrupted(self, turn_id: str) -> None:
        """Cancel the turn's foreground tasks and wait until they end; background ones go on.

        Results the turn had not collected yet are dropped: the driver answers
        those calls with "cancelled" results.
        """
        await self._on_turn_interrupted(turn_id, self)

    async def _on_turn_interrupted(self, turn_id: str, owner: object) -> None:
        key = (owner, turn_id)
        self._turn_results.pop(key, None)
        victims = self._foreground(turn_id, owner)
        for task in victims:
            task.request_cancel(_CancelReason.INTERRUPT)
        await self._wait_ended(victims)
        self._turn_results.pop(key, None)

    def _foreground(self, turn_id: str, owner: object) -> list[_Task]:
        """The foreground tasks ``owner`` started for ``turn_id`` still running."""
        return [
            task
            for task in self._tasks.values()
            if task.owner is owner and task.snapshot.turn_id == turn_id and task.foreground
        ]

    def handle(self) -> AsyncTaskManagerHandle:
        """The host-side handle (the same object on every call while the host keeps it).

        Task events are recorded from the first call on: take the handle
        before starting the driver to see every task's events.
        """
        if self._events is None:
            self._events = deque(maxlen=MAX_UNREAD_EVENTS)
        handle = self._handle() if self._handle is not None else None
        if handle is None:
            handle = AsyncTaskManagerHandle(self)
            self._handle = weakref.ref(handle)
        return handle

    # -- running one task ------------------------------------------------------------

    def _next_id(self) -> str:
        while True:
            self._counter += 1
            task_id = f"task-{self._counter}"
            if task_id not in self._tasks:
                return task_id

    async def _run(self, task: _Task) -> None:
        result: ToolResultPart | None = None
        try:
            if task.own_scope:  # pragma: no cover - anyio < 4.14
                with task.scope:
                    result = await run_contained(task.launch, task.snapshot.task_id)
            else:  # the task handle's scope surrounds this coroutine
                result = await run_contained(task.launch, task.snapshot.task_id)
        finally:
            delivered = self._ended(task, result)
            if delivered is not None:
                self._deliver(task, delivered)

    async def _run_here(self, task: _Task) -> TaskResult:
        """Run ``task`` in the caller's task and return its result (the round's only call).

        It runs in a copy of the caller's context (as a task of its own would: the
        context variables it sets stay its own) and in a cancel scope of its own
        (``handle.cancel(task_id)`` and the manager's shutdown cancel only it).
        Cancelled from outside (the driver's turn, or the host cancelling
        ``next()``), it answers nothing: the cancellation propagates and the driver
        answers the call itself, as after ``on_turn_interrupted``.
        """
        scope = task.scope = self._backend.create_cancel_scope()
        task.own_scope = True
        context = contextvars.copy_context()
        result: ToolResultPart | None = None
        try:
            with scope:
                result = await InContext(run_contained(task.launch, task.snapshot.task_id), context)
        except anyio.get_cancelled_exc_class():
            if task.cancel_reason is None:
                task.cancel_reason = _CancelReason.INTERRUPT
            raise
        finally:
            delivered = self._ended(task, result)
        # Nothing is delivered only after the turn's interrupt, which raised above.
        return TaskResult(task.snapshot.task_id, delivered or task.cancelled_result())

    def _ended(self, task: _Task, result: ToolResultPart | None) -> ToolResultPart | None:
        """Record how ``task`` ended (one terminal event); returns what to deliver: its
        result, a "cancelled" result, or nothing (cancelled by the turn's interrupt)."""
        snapshot = task.snapshot
        if self._tasks.get(snapshot.task_id) is task:
            del self._tasks[snapshot.task_id]
        delivered: ToolResultPart | None
        if task.cancel_reason is not None or result is None:
            self._emit(TaskCancelled(snapshot))
            delivered = (
                None if task.cancel_reason is _CancelReason.INTERRUPT else task.cancelled_result()
            )
        else:
            if self._events is not None:
                self._emit(
                    TaskFailed(snapshot, result)
                    if result.is_error
                    else TaskSucceeded(snapshot, result)
                )
            delivered = result
        self._notify()
        return delivered

    def _deliver(self, task: _Task, result: ToolResultPart) -> None:
        done = TaskResult(task.snapshot.task_id, result)
        if task.foreground:
            key = (task.owner, task.snapshot.turn_id)
            queued = self._turn_results.get(key)
            if queued is None:
                queued = self._turn_results[key] = []
            queued.append(done)
        else:
            if self._background_results is None:
                self._background_results = []
            self._background_results.append((task.snapshot.session_id, done))

    async def _wait_ended(self, tasks: Iterable[_Task]) -> None:
        pending = list(tasks)
        while True:
            pending = [t for t in pending if self._tasks.get(t.snapshot.task_id) is t]
            if not pending:
                return
            await self._wait_event().wait()

    # -- change notification and events ------------------------------------------

    def _wait_event(self) -> anyio.Event:
        """The event the next change sets; take it *before* awaiting, after checking state."""
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def _emit(self, event: TaskEvent) -> None:
        events = self._events
        if events is not None:
            if len(events) == MAX_UNREAD_EVENTS and not self._dropped_events:
                self._dropped_events = True
                log.warning(
                    "task events dropped: more than MAX_UNREAD_EVENTS unread; "
                    "read them with handle.next_event()",
                    limit=MAX_UNREAD_EVENTS,
                )
            events.append(event)  # a full deque drops its oldest
        self._notify()


class AsyncSessionTasks:
    """One driver's view of an :class:`AsyncTaskManager` (see ``for_session``).

    Implements the ``TaskManager`` protocol over the shared manager: tasks it
    starts run in the manager's task group; its ``wait_for_turn`` and
    ``on_turn_interrupted`` concern only them, ``take_background_results`` the
    background results of its session (whichever driver of it started them).
    """

    __slots__ = ("_manager", "session_id")

    def __init__(self, manager: AsyncTaskManager, session_id: str) -> None:
        self._manager = manager
        self.session_id = session_id

    async def start_task(self, launch: TaskLaunch, turn_id: str) -> TaskResult | TaskLaunched:
        """Start one call on the shared manager (see ``AsyncTaskManager.start_task``)."""
        return await self._manager._start(launch, turn_id, self)

    async def wait_for_turn(self, turn_id: str) -> TurnUpdate | None:
        """The next update of this view's foreground tasks of the turn; ``None`` when none run."""
        return await self._manager._wait_for_turn(turn_id, self)

    def take_background_results(self) -> list[TaskResult]:
        """Results of this session's background tasks that finished since the last call
        (tasks another driver of the session started too, e.g. before a resume)."""
        return self._manager._take_background_results(self.session_id)

    async def on_turn_interrupted(self, turn_id: str) -> None:
        """Cancel this view's foreground tasks of the turn and wait until they end."""
        await self._manager._on_turn_interrupted(turn_id, self)

    def handle(self) -> AsyncTaskManagerHandle:
        """The shared manager's handle (it sees every session's tasks)."""
        return self._manager.handle()


class AsyncTaskManagerHandle:
    """The host's view of an :class:`AsyncTaskManager` (see ``TaskManagerHandle``)."""

    __slots__ = ("__weakref__", "_manager")

    def __init__(self, manager: AsyncTaskManager) -> None:
        self._manager = manager

    async def next_event(self) -> TaskEvent | None:
        """Wait for the next task event; ``None`` once the manager closed and all are read.

        Events are buffered from the first ``manager.handle()`` call on, up to
        ``MAX_UNREAD_EVENTS`` unread (beyond that the oldest are dropped, with a
        warning logged once).
        """
        manager = self._manager
        while True:
            if manager._events:  # handle() made it
                return manager._events.popleft()
            if manager._state is TaskManagerState.CLOSED and not manager._tasks:
                return None
            await manager._wait_event().wait()

    async def list_running(self) -> list[TaskSnapshot]:
        """Snapshots of the tasks still running, in start order."""
        await anyio.lowlevel.checkpoint()
        return [task.snapshot for task in self._manager._tasks.values()]

    async def cancel(self, task_id: str) -> bool:
        """Cancel a running task and wait until it ended.

        Returns ``False`` (and emits nothing) for an unknown, finished or
        already-cancelling task. A cancelled background task delivers a
        "cancelled" error result through ``take_background_results``; a
        cancelled foreground task answers its call with one.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        manager = self._manager
        task = manager._tasks.get(task_id)
        if task is None or not task.request_cancel(_CancelReason.HOST):
            return False
        await manager._wait_ended([task])
        return True
