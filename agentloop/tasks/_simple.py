"""The default task manager: runs each call inline, one after another."""

from __future__ import annotations

from ._contained import run_contained
from ._protocol import (
    TaskEvent,
    TaskLaunch,
    TaskLaunched,
    TaskResult,
    TaskSnapshot,
    TurnUpdate,
)

__all__ = ["SimpleTaskManager"]


class _InertHandle:
    """The handle of a manager that never runs anything in the background."""

    async def next_event(self) -> TaskEvent | None:
        return None

    async def list_running(self) -> list[TaskSnapshot]:
        return []

    async def cancel(self, task_id: str) -> bool:
        return False


class SimpleTaskManager:
    """Runs every call inline, in the model's call order. Task ids are ``task-N``.

    Cancellation still works: the driver runs the call inside the turn's
    cancel scope, so an interrupt aborts the running tool.
    """

    def __init__(self) -> None:
        self._counter = 0
        self._handle = _InertHandle()

    async def start_task(self, launch: TaskLaunch, turn_id: str) -> TaskResult | TaskLaunched:
        """Run the call now and return its result."""
        task_id = launch.task_id
        if task_id is None:
            self._counter += 1
            task_id = f"task-{self._counter}"
        return TaskResult(task_id, await run_contained(launch, task_id))

    async def wait_for_turn(self, turn_id: str) -> TurnUpdate | None:
        """Nothing ever runs after ``start_task`` returns."""
        return None

    def take_background_results(self) -> list[TaskResult]:
        """There are no background tasks."""
        return []

    async def on_turn_interrupted(self, turn_id: str) -> None:
        """Nothing to cancel: the running call is cancelled by the driver's scope."""

    def handle(self) -> _InertHandle:
        """An inert handle: no events, nothing running."""
        return self._handle
