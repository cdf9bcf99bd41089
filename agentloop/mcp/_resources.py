"""An MCP server's resources and prompts as agentloop values (pure functions).

Resource contents and prompt messages become parts as tool results do
(``_convert``): text a :class:`TextPart` with the URI in its metadata, blobs a
:class:`FilePart`, content blocks through the same conversion, annotations
kept under ``mcp.annotations``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

import attrs
import mcp_types

from ..core._items import FilePart, Metadata, Part, TextPart, _empty_metadata
from ._convert import URI_KEY, to_part

__all__ = [
    "MIME_TYPE_KEY",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptMessage",
    "McpPromptResult",
    "McpResource",
    "McpResourceTemplate",
    "contents_parts",
    "to_prompt",
    "to_prompt_result",
    "to_resource",
    "to_template",
]

MIME_TYPE_KEY = "mcp.mime_type"
"""Part metadata: the MIME type of a text resource's contents, when the server sent one."""


def _annotations(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, mcp_types.Annotations):
        return None
    kept = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return kept or None


@attrs.frozen
class McpResource:
    """One resource a server lists (``resources/list``); read it with ``read_resource(uri)``."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None


@attrs.frozen
class McpResourceTemplate:
    """A family of resources (``resources/templates/list``): fill ``uri_template``
    (RFC 6570) and read the URI."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None


@attrs.frozen
class McpPromptArgument:
    """One argument a prompt takes (always a string)."""

    name: str
    description: str | None = None
    required: bool = False


@attrs.frozen
class McpPrompt:
    """One prompt a server lists (``prompts/list``); get it with ``get_prompt(name, ...)``."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


@attrs.frozen
class McpPromptMessage:
    """One message of a prompt: who says it and what (a part, annotations in its metadata)."""

    role: Literal["user", "assistant"]
    part: Part


@attrs.frozen
class McpPromptResult:
    """A prompt filled in by the server (``prompts/get``)."""

    name: str
    description: str | None
    messages: tuple[McpPromptMessage, ...]
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


def to_resource(resource: mcp_types.Resource) -> McpResource:
    """``resource`` as an :class:`McpResource`."""
    return McpResource(
        str(resource.uri),
        resource.name,
        title=resource.title,
        description=resource.description,
        mime_type=resource.mime_type,
        size=resource.size,
        annotations=_annotations(resource.annotations),
    )


def to_template(template: mcp_types.ResourceTemplate) -> McpResourceTemplate:
    """``template`` as an :class:`McpResourceTemplate`."""
    return McpResourceTemplate(
        template.uri_template,
        template.name,
        title=template.title,
        description=template.description,
        mime_type=template.mime_type,
        annotations=_annotations(template.annotations),
    )


def to_prompt(prompt: mcp_types.Prompt) -> McpPrompt:
    """``prompt`` as an :class:`McpPrompt`."""
    arguments = tuple(
        McpPromptArgument(argument.name, argument.description, bool(argument.required))
        for argument in prompt.arguments or ()
    )
    return McpPrompt(prompt.name, prompt.title, prompt.description, arguments)


def to_prompt_result(name: str, result: mcp_types.GetPromptResult) -> McpPromptResult:
    """``result`` of ``prompts/get name`` as an :class:`McpPromptResult`."""
    messages = tuple(
        McpPromptMessage(message.role, to_part(message.content)) for message in result.messages
    )
    return McpPromptResult(name, result.description, messages)


def contents_parts(server: str, uri: str, result: mcp_types.ReadResourceResult) -> list[Part]:
    """The contents of ``resources/read uri`` as parts; raises ``ValueError`` (naming
    the content) for a blob that is not base64."""
    parts: list[Part] = []
    for index, contents in enumerate(result.contents):
        if isinstance(contents, mcp_types.TextResourceContents):
            meta: dict[str, Any] = {URI_KEY: str(contents.uri)}
            if contents.mime_type is not None:
                meta[MIME_TYPE_KEY] = contents.mime_type
            parts.append(TextPart(contents.text, metadata=meta))
            continue
        try:
            base64.b64decode(contents.blob, validate=True)
        except (binascii.Error, ValueError) as error:
            raise ValueError(
                f"MCP server {server!r} answered resources/read {uri!r} with contents[{index}] "
                f"({contents.uri}) whose blob is not base64: {error}"
            ) from None
        tail = str(contents.uri).rstrip("/").rsplit("/", 1)[-1]
        name, mime = tail or None, contents.mime_type
        parts.append(FilePart(name, mime_type=mime, data=contents.blob, uri=str(contents.uri)))
    return parts
