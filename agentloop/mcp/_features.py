"""Resources and prompts of an MCP server, for the host (and, opt-in, as two tools)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types
from mcp import Client

from .._log import get_logger
from ..core._items import Part
from ._config import McpServer
from ._connection import Connection, request
from ._errors import McpCallError
from ._feature_tools import GetPromptTool, ReadResourceTool, feature_names
from ._resources import (
    McpPrompt,
    McpPromptResult,
    McpResource,
    McpResourceTemplate,
    contents_parts,
    to_prompt,
    to_prompt_result,
    to_resource,
    to_template,
)

__all__ = ["FEATURE_CHANGES", "ServerFeatures"]

log = get_logger()

FEATURE_CHANGES = frozenset(
    {"notifications/resources/list_changed", "notifications/prompts/list_changed"}
)
"""The 2025-era notifications after which the feature tools are listed again."""

_MAX_PAGES = 100
_T = TypeVar("_T")
FeatureTool = ReadResourceTool | GetPromptTool


class ServerFeatures:
    """The host API for resources and prompts, mixed into ``McpToolSource``."""

    server: McpServer
    call_timeout: float
    connect_timeout: float
    feature_tools: bool
    _offered: tuple[list[McpResource], list[McpResourceTemplate], list[McpPrompt]] | None
    _feature_refresh: anyio.Event | None
    _feature_stale: bool

    if TYPE_CHECKING:

        async def _connection_for_call(self) -> Connection: ...

        @property
        def _listed(self) -> list[mcp_types.Tool]: ...  # the server's tools as last listed

        def _apply(self, tools: list[mcp_types.Tool]) -> None: ...

        def get(self, name: str) -> Any: ...

    # -- the host API ------------------------------------------------------------

    async def list_resources(self) -> list[McpResource]:
        """Every resource the server lists (all pages); raises :class:`McpError`."""
        connection = await self._connection_for_call()
        return await self._list_resources(connection)

    async def list_resource_templates(self) -> list[McpResourceTemplate]:
        """Every resource template the server lists (all pages); raises :class:`McpError`."""
        connection = await self._connection_for_call()
        return await self._list_templates(connection)

    async def read_resource(self, uri: str) -> list[Part]:
        """The contents of resource ``uri`` as parts: text a ``TextPart`` (URI and MIME
        type in its metadata), a blob a ``FilePart``; raises :class:`McpError`."""
        if not isinstance(uri, str) or not uri:
            raise TypeError(f"read_resource: uri must be a non-empty string, got {uri!r}")
        connection = await self._connection_for_call()
        self._require(connection, "resources")
        result = await request(
            connection, f"resources/read {uri!r}", self.call_timeout,
            lambda client: client.read_resource(uri),
        )  # fmt: skip
        try:
            return contents_parts(self.server.name, uri, result)
        except ValueError as error:
            raise McpCallError(str(error), server=self.server.name) from None

    async def list_prompts(self) -> list[McpPrompt]:
        """Every prompt the server lists (all pages); raises :class:`McpError`."""
        connection = await self._connection_for_call()
        return await self._list_prompts(connection)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> McpPromptResult:
        """Prompt ``name`` filled in with ``arguments`` (strings); raises :class:`McpError`."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"get_prompt: name must be a non-empty string, got {name!r}")
        values = dict(arguments or {})
        wrong = {key: value for key, value in values.items() if not isinstance(value, str)}
        if wrong or not all(isinstance(key, str) for key in values):
            raise TypeError(
                f"get_prompt {name!r}: arguments must map strings to strings (MCP prompt "
                f"arguments are strings); not strings: {wrong!r}"
            )
        connection = await self._connection_for_call()
        self._require(connection, "prompts")
        result = await request(
            connection, f"prompts/get {name!r}", self.call_timeout,
            lambda client: client.get_prompt(name, values),
        )  # fmt: skip
        return to_prompt_result(name, result)

    # -- listing -------------------------------------------------------------------

    def _require(self, connection: Connection, feature: str) -> None:
        client = connection.client
        if client is not None and getattr(client.server_capabilities, feature) is None:
            raise McpCallError(
                f"MCP server {self.server.name!r} does not offer {feature} (its capabilities "
                f"have no {feature!r} entry)",
                server=self.server.name,
            )

    async def _pages(
        self,
        connection: Connection,
        operation: str,
        fetch: Callable[[Client, str | None], Awaitable[tuple[list[_T], str | None]]],
    ) -> list[_T]:
        found: list[_T] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page, cursor = await request(
                connection, operation, self.call_timeout,
                lambda client, at=cursor: fetch(client, at),  # type: ignore[misc]
            )  # fmt: skip
            found.extend(page)
            if cursor is None:
                return found
        raise McpCallError(
            f"MCP server {self.server.name!r} listed more than {_MAX_PAGES} pages of "
            f"{operation}; the list was not read",
            server=self.server.name,
        )

    async def _list_resources(self, connection: Connection) -> list[McpResource]:
        self._require(connection, "resources")

        async def fetch(client: Client, cursor: str | None) -> tuple[list[Any], str | None]:
            page = await client.list_resources(cursor=cursor)
            return [to_resource(item) for item in page.resources], page.next_cursor

        return await self._pages(connection, "resources/list", fetch)

    async def _list_templates(self, connection: Connection) -> list[McpResourceTemplate]:
        self._require(connection, "resources")

        async def fetch(client: Client, cursor: str | None) -> tuple[list[Any], str | None]:
            page = await client.list_resource_templates(cursor=cursor)
            return [to_template(item) for item in page.resource_templates], page.next_cursor

        return await self._pages(connection, "resources/templates/list", fetch)

    async def _list_prompts(self, connection: Connection) -> list[McpPrompt]:
        self._require(connection, "prompts")

        async def fetch(client: Client, cursor: str | None) -> tuple[list[Any], str | None]:
            page = await client.list_prompts(cursor=cursor)
            return [to_prompt(item) for item in page.prompts], page.next_cursor

        return await self._pages(connection, "prompts/list", fetch)

    # -- the feature tools ---------------------------------------------------------

    def _listen_filter(self, client: Client) -> dict[str, bool]:
        """What a 2026-era ``subscriptions/listen`` stream asks for."""
        capabilities = client.server_capabilities
        tools, resources, prompts = (
            capabilities.tools,
            capabilities.resources,
            capabilities.prompts,
        )
        return {
            "tools_list_changed": bool(tools is not None and tools.list_changed),
            "resources_list_changed": self.feature_tools
            and bool(resources is not None and resources.list_changed),
            "prompts_list_changed": self.feature_tools
            and bool(prompts is not None and prompts.list_changed),
        }

    async def _list_features(self, connection: Connection) -> None:
        """List what the feature tools offer (when they are on); what the server lacks
        is offered as nothing."""
        if not self.feature_tools:
            return
        capabilities = connection.client.server_capabilities if connection.client else None
        has_resources = capabilities is not None and capabilities.resources is not None
        has_prompts = capabilities is not None and capabilities.prompts is not None
        resources = await self._list_resources(connection) if has_resources else []
        templates = await self._list_templates(connection) if has_resources else []
        prompts = await self._list_prompts(connection) if has_prompts else []
        self._offered = (resources, templates, prompts)
        log.info(
            "mcp resources and prompts listed",
            server=self.server.name,
            resources=len(resources),
            templates=len(templates),
            prompts=len(prompts),
        )

    def _with_features(self, fresh: dict[str, Any], old: Mapping[str, Any]) -> None:
        """Add the feature tools to ``fresh`` (the server's own tools win a name)."""
        if not self.feature_tools or self._offered is None:
            return
        resources, templates, prompts = self._offered
        read_name, prompt_name = feature_names(self.server.name)
        wanted: list[FeatureTool] = []
        if resources or templates:
            wanted.append(ReadResourceTool(self, read_name, resources, templates))
        if prompts:
            wanted.append(GetPromptTool(self, prompt_name, prompts))
        for tool in wanted:
            if tool.spec.name in fresh:
                log.warning(
                    "mcp feature tool not offered",
                    server=self.server.name,
                    tool=tool.spec.name,
                    reason="the server has a tool of that name",
                )
                continue
            kept = old.get(tool.spec.name)
            same = type(kept) is type(tool) and kept.spec == tool.spec
            fresh[tool.spec.name] = kept if same else tool

    def _features_changed(self, connection: Connection) -> None:
        """The server said its resources or prompts changed: list them again."""
        self._feature_stale = True
        if not self.feature_tools or connection.tasks is None or self._feature_refresh:
            return
        self._feature_refresh = anyio.Event()
        connection.tasks.start_soon(self._refresh_features, connection)

    async def _refresh_features(self, connection: Connection) -> None:
        try:
            while self._feature_stale and not connection.done.is_set():
                self._feature_stale = False
                await self._list_features(connection)
                self._apply(self._listed)
        except Exception as error:
            log.warning("mcp feature refresh failed", server=self.server.name, error=str(error))
        finally:
            done, self._feature_refresh = self._feature_refresh, None
            if done is not None:
                done.set()

    async def _settle_features(self, connection: Connection) -> None:
        """Wait (bounded) for a feature refresh under way; on a 2026-era connection whose
        changes are not ordered with answers, list the features again now."""
        if connection.relist_features_after_calls:
            try:
                await self._list_features(connection)
                self._apply(self._listed)
            except Exception as error:
                log.warning("mcp feature refresh failed", server=self.server.name, error=str(error))
        done = self._feature_refresh
        if done is not None:
            with anyio.move_on_after(self.connect_timeout):
                await done.wait()
