"""The opt-in feature tools: ``read_resource`` and ``get_prompt`` of one server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..core._items import Part, TextPart
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..permissions._requests import PermissionRequest
from ..tools._tool import ToolContext, ToolOutput, ToolRequest
from ._convert import MCP_SERVER_KEY, URI_KEY
from ._permissions import McpGetPrompt, McpReadResource
from ._resources import McpPrompt, McpPromptResult, McpResource, McpResourceTemplate

__all__ = ["FEATURE_KEY", "GetPromptTool", "ReadResourceTool", "feature_names"]

FEATURE_KEY = "mcp.feature"
"""ToolSpec metadata of a feature tool: ``"read_resource"`` or ``"get_prompt"``."""

_LISTED = 50
"""Resources, templates or prompts named in a feature tool's description, at most."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class FeatureServer(Protocol):
    """What a feature tool needs of its source (an ``McpToolSource``)."""

    @property
    def server(self) -> _Named: ...

    def get(self, name: str) -> Any: ...

    async def read_resource(self, uri: str) -> list[Part]: ...

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> McpPromptResult: ...


def feature_names(server: str) -> tuple[str, str]:
    """The names of ``server``'s two feature tools."""
    return f"mcp__{server}__read_resource", f"mcp__{server}__get_prompt"


def _lines(entries: Sequence[str], more: int) -> str:
    text = "\n".join(f"- {entry}" for entry in entries)
    return text + (f"\n- ... and {more} more" if more > 0 else "")


def _about(title: str | None, description: str | None) -> str:
    said = " - ".join(part for part in (title, description) if part)
    return f": {said}" if said else ""


class ReadResourceTool:
    """Reads one resource of the server by URI; proposes :class:`McpReadResource`."""

    def __init__(
        self,
        source: FeatureServer,
        name: str,
        resources: Sequence[McpResource],
        templates: Sequence[McpResourceTemplate],
    ) -> None:
        self.source = source
        server = source.server.name
        listed = [f"{r.uri} ({r.name}){_about(r.title, r.description)}" for r in resources]
        shapes = [f"{t.uri_template} ({t.name}){_about(t.title, t.description)}" for t in templates]
        text = f"Read a resource of MCP server {server!r} by its URI."
        if listed:
            text += "\nResources:\n" + _lines(listed[:_LISTED], len(listed) - _LISTED)
        if shapes:
            text += "\nURI templates (fill in the {placeholders}):\n"
            text += _lines(shapes[:_LISTED], len(shapes) - _LISTED)
        schema = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
            "required": ["uri"],
            "additionalProperties": False,
        }
        self.spec = ToolSpec(
            name,
            text,
            schema,
            annotations=ToolAnnotations(read_only=True, idempotent=True),
            metadata={MCP_SERVER_KEY: server, FEATURE_KEY: "read_resource"},
        )

    def __repr__(self) -> str:
        return f"<ReadResourceTool {self.spec.name!r}>"

    def current_spec(self) -> ToolSpec | None:
        """This tool's spec while the source offers it, else ``None`` (hidden)."""
        live = self.source.get(self.spec.name)
        return live.spec if isinstance(live, type(self)) else None

    def proposed_requests(self, request: ToolRequest) -> Sequence[PermissionRequest]:
        """``McpReadResource(server, uri)``."""
        return (McpReadResource(self.source.server.name, _text(request.input, "uri")),)

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput:
        """Read the resource (see ``McpToolSource.read_resource``)."""
        uri = _text(request.input, "uri")
        parts = await self.source.read_resource(uri)
        return ToolOutput(_value(parts), metadata={URI_KEY: uri})


class GetPromptTool:
    """Gets one prompt of the server, filled in; proposes :class:`McpGetPrompt`."""

    def __init__(self, source: FeatureServer, name: str, prompts: Sequence[McpPrompt]) -> None:
        self.source = source
        server = source.server.name
        listed = []
        for prompt in prompts:
            arguments = ", ".join(
                argument.name + ("" if argument.required else "?") for argument in prompt.arguments
            )
            listed.append(f"{prompt.name}({arguments}){_about(prompt.title, prompt.description)}")
        text = (
            f"Get a prompt of MCP server {server!r}, filled in with string arguments "
            "(name? is optional).\nPrompts:\n" + _lines(listed[:_LISTED], len(listed) - _LISTED)
        )
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [prompt.name for prompt in prompts]},
                "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
        self.spec = ToolSpec(
            name,
            text,
            schema,
            annotations=ToolAnnotations(read_only=True),
            metadata={MCP_SERVER_KEY: server, FEATURE_KEY: "get_prompt"},
        )

    def __repr__(self) -> str:
        return f"<GetPromptTool {self.spec.name!r}>"

    def current_spec(self) -> ToolSpec | None:
        """This tool's spec while the source offers it, else ``None`` (hidden)."""
        live = self.source.get(self.spec.name)
        return live.spec if isinstance(live, type(self)) else None

    def proposed_requests(self, request: ToolRequest) -> Sequence[PermissionRequest]:
        """``McpGetPrompt(server, name)``."""
        return (McpGetPrompt(self.source.server.name, _text(request.input, "name")),)

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput:
        """Get the prompt (see ``McpToolSource.get_prompt``); its messages, each
        headed by its role."""
        name = _text(request.input, "name")
        given = request.input.get("arguments") if isinstance(request.input, dict) else None
        result = await self.source.get_prompt(name, given or {})
        parts: list[Part] = []
        for message in result.messages:
            if isinstance(message.part, TextPart) and not message.part.metadata:
                parts.append(TextPart(f"[{message.role}] {message.part.text}"))
            else:
                parts.extend((TextPart(f"[{message.role}]"), message.part))
        return ToolOutput(_value(parts, "\n\n"))


def _text(value: Any, key: str) -> str:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, str) else ""


def _value(parts: list[Part], sep: str = "\n") -> Any:
    if all(isinstance(part, TextPart) for part in parts):
        return sep.join(part.text for part in parts if isinstance(part, TextPart))
    return parts
