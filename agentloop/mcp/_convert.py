"""MCP values to agentloop values: tool specs in, call results out (pure functions)."""

from __future__ import annotations

from typing import Any

import attrs
import mcp_types

from ..core._items import FilePart, MediaPart, Part, TextPart
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..tools._tool import ToolOutput

__all__ = [
    "ANNOTATIONS_KEY",
    "MCP_NAME_KEY",
    "MCP_SERVER_KEY",
    "STRUCTURED_KEY",
    "URI_KEY",
    "to_output",
    "to_part",
    "to_spec",
]

MCP_SERVER_KEY = "mcp.server"
"""ToolSpec metadata: the server a tool comes from."""
MCP_NAME_KEY = "mcp.tool"
"""ToolSpec metadata: the tool's name on its server."""
STRUCTURED_KEY = "mcp.structured_content"
"""Result metadata: the call's ``structuredContent``, when the server sent one."""
URI_KEY = "mcp.uri"
"""Part metadata: the URI of an embedded text resource."""
ANNOTATIONS_KEY = "mcp.annotations"
"""Part metadata: a content block's annotations as the server sent them (``audience``,
``priority``, ``lastModified``)."""


def to_spec(server: str, name: str, tool: mcp_types.Tool) -> ToolSpec:
    """The spec for MCP ``tool`` advertised as ``name``: schemas passed through unchanged,
    the server's hints as annotations ("absent" reads as false)."""
    hints = tool.annotations
    annotations = ToolAnnotations(
        read_only=bool(hints and hints.read_only_hint),
        destructive=bool(hints and hints.destructive_hint),
        idempotent=bool(hints and hints.idempotent_hint),
        open_world=bool(hints and hints.open_world_hint),
    )
    return ToolSpec(
        name,
        tool.description or tool.title or tool.name,
        tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
        metadata={MCP_SERVER_KEY: server, MCP_NAME_KEY: tool.name},
    )


def to_output(result: mcp_types.CallToolResult) -> ToolOutput:
    """A call result as a tool output.

    Text blocks become :class:`TextPart`, images and audio :class:`MediaPart`
    (base64 data kept inline), embedded resources a :class:`TextPart` (text,
    URI in its metadata) or a :class:`FilePart` (blob), resource links a
    :class:`FilePart` by URI; a block's annotations are kept in its part's metadata
    under :data:`ANNOTATIONS_KEY`. All text: one string joined by newlines; no
    content: ``structuredContent`` as JSON, else ``""``. ``isError`` is kept;
    ``structuredContent`` is also in the metadata under :data:`STRUCTURED_KEY`.
    """
    parts = [to_part(block) for block in result.content]
    metadata: dict[str, Any] = {}
    if result.structured_content is not None:
        metadata[STRUCTURED_KEY] = result.structured_content
    value: Any
    if all(isinstance(part, TextPart) and not part.metadata for part in parts):
        texts = [part.text for part in parts if isinstance(part, TextPart)]
        if texts or result.structured_content is None:
            value = "\n".join(texts)
        else:
            value = result.structured_content
    else:
        value = parts
    return ToolOutput(value, is_error=result.is_error, metadata=metadata)


def to_part(block: Any) -> Part:
    """One content block as a part, its annotations kept under :data:`ANNOTATIONS_KEY`."""
    part = _content_part(block)
    annotations = getattr(block, "annotations", None)
    if not isinstance(annotations, mcp_types.Annotations):
        return part
    kept = annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not kept:
        return part
    return attrs.evolve(part, metadata={**part.metadata, ANNOTATIONS_KEY: kept})


def _content_part(block: Any) -> Part:
    if isinstance(block, mcp_types.TextContent):
        return TextPart(block.text)
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return MediaPart(block.mime_type, data=block.data)
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            meta = {URI_KEY: str(resource.uri)}
            return TextPart(resource.text, metadata=meta)
        return FilePart(
            _file_name(str(resource.uri)),
            mime_type=resource.mime_type,
            data=resource.blob,
            uri=str(resource.uri),
        )
    if isinstance(block, mcp_types.ResourceLink):
        return FilePart(block.name, mime_type=block.mime_type, uri=str(block.uri))
    kind = getattr(block, "type", type(block).__name__)
    return TextPart(f"[unsupported MCP content block of type {kind!r}]")


def _file_name(uri: str) -> str | None:
    tail = uri.rstrip("/").rsplit("/", 1)[-1]
    return tail or None
