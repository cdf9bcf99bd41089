"""``McpToolSource``: one MCP server's tools as a live agentloop tool source."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal, TextIO

import anyio
import anyio.abc
import anyio.lowlevel
import attrs
import mcp_types

from .._log import get_logger
from ..core._tool_spec import ToolSpec
from ..permissions._checker import CheckerLike, as_checker
from ..permissions._requests import (
    AllowAll,
    PermissionChecker,
)
from ..tools._registry import ToolCatalogEvent
from ..tools._tool import ToolContext, ToolOutput
from ._asking import Asking
from ._catalog import ToolCatalog
from ._config import McpServer, check_options
from ._connect import ConnectApprover, check_connect
from ._connection import Connection, describe, request, usable
from ._convert import to_output
from ._errors import McpCallError, McpConnectionError, McpError
from ._features import FeatureTool, ServerFeatures
from ._input_rounds import send_call
from ._roots import Roots, RootsLike, to_roots
from ._serving import ConnectionRunner, close_connection
from ._task_follow import follow_task
from ._task_run import TaskWatch
from ._task_wire import ResumedTask, TaskHandle, TasksExtension
from ._tasks import TASK_KEY, call_as_task, check_task_timeout
from ._tool import McpTool
from ._transport import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["ConnectApprover", "McpToolSource"]

log = get_logger()


class McpToolSource(ServerFeatures):
    """The tools of one MCP server, named ``mcp__<server>__<tool>``.

    Use it as an async context manager around the sessions that use it::

        async with McpToolSource(StdioServer("files", "python", ["server.py"])) as files:
            agent = Agent.builder().model(model).add_tool_source(files).build()

    Entering connects (a stdio server is started as a child process) and
    lists the tools; leaving closes the connection (a stdio server is
    stopped). When the server reports ``notifications/tools/list_changed``
    the list is fetched again; the driver reports the change as a
    ``ToolCatalogChanged`` event before its next model call, and that call
    offers the new list. With a 2025-era server the notification arrives
    before the answer of the call that caused it, and the call waits
    (bounded) for the refresh;
    on a 2026-era connection change events travel on their own stream, not
    ordered with answers, so after each call to a server that advertises
    ``tools.listChanged`` the source lists the tools again (one more round
    trip per call). Either way the model's next request sees the change.

    Failures never escape into the driver: a crashed, hung or misbehaving
    server fails the calls involved (the executor turns the :class:`McpError`
    into a failed tool result); the next call reconnects, one attempt bounded
    by ``connect_timeout``. A call that takes longer than ``call_timeout``
    is abandoned and the connection reopened on the next call; a cancelled
    call sends MCP's ``notifications/cancelled``.

    ``permissions`` decides :class:`McpConnect` before every connection
    (default: allow; a built-in policy alone is used as ``PolicyChain(policy)``);
    when it asks for approval, ``approve_connect`` is asked, and without one the
    connection is refused. ``protocol="legacy"`` forces
    the 2025 initialize handshake (``"auto"`` negotiates the newest version
    the server speaks). ``stderr`` receives a stdio server's standard error
    (default: this process's). ``max_message_size`` bounds one answer streamed
    over HTTP as server-sent events (bytes; ``None``: no bound). ``roots`` (a
    ``PathPolicy``, a ``PolicyChain`` of them, or paths) are advertised as the
    client's roots and listed on ``roots/list``. The server's resources and prompts
    are read with :meth:`list_resources`, :meth:`read_resource`, :meth:`list_prompts`
    and :meth:`get_prompt`; ``feature_tools=True`` also offers them to the model as
    ``mcp__<server>__read_resource`` and ``mcp__<server>__get_prompt``.

    Tools with ``execution.taskSupport`` ``"required"`` run as MCP tasks (2025-11-25
    ``tasks``), as do ``"optional"`` ones with ``prefer_tasks=True``: the call polls
    the task until it ends (at most ``task_timeout`` seconds, then ``tasks/cancel``);
    route them to the task manager's background to keep the turn going. On a
    2026-era connection the source speaks the ``io.modelcontextprotocol/tasks``
    extension: a call the server answers with a task is followed the same way, and
    the task's input requests are asked of the host and answered with ``tasks/update``.

    ``elicitation`` and ``sampling``
    advertise those client capabilities: the server's requests during a call
    (both protocol eras) become ``CallQuestion`` steps of the driver running it,
    answered by the host (its tools then never run inline: give the agent an
    entered ``AsyncTaskManager``); ``sampling="model"`` lets the agent's own model
    answer sampling requests, within the turn's limits. A 2025-11-25 server may send
    them as tasks (``params.task``): the client answers with a task and serves the
    server's ``tasks/*`` polls. See docs/mcp.md.
    """

    def __init__(
        self,
        server: McpServer,
        *,
        permissions: CheckerLike | None = None,
        approve_connect: ConnectApprover | None = None,
        connect_timeout: float = 10.0,
        call_timeout: float = 60.0,
        protocol: Literal["auto", "legacy"] = "auto",
        stderr: TextIO | None = None,
        max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE,
        roots: RootsLike | None = None,
        feature_tools: bool = False,
        prefer_tasks: bool = False,
        task_timeout: float = 3600.0,
        elicitation: bool = False,
        sampling: bool | Literal["model"] = False,
    ) -> None:
        check_options(server, connect_timeout, call_timeout, protocol, max_message_size)
        self.roots: Roots | None = None if roots is None else to_roots(roots)
        self.asking = Asking(server.name, elicitation=bool(elicitation), sampling=sampling)
        self.max_message_size = max_message_size
        self.server = server
        self.name = f"mcp:{server.name}"
        self.permissions: PermissionChecker = (
            AllowAll()
            if permissions is None
            else as_checker(permissions, operation="McpToolSource")
        )
        self.approve_connect = approve_connect
        self.connect_timeout = float(connect_timeout)
        self.call_timeout = float(call_timeout)
        self.protocol = protocol
        self.stderr = stderr
        self.feature_tools = bool(feature_tools)
        self.prefer_tasks = bool(prefer_tasks)
        self.task_timeout = check_task_timeout(task_timeout)
        self._watch = TaskWatch(server.name)
        self._offered = None
        self._feature_refresh = None
        self._feature_stale = False
        self._catalog = self._new_catalog()
        self._runner = self._new_runner()
        self._group: anyio.abc.TaskGroup | None = None
        self._connection: Connection | None = None
        self._connections = 0
        self._lock = anyio.Lock()

    def _new_catalog(self) -> ToolCatalog:
        """The catalog of this source's tools (empty until the first connection)."""
        return ToolCatalog(
            self.server,
            settings=self,
            make_tool=lambda mcp_name, spec: McpTool(self, mcp_name, spec),
            with_features=self._with_features,
            client=lambda: self._connection.client if self._connection is not None else None,
        )

    def _new_runner(self) -> ConnectionRunner:
        """What opens, listens on and closes this source's connections."""
        return ConnectionRunner(
            self,
            TasksExtension(self._watch),
            tools_changed=self._catalog.changed,
            features_changed=self._features_changed,
            listen_filter=self._listen_filter,
        )

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        tools = len(self._catalog.tools)
        return f"<McpToolSource {self.server.name!r} ({state}): {tools} tools>"

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> McpToolSource:
        if self._group is not None:
            raise McpConnectionError(
                f"MCP source {self.server.name!r} is already open; use one `async with` per source",
                server=self.server.name,
            )
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        try:
            await self._connect()
            # The first listing is construction, as ToolRegistry.with_tool: not a change.
            self._catalog.mark_reported()
        except BaseException:
            self._group = None
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        if group is None:
            return None
        await close_connection(self._connection)
        group.cancel_scope.cancel()
        return await group.__aexit__(exc_type, exc, traceback)

    @property
    def connected(self) -> bool:
        """Whether a connection is open now."""
        return usable(self._connection)

    @property
    def connections(self) -> int:
        """How many connections were opened so far (reconnections included)."""
        return self._connections

    async def reconnect(self) -> None:
        """Close the connection (if any) and open a new one; raises :class:`McpError`."""
        async with self._lock:
            await close_connection(self._connection)
            await self._open()

    async def refresh(self) -> None:
        """List the server's tools again now (connecting first if needed)."""
        connection = await self._connection_for_call()
        await self._catalog.refresh_once(connection)

    # -- the ToolSource protocol ------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """The specs of the server's tools, sorted by name."""
        tools = self._catalog.tools
        return [tools[name].spec for name in sorted(tools)]

    def get(self, name: str) -> McpTool | FeatureTool | None:
        """The tool called ``name`` (``mcp__<server>__<tool>``), or ``None``."""
        return self._catalog.tools.get(name)

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """The net change of the server's tools since the last drain (none or one event)."""
        return self._catalog.drain_events(self.name)

    # -- calls -------------------------------------------------------------------

    async def call_tool(
        self, mcp_name: str, arguments: dict[str, Any], ctx: ToolContext | None = None
    ) -> ToolOutput:
        """Call tool ``mcp_name`` (its name on the server); raises :class:`McpError` when
        the server cannot answer; the server's own ``isError`` is an error output.
        ``ctx`` (the running call's) receives the server's elicitation and sampling
        requests during the call, when the source advertises them."""
        connection = await self._connection_for_call()
        result, task = await self._send_call(connection, mcp_name, arguments, ctx)
        # A 2025-era notification sent before this answer is handled by a task the SDK
        # spawned before resolving the answer: one checkpoint lets it flag the change.
        await anyio.lowlevel.checkpoint()
        if connection.relist_after_calls:
            try:
                await self._catalog.refresh_once(connection)
            except McpError as error:
                log.warning("mcp tool refresh failed", server=self.server.name, error=str(error))
        await self._catalog.settle()
        await self._settle_features(connection)
        if not isinstance(result, mcp_types.CallToolResult):
            raise McpCallError(
                f"MCP server {self.server.name!r} answered tools/call {mcp_name!r} with "
                f"{type(result).__name__}; expected a CallToolResult",
                server=self.server.name,
            )
        output = to_output(result)
        if task:
            output = attrs.evolve(output, metadata={**output.metadata, TASK_KEY: task})
        return output

    async def _send_call(
        self,
        connection: Connection,
        mcp_name: str,
        arguments: dict[str, Any],
        ctx: ToolContext | None,
    ) -> tuple[Any, dict[str, Any]]:
        """The call's answer and, for a call run as a task, the task's last state: a
        2025-era task tool is called as a task; any call the server answers with a task
        (the 2026 tasks extension) is followed to its end."""
        entered = self.asking.enter(ctx)
        try:
            if mcp_name in self._catalog.as_tasks:
                return await call_as_task(
                    connection, mcp_name, arguments,
                    call_timeout=self.call_timeout, task_timeout=self.task_timeout,
                    reconnect=self._connection_for_call, watch=self._watch,
                )  # fmt: skip
            result = await request(
                connection, f"tools/call {mcp_name!r}", self.call_timeout,
                lambda client: send_call(client, self.asking, mcp_name, arguments, ctx),
                self.asking.timer(entered),
            )  # fmt: skip
            if not isinstance(result, TaskHandle | ResumedTask):
                return result, {}
            return await follow_task(
                connection, result, name=mcp_name, arguments=arguments,
                asking=self.asking, ctx=ctx, timer=self.asking.timer(entered),
                call_timeout=self.call_timeout, task_timeout=self.task_timeout,
                reconnect=self._connection_for_call, watch=self._watch,
            )  # fmt: skip
        finally:
            self.asking.leave(entered)

    # -- connecting ------------------------------------------------------------

    async def _connection_for_call(self) -> Connection:
        connection = self._connection
        if connection is not None and usable(connection):
            return connection
        async with self._lock:
            connection = self._connection
            if connection is not None and usable(connection):
                return connection
            await close_connection(self._connection)
            return await self._open()

    async def _connect(self) -> None:
        async with self._lock:
            await self._open()

    async def _open(self) -> Connection:
        """Check ``McpConnect``, then start a connection task and wait until it listed
        the tools (bounded by ``connect_timeout``)."""
        server = self.server.name
        if self._group is None:
            raise McpConnectionError(
                f"MCP source {server!r} is not open; use `async with McpToolSource(...)` around "
                "the sessions that use it",
                server=server,
            )
        await check_connect(self.server, self.permissions, self.approve_connect)
        self._connections += 1
        connection = Connection(
            self.server.name, self._connections, max_message_size=self.max_message_size
        )
        try:
            tools: list[mcp_types.Tool] = await self._group.start(self._runner.serve, connection)
        except McpConnectionError:
            raise
        except Exception as error:
            raise McpConnectionError(
                f"cannot connect to MCP server {server!r} ({self.server.target}): "
                f"{describe(error)}",
                server=server,
            ) from error
        self._connection = connection
        await self._list_features(connection)
        self._apply(tools)
        log.info("mcp connected", server=server, connection=connection.number, tools=len(tools))
        return connection

    # -- the tool list (kept by the catalog) ----------------------------------------

    @property
    def _listed(self) -> list[mcp_types.Tool]:
        """The server's tools as last listed."""
        return self._catalog.listed

    def _apply(self, tools: list[mcp_types.Tool]) -> None:
        """Make ``tools`` the catalog, keeping the very same objects for unchanged tools."""
        self._catalog.apply(tools)
