"""MCP tool sources: an MCP server's tools in an agent's catalog (the mcp extra).

Install: ``pip install 'agentloop-runtime[mcp]'``.

:class:`McpToolSource` connects to one server, over stdio (:class:`StdioServer`,
a child process it starts and stops) or streamable HTTP (:class:`HttpServer`),
and offers its tools as ``mcp__<server>__<tool>``; its resources and prompts are
read from the host (and, opt-in, by the model). See ``docs/mcp.md``.
"""

from .._extras import require_extra as _require_extra

_require_extra("mcp", "agentloop.mcp", "mcp", "mcp_types", "httpx2")

from ._config import HttpServer, McpServer, StdioServer, tool_names
from ._convert import MCP_NAME_KEY, MCP_SERVER_KEY, STRUCTURED_KEY, URI_KEY
from ._errors import McpCallError, McpConnectionError, McpError
from ._feature_tools import FEATURE_KEY, GetPromptTool, ReadResourceTool
from ._permissions import McpConnect, McpGetPrompt, McpInvoke, McpReadResource
from ._resources import (
    MIME_TYPE_KEY,
    McpPrompt,
    McpPromptArgument,
    McpPromptMessage,
    McpPromptResult,
    McpResource,
    McpResourceTemplate,
)
from ._routing import RouteMcpTasks
from ._source import ConnectApprover, McpToolSource
from ._tasks import TASK_KEY, TASKS_EXTENSION
from ._tool import McpTool

__all__ = [
    "FEATURE_KEY",
    "MCP_NAME_KEY",
    "MCP_SERVER_KEY",
    "MIME_TYPE_KEY",
    "STRUCTURED_KEY",
    "TASKS_EXTENSION",
    "TASK_KEY",
    "URI_KEY",
    "ConnectApprover",
    "GetPromptTool",
    "HttpServer",
    "McpCallError",
    "McpConnect",
    "McpConnectionError",
    "McpError",
    "McpGetPrompt",
    "McpInvoke",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptMessage",
    "McpPromptResult",
    "McpReadResource",
    "McpResource",
    "McpResourceTemplate",
    "McpServer",
    "McpTool",
    "McpToolSource",
    "ReadResourceTool",
    "RouteMcpTasks",
    "StdioServer",
    "tool_names",
]
