"""Task managers: how tool calls run (inline, concurrently, in the background)."""

from ._async import AsyncTaskManager, AsyncTaskManagerHandle, TaskManagerState
from ._protocol import (
    TaskCancelled,
    TaskCompleted,
    TaskDetached,
    TaskDone,
    TaskEvent,
    TaskFailed,
    TaskKind,
    TaskLaunch,
    TaskManager,
    TaskManagerHandle,
    TaskMovedToBackground,
    TaskRunning,
    TaskSnapshot,
    TaskStarted,
    TurnUpdate,
)
from ._routing import (
    DetachAfter,
    RouteByAnnotation,
    RouteByName,
    Routing,
    RoutingDecision,
    RoutingPolicy,
    SpecCatalog,
)
from ._simple import SimpleTaskManager

__all__ = [
    "AsyncTaskManager",
    "AsyncTaskManagerHandle",
    "DetachAfter",
    "RouteByAnnotation",
    "RouteByName",
    "Routing",
    "RoutingDecision",
    "RoutingPolicy",
    "SimpleTaskManager",
    "SpecCatalog",
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
    "TaskManagerState",
    "TaskMovedToBackground",
    "TaskRunning",
    "TaskSnapshot",
    "TaskStarted",
    "TurnUpdate",
]
