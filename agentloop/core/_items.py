"""The transcript data model: items, parts, usage and finish reasons.

Every class here is a frozen attrs value. Metadata maps and JSON payloads are
plain ``dict``/``list`` values that the library never mutates after
construction; treat them as read-only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeAlias

import attrs

__all__ = [
    "OUTCOME_KEY",
    "CustomPart",
    "FilePart",
    "FinishReason",
    "Item",
    "ItemKind",
    "MediaPart",
    "Metadata",
    "Part",
    "PartKind",
    "ReasoningPart",
    "ResultOutcome",
    "StructuredPart",
    "TextPart",
    "ToolCallPart",
    "ToolResultOutput",
    "ToolResultPart",
    "Usage",
    "result_outcome",
]

Metadata: TypeAlias = Mapping[str, Any]
"""Free-form, JSON-compatible metadata. Keys written by agentloop start with ``agentloop.``."""

OUTCOME_KEY = "agentloop.outcome"
"""Metadata key that marks a tool result the driver wrote itself (see :class:`ResultOutcome`)."""

_EMPTY: Metadata = {}


def _empty_metadata() -> Metadata:
    return _EMPTY


class ItemKind(StrEnum):
    """Who an item comes from, which decides how adapters render it."""

    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    CONTEXT = "context"
    NOTIFICATION = "notification"


class PartKind(StrEnum):
    """The kind of a part, as announced by a streaming ``BeginPart`` delta."""

    TEXT = "text"
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    STRUCTURED = "structured"
    MEDIA = "media"
    FILE = "file"
    CUSTOM = "custom"


class FinishReason(StrEnum):
    """Why a model turn (or a whole driver turn) ended."""

    COMPLETED = "completed"
    TOOL_CALL = "tool_call"
    MAX_TOKENS = "max_tokens"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"
    ERROR = "error"
    LIMIT_REACHED = "limit_reached"
    OTHER = "other"


class ResultOutcome(StrEnum):
    """What really happened to a call whose result the driver or executor wrote.

    Stored under :data:`OUTCOME_KEY` in the result's metadata, so a reader can
    tell a repair from a real tool result. Real results carry no outcome.
    """

    DENIED = "denied"
    PERMISSION_DENIED = "permission_denied"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    TIMED_OUT = "timed_out"
    DETACHED = "detached"
    BACKGROUND = "background"
    IN_DOUBT = "in_doubt"
    INVALID_INPUT = "invalid_input"
    UNKNOWN_TOOL = "unknown_tool"
    FAILED = "failed"
    LIMIT_REACHED = "limit_reached"


@attrs.frozen(weakref_slot=False)
class TextPart:
    """Plain text."""

    text: str
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen(weakref_slot=False)
class ReasoningPart:
    """Model reasoning ("thinking") text; ``redacted`` when the provider hid it."""

    text: str
    redacted: bool = attrs.field(default=False, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen(weakref_slot=False)
class ToolCallPart:
    """The model asks for tool ``name`` to run with ``input`` (a JSON value)."""

    id: str
    name: str
    input: Any
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen(weakref_slot=False)
class StructuredPart:
    """A JSON value, optionally with the JSON Schema it follows."""

    value: Any
    schema: Any = attrs.field(default=None, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen(weakref_slot=False)
class MediaPart:
    """Image, audio or video, inline (``data``, base64) or by ``uri``."""

    mime_type: str
    data: str | None = attrs.field(default=None, kw_only=True)
    uri: str | None = attrs.field(default=None, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen(weakref_slot=False)
class FilePart:
    """A file, inline (``data``, base64) or by ``uri``."""

    name: str | None
    mime_type: str | None = attrs.field(default=None, kw_only=True)
    data: str | None = attrs.field(default=None, kw_only=True)
    uri: str | None = attrs.field(default=None, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


@attrs.frozen(weakref_slot=False)
class CustomPart:
    """A provider- or host-specific part that agentloop carries through untouched."""

    kind: str
    value: Any = None
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


ToolResultOutput: TypeAlias = Any
"""A tool's output: ``str`` for text, a list of parts, or any other JSON value."""


@attrs.frozen(weakref_slot=False)
class ToolResultPart:
    """The one answer to tool call ``call_id``.

    ``output`` is a ``str`` for text, a ``list`` of parts, or any other JSON
    value for structured output.
    """

    call_id: str
    output: ToolResultOutput
    is_error: bool = False
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)


Part: TypeAlias = (
    TextPart
    | ReasoningPart
    | ToolCallPart
    | ToolResultPart
    | StructuredPart
    | MediaPart
    | FilePart
    | CustomPart
)
"""Any part of an item."""


def result_outcome(result: ToolResultPart) -> ResultOutcome | None:
    """The typed outcome of a synthesized result, or ``None`` for a real tool result."""
    value = result.metadata.get(OUTCOME_KEY)
    return ResultOutcome(value) if value is not None else None


@attrs.frozen(weakref_slot=False)
class Usage:
    """Token counts and cost reported by a model call. Instances add up with ``+``."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = None
        if self.cost is not None or other.cost is not None:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            cost,
        )


def _to_parts(parts: Sequence[Part]) -> tuple[Part, ...]:
    return tuple(parts)


@attrs.frozen(weakref_slot=False)
class Item:
    """One transcript entry: a kind and its parts.

    ``usage`` and ``finish_reason`` are stamped by the driver on assistant
    items; ``created_at`` (seconds since the epoch) on every appended item.
    """

    kind: ItemKind
    parts: tuple[Part, ...] = attrs.field(converter=_to_parts)
    id: str | None = attrs.field(default=None, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
    usage: Usage | None = attrs.field(default=None, kw_only=True)
    finish_reason: FinishReason | None = attrs.field(default=None, kw_only=True)
    created_at: float | None = attrs.field(default=None, kw_only=True)

    @classmethod
    def text(cls, kind: ItemKind, text: str) -> Item:
        """An item of ``kind`` holding one text part."""
        return cls(kind, (TextPart(text),))

    @classmethod
    def notification(cls, text: str) -> Item:
        """An out-of-band notification item (e.g. a background task finished)."""
        return cls(ItemKind.NOTIFICATION, (TextPart(text),))

    @property
    def text_content(self) -> str:
        """The item's text parts joined with newlines."""
        return "\n".join(part.text for part in self.parts if isinstance(part, TextPart))

    def tool_calls(self) -> Iterator[ToolCallPart]:
        """The item's tool-call parts, in order."""
        return (part for part in self.parts if isinstance(part, ToolCallPart))

    def tool_results(self) -> Iterator[ToolResultPart]:
        """The item's tool-result parts, in order."""
        return (part for part in self.parts if isinstance(part, ToolResultPart))
