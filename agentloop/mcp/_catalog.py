"""The tool list of one MCP server: listing it, keeping it, refreshing it on change."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio
import attrs
import mcp_types
from mcp import Client

from .._log import get_logger
from ..core._tool_spec import ToolSpec
from ..tools._registry import ToolCatalogEvent, compare_catalogs
from ._config import McpServer, tool_names
from ._connection import Connection, request
from ._convert import to_spec
from ._errors import McpCallError
from ._features import FeatureTool
from ._tasks import TASK_KEY, task_plan, tasks_supported
from ._tool import McpTool

__all__ = ["ToolCatalog", "list_tools"]

log = get_logger()

_MAX_PAGES = 100


async def list_tools(client: Client, server: str) -> list[mcp_types.Tool]:
    """All of the server's tools, page after page (at most 100 pages)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise McpCallError(
        f"MCP server {server!r} listed more than {_MAX_PAGES} pages of tools",
        server=server,
    )


class CatalogSettings(Protocol):
    """The source's settings the catalog reads at each use (a host may change them)."""

    prefer_tasks: bool
    connect_timeout: float


class ToolCatalog:
    """The tools one ``McpToolSource`` offers, and the refresh of them the server asks for.

    ``settings`` is the source (its ``prefer_tasks`` and ``connect_timeout``, read where
    they are used); ``make_tool`` builds the tool object for an MCP name and its spec;
    ``with_features`` adds the feature tools to a fresh catalog (given the old one);
    ``client`` is the open connection's client (``None`` when there is none)."""

    def __init__(
        self,
        server: McpServer,
        *,
        settings: CatalogSettings,
        make_tool: Callable[[str, ToolSpec], McpTool],
        with_features: Callable[[dict[str, Any], Mapping[str, Any]], None],
        client: Callable[[], Client | None],
    ) -> None:
        self.server = server
        self._settings = settings
        self._make_tool = make_tool
        self._with_features = with_features
        self._client = client
        self.as_tasks: set[str] = set()  # MCP names of the tools called as 2025-era tasks
        self.listed: list[mcp_types.Tool] = []  # the server's tools as last listed
        self.tools: dict[str, McpTool | FeatureTool] = {}
        self._hidden: dict[str, str] = {}  # MCP name -> why it is not offered (logged once)
        self._reported: dict[str, ToolSpec] = {}
        self._stale = False
        self._refreshed: anyio.Event | None = None  # set when the running refresh ends

    # -- the catalog -------------------------------------------------------------

    def apply(self, tools: list[mcp_types.Tool]) -> None:
        """Make ``tools`` the catalog, keeping the very same objects for unchanged tools."""
        self.listed = tools
        client = self._client()
        names = tool_names(self.server.name, [tool.name for tool in tools])
        fresh: dict[str, McpTool | FeatureTool] = {}
        hidden: dict[str, str] = {}
        self.as_tasks = set()
        for tool in tools:
            name = names[tool.name]
            as_task, why = task_plan(tool, client, self._settings.prefer_tasks)
            if why is not None:
                hidden[tool.name] = why
                continue
            spec = self._spec(name, tool, as_task, client)
            old = self.tools.get(name)
            fresh[name] = (
                old
                if isinstance(old, McpTool) and old.spec == spec and old.mcp_name == tool.name
                else self._make_tool(tool.name, spec)
            )
        self._with_features(fresh, self.tools)
        self.tools = fresh
        self._log_hidden(hidden)

    def _spec(
        self, name: str, tool: mcp_types.Tool, as_task: bool, client: Client | None
    ) -> ToolSpec:
        """The spec offered for ``tool`` (marked as a task tool when it runs as one)."""
        spec = to_spec(self.server.name, name, tool)
        if not as_task:
            return spec
        if client is not None and tasks_supported(client):
            self.as_tasks.add(tool.name)
        return attrs.evolve(spec, metadata={**spec.metadata, TASK_KEY: True})

    def _log_hidden(self, hidden: dict[str, str]) -> None:
        """Log each tool newly not offered (once), then remember ``hidden``."""
        for mcp_name in sorted(hidden.keys() - self._hidden.keys()):
            log.warning(
                "mcp tool not offered",
                server=self.server.name,
                tool=mcp_name,
                reason=hidden[mcp_name],
            )
        self._hidden = hidden

    def mark_reported(self) -> None:
        """Take the catalog as it is now as reported (the first listing is no change)."""
        self._reported = {name: tool.spec for name, tool in self.tools.items()}

    def drain_events(self, source_name: str) -> list[ToolCatalogEvent]:
        """The net change of the catalog since the last drain (none or one event)."""
        now = {name: tool.spec for name, tool in self.tools.items()}
        change = compare_catalogs(source_name, self._reported, now)
        self._reported = now
        return [] if change is None else [change]

    # -- refreshing --------------------------------------------------------------

    def changed(self, connection: Connection) -> None:
        """The server said its list changed: fetch it again (one refresh at a time)."""
        self._stale = True
        if self._refreshed is not None or connection.tasks is None:
            return
        self._refreshed = anyio.Event()
        connection.tasks.start_soon(self._refresh_loop, connection)

    async def _refresh_loop(self, connection: Connection) -> None:
        try:
            while self._stale and not connection.done.is_set():
                self._stale = False
                try:
                    await self.refresh_once(connection)
                except Exception as error:
                    log.warning(
                        "mcp tool refresh failed", server=self.server.name, error=str(error)
                    )
                    return
        finally:
            refreshed, self._refreshed = self._refreshed, None
            if refreshed is not None:
                refreshed.set()

    async def refresh_once(self, connection: Connection) -> None:
        """List the tools on ``connection`` now and make them the catalog."""
        tools = await request(
            connection,
            "tools/list",
            self._settings.connect_timeout,
            lambda client: list_tools(client, self.server.name),
        )
        self.apply(tools)
        log.info("mcp tools refreshed", server=self.server.name, tools=len(tools))

    async def settle(self) -> None:
        """Wait (bounded) for a refresh under way, so the next model call sees its result."""
        refreshed = self._refreshed
        if refreshed is not None:
            with anyio.move_on_after(self._settings.connect_timeout):
                await refreshed.wait()
