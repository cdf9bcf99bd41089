"""The 2026-07-28 tasks extension's wire shapes, and the client extension that speaks it.

``io.modelcontextprotocol/tasks`` (SEP-2663): the client advertises the
extension in its per-request capabilities (the SDK stamps the capabilities
on every 2026-era request, so every ``tools/call`` carries it); a server may
then answer any ``tools/call`` with a ``CreateTaskResult``
(``resultType: "task"``, the task flat in the result), which the client
follows with ``tasks/get`` (the task's state: status, ``inputRequests`` while
``input_required``, the ``result`` or JSON-RPC ``error`` once it ended),
``tasks/update`` (answers to input requests) and ``tasks/cancel``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs
import mcp_types
import pydantic
from mcp.client.extension import (
    ClaimContext,
    ClientExtension,
    NotificationBinding,
    ResultClaim,
)

from ._task_run import TaskWatch
from ._tasks import TASKS_EXTENSION

__all__ = [
    "STATUS_NOTIFICATIONS",
    "DetailedTask",
    "ResumedTask",
    "TaskCreated",
    "TaskHandle",
    "TasksExtension",
]

STATUS_NOTIFICATIONS = ("notifications/tasks/status", "notifications/tasks")
"""A task's status pushed by the server: 2025-11-25's, and the extension's."""

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskHandle(mcp_types.Result):
    """A ``CreateTaskResult``: the server runs the call as a task (``resultType: "task"``)."""

    result_type: Literal["task"]
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class DetailedTask(mcp_types.Result):
    """A ``tasks/get`` answer: the task's state with the fields its status carries."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    input_requests: dict[str, mcp_types.InputRequest] | None = None
    result: dict[str, Any] | None = None
    error: mcp_types.ErrorData | None = None

    @pydantic.model_validator(mode="after")
    def _payload(self) -> DetailedTask:
        wanted = {"input_required": "inputRequests", "completed": "result", "failed": "error"}
        field = wanted.get(self.status)
        if field is not None and getattr(self, _SNAKE[field]) is None:
            raise ValueError(f"a task with status {self.status!r} must carry {field!r}")
        return self


_SNAKE = {"inputRequests": "input_requests", "result": "result", "error": "error"}


class TaskCreated(Exception):
    """Raised through the SDK's ``Client.call_tool`` when the server answered with a
    task, so the source follows it (bounded by its own ``task_timeout``)."""

    def __init__(self, handle: TaskHandle) -> None:
        super().__init__(f"the server created task {handle.task_id!r}")
        self.handle = handle


@attrs.frozen
class ResumedTask:
    """A task-backed call restored after a restart: its task and the input responses
    to deliver (``tasks/update``) before following it again."""

    task_id: str
    responses: dict[str, Any]


async def _created(handle: TaskHandle, context: ClaimContext) -> mcp_types.CallToolResult:
    raise TaskCreated(handle)


class TasksExtension(ClientExtension):
    """The client side of the tasks extension: claims ``resultType: "task"`` on
    ``tools/call`` (2026-era connections only; not advertised on a 2025 handshake) and
    hands task status notifications (either era) to ``watch``."""

    identifier = TASKS_EXTENSION

    def __init__(self, watch: TaskWatch) -> None:
        self.watch = watch

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The task answer of ``tools/call``."""
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=_created),)

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        """Status notifications of both eras (validated by the watch, not here)."""
        return tuple(
            NotificationBinding(method=method, params_type=_Params, handler=self._handler(method))
            for method in STATUS_NOTIFICATIONS
        )

    def _handler(self, method: str) -> Any:
        async def handle(params: _Params) -> None:
            self.watch.notified(method, params.model_dump(by_alias=True))

        return handle


class _Params(pydantic.BaseModel):
    """Any notification params (the watch checks them, so a malformed one is ours to log)."""

    model_config = pydantic.ConfigDict(extra="allow")
