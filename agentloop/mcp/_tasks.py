"""Task-augmented tool calls of the 2025-11-25 ``tasks``, and which tools run as tasks.

A tool whose ``execution.taskSupport`` is ``"required"`` (or ``"optional"``,
when the source prefers tasks) is called with ``params.task`` on a
2025-11-25 connection; the server answers with a task at once, and the call
polls ``tasks/get`` (at the server's ``pollInterval``, bounded, or at once
when a ``notifications/tasks/status`` about it arrives) until the task ends,
then reads ``tasks/result``. A cancelled call sends ``tasks/cancel``. The
2026-07-28 revision's ``io.modelcontextprotocol/tasks`` extension is followed
by the same :class:`~._task_run.TaskRun` (see ``_task_follow``).
"""

from __future__ import annotations

import math
from typing import Any

import mcp_types
from mcp import Client

from .._log import get_logger
from ._connection import Connection, is_modern, request
from ._errors import McpCallError
from ._task_run import TERMINAL, Reconnect, TaskRun, TaskWatch, clip, parse, send_raw

__all__ = [
    "TASKS_EXTENSION",
    "TASK_KEY",
    "call_as_task",
    "check_task_timeout",
    "extension_supported",
    "task_plan",
    "tasks_supported",
]

log = get_logger()

TASK_KEY = "mcp.task"
"""ToolSpec metadata (``True``) of a tool called as a task; result metadata of such a
call: ``{"taskId", "status", "statusMessage"}``."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-era extension that carries tasks (advertised on every 2026-era request)."""
_CANCEL_TIMEOUT = 5.0


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


def extension_supported(client: Client) -> bool:
    """Whether a 2026-era server offers the tasks extension (it may then answer any
    ``tools/call`` with a task; agentloop advertises the extension on every request)."""
    extensions = client.server_capabilities.extensions or {}
    return is_modern(client) and TASKS_EXTENSION in extensions


def check_task_timeout(value: object) -> float:
    """``value`` as seconds; ``ValueError`` unless it is a positive finite number."""
    if not (isinstance(value, int | float) and 0 < value < math.inf):
        raise ValueError(f"McpToolSource: task_timeout must be a positive number, got {value!r}")
    return float(value)


def task_plan(tool: mcp_types.Tool, client: Client | None, prefer: bool) -> tuple[bool, str | None]:
    """``(a task tool, why it is not offered)`` for ``tool`` on this connection: a task
    tool's spec carries ``TASK_KEY``; on a 2025-era connection it is called as a task."""
    execution = tool.execution
    support = execution.task_support if execution is not None else None
    able = client is not None and (tasks_supported(client) or extension_supported(client))
    if support == "required":
        if able:
            return True, None
        if client is not None and is_modern(client):
            return False, (
                "it requires task-augmented execution (execution.taskSupport 'required') and "
                f"the server does not offer the {TASKS_EXTENSION} extension"
            )
        return False, (
            "it requires task-augmented execution (execution.taskSupport 'required') and the "
            "server does not advertise tasks.requests.tools.call"
        )
    return support == "optional" and prefer and able, None


class _LegacyTaskRun(TaskRun):
    """A 2025-11-25 task: ``tasks/get`` until it ends or needs input."""

    def settled(self) -> bool:
        # A task waiting for input answers tasks/result once the input is given and it ended.
        return self.status in TERMINAL or self.status == "input_required"

    async def poll(self) -> None:
        asked = mcp_types.GetTaskRequest(
            params=mcp_types.GetTaskRequestParams(task_id=self.task_id)
        )
        polled = await self.send(
            "tasks/get",
            lambda client: client.session.send_request(asked, mcp_types.GetTaskResult),
            self.call_timeout,
        )
        self.check_id("tasks/get", polled.task_id)
        self.poll_ms = polled.poll_interval
        self.observe(polled.status, polled.status_message)

    async def send_cancel(self) -> None:
        message = mcp_types.CancelTaskRequest(
            params=mcp_types.CancelTaskRequestParams(task_id=self.task_id)
        )
        await self.send(
            "tasks/cancel",
            lambda client: client.session.send_request(message, mcp_types.CancelTaskResult),
            _CANCEL_TIMEOUT,
        )


async def call_as_task(
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    *,
    call_timeout: float,
    task_timeout: float,
    reconnect: Reconnect,
    watch: TaskWatch | None = None,
) -> tuple[mcp_types.CallToolResult, dict[str, Any]]:
    """Run ``tools/call name`` as a 2025-11-25 task; its result and the task's last
    state (``TASK_KEY`` metadata). A connection lost while the task runs is reopened
    (``reconnect``) and the same task followed on it. Raises :class:`McpCallError`
    for a task that fails to start, is unknown, is cancelled by the server, ends in
    a malformed state or outlives ``task_timeout`` (it is then cancelled)."""
    server = connection.server
    params = {"name": name, "arguments": arguments, "task": {"ttl": int(task_timeout * 1000)}}
    raw = await request(
        connection, f"tools/call {name!r} (as a task)", call_timeout,
        lambda client: send_raw(client, "tools/call", params, call_timeout),
    )  # fmt: skip
    if isinstance(raw, dict) and "task" not in raw:  # the server ran it at once
        return parse(server, f"tools/call {name!r}", mcp_types.CallToolResult, raw), {}
    created = parse(server, f"tools/call {name!r} (as a task)", mcp_types.CreateTaskResult, raw)
    log.info("mcp task created", server=server, tool=name, task=created.task.task_id)
    run = _LegacyTaskRun(connection, reconnect, name, created.task.task_id, call_timeout, watch)
    run.poll_ms = created.task.poll_interval
    run.observe(created.task.status, created.task.status_message, via="tools/call")
    await run.follow(task_timeout)
    if run.status == "cancelled":
        raise McpCallError(
            f"MCP server {server!r} cancelled task {run.task_id!r} of tools/call {name!r}"
            + (f": {clip(run.status_message)}" if run.status_message else ""),
            server=server,
        )
    limit = call_timeout if run.status in TERMINAL else task_timeout
    payload = mcp_types.GetTaskPayloadRequest(
        params=mcp_types.GetTaskPayloadRequestParams(task_id=run.task_id)
    )
    result = await run.send(
        "tasks/result",
        lambda client: client.session.send_request(payload, mcp_types.CallToolResult),
        limit,
    )
    return result, run.state
