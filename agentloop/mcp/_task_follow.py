"""Following a 2026-07-28 task (the tasks extension) to its end.

The server answered ``tools/call`` with a task (:class:`TaskHandle`); the
call polls ``tasks/get`` (at the task's ``pollIntervalMs``, bounded) until
the task ends, within the source's ``task_timeout``, reopening a lost
connection and cancelling with ``tasks/cancel`` exactly as a 2025-era task
(:class:`TaskRun`). While the task is ``input_required`` each new entry of
its ``inputRequests`` (an elicitation or sampling request) is asked of the
host as the same ``CallQuestion`` a direct request would be, and the answers
go back with ``tasks/update``. Each question's resume data names the task,
so a driver restored after a restart answers the same task and follows it
again (:class:`ResumedTask`): the task id is durable by design.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp_types

from .._log import get_logger
from ..tools._tool import ToolContext
from ._asking import Asking
from ._connection import Connection, describe
from ._errors import McpCallError, McpError
from ._input_rounds import answer_round
from ._task_run import Reconnect, TaskRun, TaskWatch, clip, parse, send_raw
from ._task_wire import DetailedTask, ResumedTask, TaskHandle

__all__ = ["MAX_INPUT_REQUESTS", "follow_task"]

log = get_logger()

MAX_INPUT_REQUESTS = 50
"""How many input requests one task may make over its life."""

_CANCEL_TIMEOUT = 5.0
_ASKS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling"}


class _ExtensionTaskRun(TaskRun):
    """A task of the tasks extension: ``tasks/get`` until it ends, answering its input
    requests with ``tasks/update`` on the way."""

    def __init__(
        self,
        connection: Connection,
        reconnect: Reconnect,
        name: str,
        task_id: str,
        call_timeout: float,
        watch: TaskWatch | None,
        *,
        asking: Asking,
        arguments: dict[str, Any],
        may_ask: bool,
    ) -> None:
        super().__init__(connection, reconnect, name, task_id, call_timeout, watch)
        self.asking = asking
        self.arguments = arguments
        self.may_ask = may_ask
        self.requests: dict[str, Any] = {}  # outstanding, as of the last poll
        self.answered: set[str] = set()
        self.to_deliver: dict[str, Any] = {}  # answers given before a restart
        self.result: dict[str, Any] | None = None
        self.error: mcp_types.ErrorData | None = None
        self.detailed = False  # the last status came with its payload (from tasks/get)

    def take(self, task: TaskHandle | DetailedTask, method: str, via: str = "poll") -> None:
        """Record a task state the server sent."""
        self.check_id(method, task.task_id)
        self.poll_ms = task.poll_interval_ms
        self.observe(task.status, task.status_message, via=via)
        if isinstance(task, DetailedTask):
            self.requests = dict(task.input_requests or {})
            self.result, self.error = task.result, task.error
            self.detailed = True

    def observe(self, status: str, message: str | None, *, via: str = "poll") -> None:
        super().observe(status, message, via=via)
        self.detailed = False  # a created task or a notification: tasks/get gives the rest

    def settled(self) -> bool:
        # A task created (or said by a notification) to have ended is read with tasks/get.
        return super().settled() and self.detailed

    async def poll(self) -> None:
        raw = await self.send("tasks/get", self._sender("tasks/get", {}), self.call_timeout)
        task = parse(self.connection.server, f"tasks/get {self.task_id!r}", DetailedTask, raw)
        self.take(task, "tasks/get")

    async def act(self) -> None:
        """Deliver answers given before a restart; ask the host each new input request
        and deliver its answers (``tasks/update``)."""
        if self.to_deliver:
            responses, self.to_deliver = self.to_deliver, {}
            await self._update(responses)
        if self.status != "input_required":
            return
        fresh = {key: value for key, value in self.requests.items() if key not in self.answered}
        if not fresh:
            return  # answered already; the server has not caught up yet
        self._check_askable(fresh)
        base = {"tool": self.name, "arguments": self.arguments, "task": self.task_id}
        self.resumable = True  # until answered: cancelled meanwhile, the question resumes it
        responses = await answer_round(self.asking, fresh, base, {})
        self.resumable = False
        await self._update(responses)

    def _check_askable(self, fresh: dict[str, Any]) -> None:
        server = self.connection.server
        if len(self.answered) + len(fresh) > MAX_INPUT_REQUESTS:
            raise McpCallError(
                f"MCP server {server!r}: task {self.task_id!r} of tools/call {self.name!r} made "
                f"more than {MAX_INPUT_REQUESTS} input requests; it was cancelled (tasks/cancel)",
                server=server,
            )
        for request in fresh.values():
            feature = _ASKS.get(request.method)
            if feature is None or (self.may_ask and getattr(self.asking, feature)):
                continue  # roots: respond() says what to do
            raise McpCallError(
                f"MCP server {server!r}: task {self.task_id!r} of tools/call {self.name!r} needs "
                f"input ({request.method}) that this call cannot ask for: give the source "
                f"{feature}=True and run the call in a driver (an entered AsyncTaskManager "
                "answers questions); the task was cancelled (tasks/cancel)",
                server=server,
            )

    async def _update(self, responses: dict[str, Any]) -> None:
        answers = {key: _json(value) for key, value in responses.items()}
        await self.send(
            "tasks/update",
            self._sender("tasks/update", {"inputResponses": answers}),
            self.call_timeout,
        )
        self.answered |= responses.keys()
        log.info(
            "mcp task input given",
            server=self.connection.server,
            task=self.task_id,
            keys=sorted(responses),
        )

    async def send_cancel(self) -> None:
        await self.send("tasks/cancel", self._sender("tasks/cancel", {}), _CANCEL_TIMEOUT)

    def _sender(self, method: str, extra: dict[str, Any]) -> Callable[[Any], Any]:
        params = {"taskId": self.task_id, **extra}
        task_id, limit = self.task_id, self.call_timeout

        def send(client: Any) -> Any:
            return send_raw(client, method, params, limit, task_id)

        return send

    def outcome(self) -> mcp_types.CallToolResult:
        """The tool result of the ended task; :class:`McpCallError` for a failed or
        cancelled one, or a malformed result."""
        server = self.connection.server
        if self.status == "completed":
            operation = f"tasks/get {self.task_id!r} (the task's result)"
            result: mcp_types.CallToolResult = parse(
                server, operation, mcp_types.CallToolResult, self.result
            )
            return result
        said = f": {clip(self.status_message)}" if self.status_message else ""
        if self.status == "failed":
            assert self.error is not None
            raise McpCallError(
                f"MCP server {server!r}: task {self.task_id!r} of tools/call {self.name!r} "
                f"failed with JSON-RPC error {self.error.code}: {clip(self.error.message)}{said}",
                server=server,
            )
        raise McpCallError(
            f"MCP server {server!r} cancelled task {self.task_id!r} of tools/call "
            f"{self.name!r}{said}",
            server=server,
        )


async def follow_task(
    connection: Connection,
    answer: TaskHandle | ResumedTask,
    *,
    name: str,
    arguments: dict[str, Any],
    asking: Asking,
    ctx: ToolContext | None,
    timer: Callable[[anyio.CancelScope], None] | None,
    call_timeout: float,
    task_timeout: float,
    reconnect: Reconnect,
    watch: TaskWatch | None,
) -> tuple[mcp_types.CallToolResult, dict[str, Any]]:
    """Follow the task a ``tools/call`` was answered with (or a restored call's task)
    to its end; its tool result and last state (``TASK_KEY`` metadata). Raises
    :class:`McpCallError` for a task that is unknown, fails, is cancelled by the
    server, is malformed, needs input the call cannot ask for, or outlives
    ``task_timeout`` (the task is then cancelled)."""
    run = _ExtensionTaskRun(
        connection, reconnect, name, answer.task_id, call_timeout, watch,
        asking=asking, arguments=arguments, may_ask=ctx is not None,
    )  # fmt: skip
    if isinstance(answer, TaskHandle):
        log.info("mcp task created", server=connection.server, tool=name, task=answer.task_id)
        run.take(answer, "tools/call", via="tools/call")
    else:
        log.info("mcp task resumed", server=connection.server, tool=name, task=answer.task_id)
        run.to_deliver = answer.responses
    try:
        await run.follow(task_timeout, timer)
    except McpError:
        raise
    except Exception as error:  # never expected: say which task it was
        raise McpCallError(
            f"MCP server {connection.server!r}: following task {run.task_id!r} of tools/call "
            f"{name!r} failed: {describe(error)}",
            server=connection.server,
        ) from error
    return run.outcome(), run.state


def _json(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)
