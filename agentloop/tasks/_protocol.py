"""The task-manager seam: how the driver hands tool calls to be run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from ..core._items import ToolResultPart
from ..tools._tool import ToolRequest

__all__ = [
    "TaskCancelled",
    "TaskDetached",
    "TaskEvent",
    "TaskFailed",
    "TaskResult",
    "TaskKind",
    "TaskLaunch",
    "TaskLaunched",
    "TaskManager",
    "TaskManagerHandle",
    "TaskSnapshot",
    "TaskStarted",
    "TaskSucceeded",
    "TurnUpdate",
]


class TaskKind(StrEnum):
    """Foreground tasks hold their round; background tasks deliver later."""

    FOREGROUND = "foreground"
    BACKGROUND = "background"


@attrs.frozen
class TaskLaunch:
    """A prepared call to run: ``run()`` executes it and returns its one result."""

    request: ToolRequest
    run: Callable[[], Awaitable[ToolResultPart]]
    task_id: str | None = None
    sole: bool = False
    """The round's only call: the driver starts no other call and surfaces nothing
    before it waits for this one, so a manager may run it at once, in the driver's
    task, and return its result from ``start_task`` (a ``TaskResult``) instead of
    running it in a task of its own."""


@attrs.frozen
class TaskResult:
    """A task's one tool result, handed to the driver (from ``start_task``,
    ``wait_for_turn`` or ``take_background_results``).

    The host-facing events of the same moment are :class:`TaskSucceeded` and
    :class:`TaskFailed` (from ``TaskManagerHandle.next_event``), which carry the
    task's :class:`TaskSnapshot` as well."""

    task_id: str
    result: ToolResultPart


@attrs.frozen
class TaskLaunched:
    """A task was started and will report through ``wait_for_turn`` or later."""

    task_id: str
    kind: TaskKind


@attrs.frozen
class TaskSnapshot:
    """A task as the handle reports it; ``started_at`` in seconds since the epoch,
    ``session_id`` the session whose call it runs (its ``ToolRequest``'s)."""

    task_id: str
    call_id: str
    tool_name: str
    kind: TaskKind
    turn_id: str
    started_at: float
    session_id: str = ""


@attrs.frozen
class TaskStarted:
    """A task started."""

    task: TaskSnapshot


@attrs.frozen
class TaskSucceeded:
    """A task finished with a (non-error) result."""

    task: TaskSnapshot
    result: ToolResultPart


@attrs.frozen
class TaskFailed:
    """A task finished with an error result."""

    task: TaskSnapshot
    result: ToolResultPart


@attrs.frozen
class TaskCancelled:
    """A task was cancelled before it finished."""

    task: TaskSnapshot


@attrs.frozen
class TaskDetached:
    """A foreground task ran past its detach limit and now runs in the background.

    Both a turn update (``wait_for_turn``) and a task event (``next_event``).
    """

    task: TaskSnapshot


TurnUpdate: TypeAlias = TaskResult | TaskDetached
"""What ``wait_for_turn`` tells the driver: a foreground task of the turn finished or
moved to the background. The driver's view; the host's is :data:`TaskEvent`."""

TaskEvent: TypeAlias = TaskStarted | TaskSucceeded | TaskFailed | TaskCancelled | TaskDetached
"""What ``TaskManagerHandle.next_event`` tells the host about any task of the manager
(started, succeeded, failed, cancelled, detached). The host's view; the driver's is
:data:`TurnUpdate`."""


@runtime_checkable
class TaskManagerHandle(Protocol):
    """The host's view of a task manager."""

    async def next_event(self) -> TaskEvent | None:
        """The next task event (``None`` if this manager reports none)."""
        ...

    async def list_running(self) -> list[TaskSnapshot]:
        """Tasks still running."""
        ...

    async def cancel(self, task_id: str) -> bool:
        """Cancel a running task; returns whether it was running."""
        ...


@runtime_checkable
class TaskManager(Protocol):
    """Runs tool calls for the driver.

    The driver calls ``start_task`` for each prepared call of a round, then
    ``wait_for_turn`` until it returns ``None`` (no foreground task of the
    turn still running). Results of background tasks are collected with
    ``take_background_results`` between steps.
    """

    async def start_task(self, launch: TaskLaunch, turn_id: str) -> TaskResult | TaskLaunched:
        """Start (or run) one call."""
        ...

    async def wait_for_turn(self, turn_id: str) -> TurnUpdate | None:
        """The next update for the turn's foreground tasks, or ``None`` when none run."""
        ...

    def take_background_results(self) -> list[TaskResult]:
        """Results of background tasks that finished since the last call."""
        ...

    async def on_turn_interrupted(self, turn_id: str) -> None:
        """Cancel the turn's foreground tasks; background tasks keep running."""
        ...

    def handle(self) -> TaskManagerHandle:
        """The host-side handle."""
        ...
