"""Task-augmented tool calls: following a task to its end, and the 2025-11-25 ``tasks``.

A tool whose ``execution.taskSupport`` is ``"required"`` (or ``"optional"``,
when the source prefers tasks) is called with ``params.task`` on a
2025-11-25 connection; the server answers with a task at once, and the call
polls ``tasks/get`` (at the server's ``pollInterval``, bounded, or at once
when a ``notifications/tasks/status`` about it arrives) until the task ends,
then reads ``tasks/result``. A cancelled call sends ``tasks/cancel``. The
2026-07-28 revision's ``io.modelcontextprotocol/tasks`` extension is followed
by the same :class:`TaskRun` (see ``_task_follow``).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types
from mcp import Client
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from pydantic import ValidationError

from .._log import get_logger
from ._connection import Connection, describe, is_modern, request
from ._errors import McpCallError, McpConnectionError, McpError

__all__ = [
    "STATUSES",
    "Reconnect",
    "TASK_KEY",
    "TASKS_EXTENSION",
    "TaskRun",
    "TaskWatch",
    "call_as_task",
    "check_task_timeout",
    "clip",
    "extension_supported",
    "parse",
    "send_raw",
    "task_plan",
    "tasks_supported",
]

log = get_logger()

TASK_KEY = "mcp.task"
"""ToolSpec metadata (``True``) of a tool called as a task; result metadata of such a
call: ``{"taskId", "status", "statusMessage"}``."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-era extension that carries tasks (advertised on every 2026-era request)."""
STATUSES = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
"""The task statuses both revisions define."""

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


Reconnect = Callable[[], Awaitable[Connection]]
"""Gives a usable connection to the same server (the source's, reopened if it was lost)."""


class TaskWatch:
    """The tasks a source follows, so a status notification about one wakes its poll.

    ``notifications/tasks/status`` (2025-11-25) and ``notifications/tasks``
    (2026-07-28) carry the task's state; one about a task nobody follows is
    ignored (debug log), a malformed one is logged and ignored.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self._runs: dict[str, TaskRun] = {}

    def add(self, run: TaskRun) -> None:
        """Follow ``run``'s task."""
        self._runs[run.task_id] = run

    def discard(self, run: TaskRun) -> None:
        """Stop following ``run``'s task."""
        if self._runs.get(run.task_id) is run:
            del self._runs[run.task_id]

    def notified(self, method: str, params: Any) -> None:
        """A status notification arrived: record it on the task's run and wake its poll."""
        task_id = params.get("taskId") if isinstance(params, dict) else None
        status = params.get("status") if isinstance(params, dict) else None
        message = params.get("statusMessage") if isinstance(params, dict) else None
        if not isinstance(task_id, str) or status not in STATUSES:
            log.warning(
                "mcp task status notification malformed",
                server=self.server,
                method=method,
                reason="expected a string taskId and a status of "
                f"{sorted(STATUSES)}; found taskId {_short(task_id)}, status {_short(status)}",
            )
            return
        run = self._runs.get(task_id)
        if run is None:
            log.debug("mcp task status for an unknown task", server=self.server, task=task_id)
            return
        run.observe(status, message if isinstance(message, str) else None, via="notification")
        run.wake.set()


class TaskRun:
    """One task followed to its end, over the connection of the moment.

    Subclasses say how one era polls (:meth:`poll`) and cancels
    (:meth:`send_cancel`); this class bounds the whole (``task_timeout``),
    reopens a lost connection, logs each status change and wakes at once on a
    status notification (a :class:`TaskWatch` calls :meth:`observe`).
    """

    def __init__(
        self,
        connection: Connection,
        reconnect: Reconnect,
        name: str,
        task_id: str,
        call_timeout: float,
        watch: TaskWatch | None = None,
    ) -> None:
        self.connection = connection
        self.reconnect = reconnect
        self.name = name
        self.task_id = task_id
        self.status = "working"
        self.status_message: str | None = None
        self.poll_ms: float | None = None
        self.call_timeout = call_timeout
        self.reconnections = 0
        self.watch = watch
        self.wake = anyio.Event()
        self.resumable = False  # a question that resumes this task waits for the host

    @property
    def state(self) -> dict[str, Any]:
        """The task's last state, as result metadata (``TASK_KEY``)."""
        return {"taskId": self.task_id, "status": self.status, "statusMessage": self.status_message}

    def observe(self, status: str, message: str | None, *, via: str = "poll") -> None:
        """Record the task's status (logged when it changed)."""
        if status != self.status:
            log.info(
                "mcp task status",
                server=self.connection.server,
                tool=self.name,
                task=self.task_id,
                status=status,
                message=clip(message),
                via=via,
            )
        self.status, self.status_message = status, message

    def check_id(self, method: str, found: object) -> None:
        """Raise :class:`McpCallError` unless the server answered about our task."""
        if found != self.task_id:
            raise McpCallError(
                f"MCP server {self.connection.server!r} answered {method} {self.task_id!r} "
                f"with task {found!r}; expected the same task id",
                server=self.connection.server,
            )

    async def send(
        self, method: str, send: Callable[[Client], Awaitable[Any]], limit: float
    ) -> Any:
        """``send`` (a ``tasks/*`` request) on the connection; a lost connection is
        reopened (at most ``_RECONNECTIONS`` times per task) and the request sent again."""
        operation = f"{method} {self.task_id!r}"
        while True:
            try:
                return await request(self.connection, operation, limit, send)
            except McpConnectionError as error:
                if self.reconnections >= _RECONNECTIONS:
                    raise
                self.reconnections += 1
                log.warning(
                    "mcp task connection lost",
                    server=self.connection.server,
                    task=self.task_id,
                    error=str(error),
                )
                self.connection = await self.reconnect()

    async def follow(
        self, task_timeout: float, timer: Callable[[anyio.CancelScope], None] | None = None
    ) -> None:
        """Follow the task until :meth:`settled`, within ``task_timeout`` (``timer``
        receives the bounding scope); sends ``tasks/cancel`` when the time is up, the
        caller is cancelled, or following it failed. A caller cancelled while a
        question that resumes the task waits (:attr:`resumable`) leaves the task be:
        the stored question carries it to a restored driver."""
        if self.watch is not None:
            self.watch.add(self)
        try:
            with anyio.fail_after(task_timeout) as scope:
                if timer is not None:
                    timer(scope)
                await self._follow()
        except TimeoutError:
            await self.cancel()
            raise McpCallError(
                f"MCP server {self.connection.server!r}: task {self.task_id!r} of "
                f"tools/call {self.name!r} did not end within task_timeout ({task_timeout:g} s; "
                f"last status {self.status!r}); it was cancelled (tasks/cancel): raise the "
                "source's task_timeout for longer tasks",
                server=self.connection.server,
            ) from None
        except anyio.get_cancelled_exc_class():
            if self.resumable:
                log.info(
                    "mcp task left to its question",
                    server=self.connection.server,
                    task=self.task_id,
                    reason="the call was cancelled while its question waits; a driver "
                    "restored from the store answers the same task",
                )
                raise
            with anyio.CancelScope(shield=True):
                await self.cancel()
            raise
        except McpError:
            if self.status not in _TERMINAL:
                await self.cancel()
            raise
        finally:
            if self.watch is not None:
                self.watch.discard(self)

    async def _follow(self) -> None:
        while not self.settled():
            await self.act()
            if self.settled():
                return
            await self._sleep()
            await self.poll()

    def settled(self) -> bool:
        """Whether following is over (the task ended)."""
        return self.status in _TERMINAL

    async def act(self) -> None:
        """What the task's last state asks of us before the next poll (nothing here)."""

    async def _sleep(self) -> None:
        """Wait the server's poll interval (bounded), or less when a notification came."""
        interval = (self.poll_ms or 0) / 1000
        if not self.wake.is_set():
            with anyio.move_on_after(min(max(interval, _MIN_POLL), _MAX_POLL)):
                await self.wake.wait()
        self.wake = anyio.Event()

    async def poll(self) -> None:
        """Ask the server for the task's state and record it."""
        raise NotImplementedError

    async def send_cancel(self) -> None:
        """Send this era's ``tasks/cancel``."""
        raise NotImplementedError

    async def cancel(self) -> None:
        """Send ``tasks/cancel`` (bounded); a failure is logged, not raised."""
        try:
            with anyio.fail_after(min(self.call_timeout, _CANCEL_TIMEOUT)):
                await self.send_cancel()
        except Exception as error:
            log.warning(
                "mcp task cancel failed",
                server=self.connection.server,
                task=self.task_id,
                error=describe(error),
            )


class _LegacyTaskRun(TaskRun):
    """A 2025-11-25 task: ``tasks/get`` until it ends or needs input."""

    def settled(self) -> bool:
        # A task waiting for input answers tasks/result once the input is given and it ended.
        return self.status in _TERMINAL or self.status == "input_required"

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
    limit = call_timeout if run.status in _TERMINAL else task_timeout
    payload = mcp_types.GetTaskPayloadRequest(
        params=mcp_types.GetTaskPayloadRequestParams(task_id=run.task_id)
    )
    result = await run.send(
        "tasks/result",
        lambda client: client.session.send_request(payload, mcp_types.CallToolResult),
        limit,
    )
    return result, run.state


async def send_raw(
    client: Client,
    method: str,
    params: dict[str, Any],
    limit: float,
    task_id: str | None = None,
) -> Any:
    """Send a request whose answer the SDK's typed path would refuse (a ``tools/call``
    answered with a task; the extension's ``tasks/*``), through the session's own
    stamping and dispatcher; ``task_id`` goes in the ``Mcp-Name`` header (the
    extension's routing header over streamable HTTP)."""
    session: Any = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    options: dict[str, Any] = {}
    session._stamp(data, options)
    if task_id is not None and is_modern(client):
        options.setdefault("headers", {})[MCP_NAME_HEADER] = encode_header_value(task_id)
    options["timeout"] = limit
    return await session._dispatcher.send_raw_request(method, data.get("params"), options)


def parse(server: str, operation: str, model: type[Any], raw: Any) -> Any:
    """``raw`` as ``model``; :class:`McpCallError` naming ``operation`` if it is not one."""
    try:
        return model.model_validate(raw, by_name=False)
    except ValidationError as error:
        raise McpCallError(
            f"MCP server {server!r} answered {operation} with a malformed "
            f"{model.__name__}: {describe(error)}",
            server=server,
        ) from None


def clip(text: str | None, limit: int = 500) -> str | None:
    """``text`` cut to ``limit`` characters (a server's message in our errors and logs)."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
