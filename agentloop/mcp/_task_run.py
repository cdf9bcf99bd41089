"""Following one task to its end (both protocol eras), and the tasks a source follows.

:class:`TaskRun` polls a task within the source's ``task_timeout``, reopens a lost
connection, logs each status change, wakes at once on a status notification (a
:class:`TaskWatch` hands it over) and sends ``tasks/cancel`` when the time is up,
the caller is cancelled or following failed; an era's subclass says how to poll and
cancel (``_tasks`` for 2025-11-25, ``_task_follow`` for the 2026 extension).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import Client
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from pydantic import ValidationError

from .._log import get_logger
from ._connection import Connection, describe, is_modern, request
from ._errors import McpCallError, McpConnectionError, McpError

__all__ = [
    "STATUSES",
    "TERMINAL",
    "Reconnect",
    "TaskRun",
    "TaskWatch",
    "clip",
    "parse",
    "send_raw",
]

log = get_logger()

STATUSES = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
"""The task statuses both revisions define."""
TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""The statuses of a task that ended."""

_MIN_POLL = 0.05
_MAX_POLL = 5.0
_CANCEL_TIMEOUT = 5.0
_RECONNECTIONS = 3


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
            if self.status not in TERMINAL:
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
        return self.status in TERMINAL

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
