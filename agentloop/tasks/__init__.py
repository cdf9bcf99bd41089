"""Task managers: how tool calls run (inline, concurrently, in the background)."""

from ._async import (
    AsyncSessionTasks,
    AsyncTaskManager,
    AsyncTaskManagerHandle,
    TaskManagerState,
)
from ._protocol import (
    TaskCancelled,
    TaskDetached,
    TaskEvent,
    TaskFailed,
    TaskKind,
    TaskLaunch,
    TaskLaunched,
    TaskManager,
    TaskManagerHandle,
    TaskResult,
    TaskSnapshot,
    TaskStarted,
    TaskSucceeded,
    TurnUpdate,
)
from ._routing import (
    DetachAfter,
    RouteByAnnotation,
    RouteByName,
    Routing,
    RoutingPolicy,
    SpecCatalog,
    TaskRoute,
)
from ._simple import SimpleTaskManager

__all__ = [
    "AsyncSessionTasks",
    "AsyncTaskManager",
    "AsyncTaskManagerHandle",
    "DetachAfter",
    "RouteByAnnotation",
    "RouteByName",
    "Routing",
    "RoutingPolicy",
    "SimpleTaskManager",
    "SpecCatalog",
    "TaskCancelled",
    "TaskDetached",
    "TaskEvent",
    "TaskFailed",
    "TaskKind",
    "TaskLaunch",
    "TaskLaunched",
    "TaskManager",
    "TaskManagerHandle",
    "TaskManagerState",
    "TaskResult",
    "TaskRoute",
    "TaskSnapshot",
    "TaskStarted",
    "TaskSucceeded",
    "TurnUpdate",
]
