"""Task-augmented tool calls (MCP 2025-11-25 ``tasks``): create, poll, fetch, cancel.

A tool whose ``execution.taskSupport`` is ``"required"`` (or ``"optional"``,
when the source prefers tasks) is called with ``params.task``; the server
answers with a task at once, and the call polls ``tasks/get`` (at the
server's ``pollInterval``, bounded) until the task ends, then reads
``tasks/result``. A cancelled call sends ``tasks/cancel``. The 2026-07-28
revision moved tasks into the ``io.modelcontextprotocol/tasks`` extension,
which agentloop does not speak yet: there, such tools run as plain calls
(the server decides) or, when they cannot, are not offered.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types
from mcp import Client
from pydantic import ValidationError

from .._log import get_logger
from ._connection import Connection, describe, is_modern, request
from ._errors import McpCallError, McpConnectionError

__all__ = [
    "TASK_KEY",
    "TASKS_EXTENSION",
    "call_as_task",
    "check_task_timeout",
    "note_tasks",
    "task_plan",
    "tasks_supported",
]

log = get_logger()

TASK_KEY = "mcp.task"
"""ToolSpec metadata (``True``) of a tool called as a task; result metadata of such a
call: ``{"taskId", "status", "statusMessage"}``."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-era extension that carries tasks (not spoken by agentloop yet)."""

_MIN_POLL = 0.05
_MAX_POLL = 5.0
_CANCEL_TIMEOUT = 5.0
_RECONNECTIONS = 3
_TERMINAL = frozenset({"completed", "failed", "cancelled"})


def tasks_supported(client: Client) -> bool:
    """Whether the connection can run tool calls as tasks (2025-11-25 ``tasks`` with
    ``tasks.requests.tools.call`` advertised)."""
    tasks = client.server_capabilities.tasks
    return (
        not is_modern(client)
        and tasks is not None
        and tasks.requests is not None
        and tasks.requests.tools is not None
        and tasks.requests.tools.call is not None
    )


def check_task_timeout(value: object) -> float:
    """``value`` as seconds; ``ValueError`` unless it is a positive finite number."""
    if not (isinstance(value, int | float) and 0 < value < math.inf):
        raise ValueError(f"McpToolSource: task_timeout must be a positive number, got {value!r}")
    return float(value)


def note_tasks(client: Client, server: str) -> None:
    """Log (info) that a 2026-era server offers the tasks extension agentloop does not use."""
    extensions = client.server_capabilities.extensions or {}
    if is_modern(client) and TASKS_EXTENSION in extensions:
        log.info(
            "mcp tasks extension not used",
            server=server,
            reason=f"agentloop does not speak {TASKS_EXTENSION} yet; its tools run as plain "
            "calls, and a tool the server runs only as a task fails its call",
        )


def task_plan(tool: mcp_types.Tool, client: Client | None, prefer: bool) -> tuple[bool, str | None]:
    """``(run as a task, why it is not offered)`` for ``tool`` on this connection."""
    execution = tool.execution
    support = execution.task_support if execution is not None else None
    able = client is not None and tasks_supported(client)
    if support == "required":
        if able:
            return True, None
        if client is not None and is_modern(client):
            return False, (
                "it requires task-augmented execution (execution.taskSupport 'required'); on "
                f"a 2026-era connection that is the {TASKS_EXTENSION} extension, which "
                "agentloop's MCP client does not speak yet"
            )
        return False, (
            "it requires task-augmented execution (execution.taskSupport 'required') and the "
            "server does not advertise tasks.requests.tools.call"
        )
    return support == "optional" and prefer and able, None


Reconnect = Callable[[], Awaitable[Connection]]
"""Gives a usable connection to the same server (the source's, reopened if it was lost)."""


async def call_as_task(
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    *,
    call_timeout: float,
    task_timeout: float,
    reconnect: Reconnect,
) -> tuple[mcp_types.CallToolResult, dict[str, Any]]:
    """Run ``tools/call name`` as a task; its result and the task's last state
    (``TASK_KEY`` metadata). A connection lost while the task runs is reopened
    (``reconnect``) and the same task followed on it. Raises :class:`McpCallError`
    for a task that fails to start, is unknown, is cancelled by the server, ends in
    a malformed state or outlives ``task_timeout`` (it is then cancelled)."""
    server = connection.server
    params = {"name": name, "arguments": arguments, "task": {"ttl": int(task_timeout * 1000)}}
    raw = await request(
        connection, f"tools/call {name!r} (as a task)", call_timeout,
        lambda client: _send_raw(client, "tools/call", params, call_timeout),
    )  # fmt: skip
    if isinstance(raw, dict) and "task" not in raw:  # the server ran it at once
        return _parse(server, f"tools/call {name!r}", mcp_types.CallToolResult, raw), {}
    created = _parse(server, f"tools/call {name!r} (as a task)", mcp_types.CreateTaskResult, raw)
    log.info("mcp task created", server=server, tool=name, task=created.task.task_id)
    run = _TaskRun(connection, reconnect, name, created.task, call_timeout)
    task = await run.follow(task_timeout)
    state = {"taskId": task.task_id, "status": task.status, "statusMessage": task.status_message}
    if task.status == "cancelled":
        raise McpCallError(
            f"MCP server {server!r} cancelled task {task.task_id!r} of tools/call {name!r}"
            + (f": {task.status_message}" if task.status_message else ""),
            server=server,
        )
    # A task waiting for input answers tasks/result once the input is given and it ended.
    limit = call_timeout if task.status in _TERMINAL else task_timeout
    payload = mcp_types.GetTaskPayloadRequest(
        params=mcp_types.GetTaskPayloadRequestParams(task_id=task.task_id)
    )
    result = await run.send("tasks/result", payload, mcp_types.CallToolResult, limit)
    return result, state


class _TaskRun:
    """One task followed to its end, over the connection of the moment."""

    def __init__(
        self,
        connection: Connection,
        reconnect: Reconnect,
        name: str,
        task: mcp_types.Task,
        call_timeout: float,
    ) -> None:
        self.connection = connection
        self.reconnect = reconnect
        self.name = name
        self.task = task
        self.call_timeout = call_timeout
        self.reconnections = 0

    async def send(self, method: str, message: Any, answer: type[Any], limit: float) -> Any:
        """``message`` (a ``tasks/*`` request) answered as ``answer``; a lost connection
        is reopened (at most ``_RECONNECTIONS`` times per task) and the request sent
        again there."""
        operation = f"{method} {self.task.task_id!r}"
        while True:
            try:
                return await request(
                    self.connection, operation, limit,
                    lambda client: client.session.send_request(message, answer),
                )  # fmt: skip
            except McpConnectionError as error:
                if self.reconnections >= _RECONNECTIONS:
                    raise
                self.reconnections += 1
                log.warning(
                    "mcp task connection lost",
                    server=self.connection.server,
                    task=self.task.task_id,
                    error=str(error),
                )
                self.connection = await self.reconnect()

    async def follow(self, task_timeout: float) -> mcp_types.Task:
        """The task once it ended (or needs input), polled within ``task_timeout``;
        sends ``tasks/cancel`` when the time is up or the caller is cancelled."""
        try:
            with anyio.fail_after(task_timeout):
                return await self._wait()
        except TimeoutError:
            await self.cancel()
            raise McpCallError(
                f"MCP server {self.connection.server!r}: task {self.task.task_id!r} of "
                f"tools/call {self.name!r} did not end within task_timeout ({task_timeout:g} s; "
                f"last status {self.task.status!r}); it was cancelled (tasks/cancel): raise the "
                "source's task_timeout for longer tasks",
                server=self.connection.server,
            ) from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self.cancel()
            raise

    async def _wait(self) -> mcp_types.Task:
        """Poll ``tasks/get`` until the task ends (or needs input: ``tasks/result``
        then carries the server's requests)."""
        task = self.task
        asked = mcp_types.GetTaskRequest(
            params=mcp_types.GetTaskRequestParams(task_id=task.task_id)
        )
        while task.status not in _TERMINAL and task.status != "input_required":
            interval = (task.poll_interval or 0) / 1000
            await anyio.sleep(min(max(interval, _MIN_POLL), _MAX_POLL))
            polled = await self.send("tasks/get", asked, mcp_types.GetTaskResult, self.call_timeout)
            if polled.task_id != task.task_id:
                raise McpCallError(
                    f"MCP server {self.connection.server!r} answered tasks/get {task.task_id!r} "
                    f"with task {polled.task_id!r}; expected the same task id",
                    server=self.connection.server,
                )
            if polled.status != task.status:
                log.info(
                    "mcp task status",
                    server=self.connection.server,
                    tool=self.name,
                    task=task.task_id,
                    status=polled.status,
                    message=polled.status_message,
                )
            task = self.task = polled
        return task

    async def cancel(self) -> None:
        """Send ``tasks/cancel`` (bounded); a failure is logged, not raised."""
        task_id = self.task.task_id
        message = mcp_types.CancelTaskRequest(
            params=mcp_types.CancelTaskRequestParams(task_id=task_id)
        )
        try:
            with anyio.fail_after(min(self.call_timeout, _CANCEL_TIMEOUT)):
                await self.send(
                    "tasks/cancel", message, mcp_types.CancelTaskResult, _CANCEL_TIMEOUT
                )
        except Exception as error:
            log.warning(
                "mcp task cancel failed",
                server=self.connection.server,
                task=task_id,
                error=describe(error),
            )


async def _send_raw(client: Client, method: str, params: dict[str, Any], limit: float) -> Any:
    """Send a request whose answer the SDK's typed path would refuse (a ``tools/call``
    answered with a task), through the session's own stamping and dispatcher."""
    session: Any = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    options: dict[str, Any] = {}
    session._stamp(data, options)
    options["timeout"] = limit
    return await session._dispatcher.send_raw_request(method, data.get("params"), options)


def _parse(server: str, operation: str, model: type[Any], raw: Any) -> Any:
    try:
        return model.model_validate(raw, by_name=False)
    except ValidationError as error:
        raise McpCallError(
            f"MCP server {server!r} answered {operation} with a malformed "
            f"{model.__name__}: {describe(error)}",
            server=server,
        ) from None
