"""Routing MCP task calls to the task manager's background."""

from __future__ import annotations

from ..tasks._protocol import TaskKind
from ..tasks._routing import DetachAfter, SpecCatalog, TaskRoute
from ..tools._tool import ToolRequest
from ._tasks import TASK_KEY

__all__ = ["RouteMcpTasks"]


class RouteMcpTasks:
    """Routes the calls of MCP tools that run as tasks (their spec's metadata has
    ``mcp.task``) to ``task``, every other call to ``default``.

    ``catalog`` (an ``McpToolSource``, a registry, an executor) is read at
    routing time. With ``AsyncTaskManager(routing=RouteMcpTasks(source))`` a
    task's call runs in the background: the turn goes on, and the result
    arrives as a notification when the task ends.
    """

    def __init__(
        self,
        catalog: SpecCatalog,
        *,
        task: TaskRoute = TaskKind.BACKGROUND,
        default: TaskRoute = TaskKind.FOREGROUND,
    ) -> None:
        for label, value in (("task", task), ("default", default)):
            if not isinstance(value, TaskKind | DetachAfter):
                raise TypeError(
                    f"RouteMcpTasks: {label} must be TaskKind.FOREGROUND, TaskKind.BACKGROUND "
                    f"or DetachAfter(seconds), got {value!r}"
                )
        self.catalog = catalog
        self.task = task
        self.default = default

    def route(self, request: ToolRequest) -> TaskRoute:
        """``task`` for a tool run as an MCP task, else ``default``."""
        for spec in self.catalog.specs():
            if spec.name == request.tool_name:
                return self.task if TASK_KEY in spec.metadata else self.default
        return self.default
