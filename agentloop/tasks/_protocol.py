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
    "TaskCompleted",
    "TaskDetached",
    "TaskDone",
    "TaskEvent",
    "TaskFailed",
    "TaskKind",
    "TaskLaunch",
    "TaskManager",
    "TaskManagerHandle",
    "TaskMovedToBackground",
    "TaskRunning",
    "TaskSnapshot",
    "TaskStarted",
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


@attrs.frozen
class TaskDone:
    """A task finished with ``result``."""

    task_id: str
    result: ToolResultPart


@attrs.frozen
class TaskRunning:
    """A task was started and will report through ``wait_for_turn`` or later."""

    task_id: str
    kind: TaskKind


@attrs.frozen
class TaskMovedToBackground:
    """A foreground task ran past its detach limit and now runs in the background."""

    task_id: str
    call_id: str
    tool_name: str


TurnUpdate: TypeAlias = TaskDone | TaskMovedToBackground


@attrs.frozen
class TaskSnapshot:
    """A task as the handle reports it; ``started_at`` in seconds since the epoch."""

    task_id: str
    call_id: str
    tool_name: str
    kind: TaskKind
    turn_id: str
    started_at: float


@attrs.frozen
class TaskStarted:
    """A task started."""

    task: TaskSnapshot


@attrs.frozen
class TaskCompleted:
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
    """A foreground task moved to the background."""

    task: TaskSnapshot


TaskEvent: TypeAlias = TaskStarted | TaskCompleted | TaskFailed | TaskCancelled | TaskDetached


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

    async def start_task(self, launch: TaskLaunch, turn_id: str) -> TaskDone | TaskRunning:
        """Start (or run) one call."""
        ...

    async def wait_for_turn(self, turn_id: str) -> TurnUpdate | None:
        """The next update for the turn's foreground tasks, or ``None`` when none run."""
        ...

    def take_background_results(self) -> list[TaskDone]:
        """Results of background tasks that finished since the last call."""
        ...

    async def on_turn_interrupted(self, turn_id: str) -> None:
        """Cancel the turn's foreground tasks; background tasks keep running."""
        ...

    def handle(self) -> TaskManagerHandle:
        """The host-side handle."""
        ...
