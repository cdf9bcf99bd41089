"""``StreamAccumulator``: provider stream fragments in, deltas and the final item out.

Plain synchronous code, no I/O. An adapter's translator calls one method per
fragment it reads (text, reasoning, a tool call's name or argument text) under
a *key* of its own (a content-block index, a tool-call index...). The
accumulator announces each new part with ``BeginPart``, streams text with
``AppendText``, and on commit emits the assembled part (a tool call is
announced as a ``ToolCallPart`` event first, then committed). Parts keep the
order in which they first appeared.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..core._delta import AppendText, BeginPart, CommitPart
from ..core._errors import ProviderError, ProviderErrorKind
from ..core._items import (
    FilePart,
    FinishReason,
    Item,
    ItemKind,
    MediaPart,
    Metadata,
    Part,
    PartKind,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..core._synthesized_results import RAW_ARGUMENTS_KEY
from ._protocol import ModelEvent, ModelTurnResult

__all__ = ["StreamAccumulator", "parse_tool_arguments"]

_INVALID = ProviderErrorKind.INVALID_RESPONSE


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@attrs.define
class _OpenPart:
    part_id: str
    kind: PartKind
    chunks: list[str] = attrs.field(factory=list)
    call_id: str = ""
    name: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict)
    complete: Part | None = None
    committed: Part | None = None


def parse_tool_arguments(raw: str) -> tuple[Any, Metadata]:
    """A tool call's ``(input, metadata)`` from its argument text.

    Empty text is ``{}``. Text that is not JSON (``NaN`` and ``Infinity``
    included) is kept as the input itself,
    with the raw text under ``RAW_ARGUMENTS_KEY`` in the metadata, so the tool
    executor answers the call with a validation error the model can read.
    """
    if not raw.strip():
        return {}, {}
    try:
        return json.loads(raw, parse_constant=_reject_constant), {}
    except (json.JSONDecodeError, RecursionError):
        return raw, {RAW_ARGUMENTS_KEY: raw}


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; the arguments are kept as raw text instead
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


class StreamAccumulator:
    """Builds one assistant turn from streamed fragments.

    Every method returns the model events to stream now. ``new_call_id`` makes
    the id of a tool call the provider sent without one (default:
    ``call_`` plus 24 random hex digits). ``provider`` labels error messages.
    """

    def __init__(
        self, *, provider: str = "model", new_call_id: Callable[[], str] | None = None
    ) -> None:
        self._provider = provider
        self._new_call_id = new_call_id or _new_call_id
        self._parts: dict[str, _OpenPart] = {}
        self._counter = 0
        self.usage: Usage | None = None
        """The latest usage the provider reported (replace it, don't add)."""

    # -- fragments -------------------------------------------------------------------------

    def text(self, key: str, fragment: str) -> list[ModelEvent]:
        """Append ``fragment`` to text part ``key`` (begun on its first non-empty fragment)."""
        return self._append(key, PartKind.TEXT, fragment)

    def reasoning(self, key: str, fragment: str) -> list[ModelEvent]:
        """Append ``fragment`` to reasoning part ``key``."""
        return self._append(key, PartKind.REASONING, fragment)

    def tool_call(
        self,
        key: str,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str = "",
    ) -> list[ModelEvent]:
        """Start or extend tool call ``key``.

        The first non-empty ``id`` and ``name`` win (some servers repeat the
        name in every chunk); ``arguments`` text is appended.
        """
        events: list[ModelEvent] = []
        part = self._parts.get(key)
        if part is None:
            part = self._open(key, PartKind.TOOL_CALL)
            events.append(BeginPart(part.part_id, PartKind.TOOL_CALL))
        self._check_open(key, part, PartKind.TOOL_CALL)
        if id and not part.call_id:
            part.call_id = id
        if name and not part.name:
            part.name = name
        if arguments:
            part.chunks.append(arguments)
            events.append(AppendText(part.part_id, arguments))
        return events

    def begin(self, key: str, kind: PartKind) -> list[ModelEvent]:
        """Begin an empty part ``key`` of ``kind`` now (no-op if it exists).

        Text and reasoning parts otherwise begin on their first non-empty
        fragment; begin one early to attach metadata to it.
        """
        if key in self._parts:
            self._check_open(key, self._parts[key], kind)
            return []
        return [BeginPart(self._open(key, kind).part_id, kind)]

    def complete_part(self, key: str, part: Part) -> list[ModelEvent]:
        """Add a part that arrived whole (e.g. redacted reasoning, a provider block), committed."""
        if key in self._parts:
            raise ProviderError(f"{self._provider}: stream repeated part {key!r}", kind=_INVALID)
        kind = _kind_of(part)
        state = self._open(key, kind)
        state.complete = part
        return [BeginPart(state.part_id, kind), *self.commit(key)]

    def update_metadata(self, key: str, values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the metadata part ``key`` will be committed with."""
        part = self._parts.get(key)
        if part is None or part.committed is not None:
            raise ProviderError(
                f"{self._provider}: stream sent metadata for part {key!r}, which is not open",
                kind=_INVALID,
            )
        part.metadata.update(values)

    def is_open(self, key: str) -> bool:
        """Whether part ``key`` was begun and not committed yet."""
        part = self._parts.get(key)
        return part is not None and part.committed is None

    # -- commits ---------------------------------------------------------------------------

    def commit(self, key: str) -> list[ModelEvent]:
        """Finish part ``key``; a tool call is announced as a ``ToolCallPart`` first.

        Committing an unknown or already committed key does nothing.
        """
        state = self._parts.get(key)
        if state is None or state.committed is not None:
            return []
        part = self._assemble(key, state)
        state.committed = part
        events: list[ModelEvent] = []
        if isinstance(part, ToolCallPart) and state.complete is None:
            events.append(part)
        events.append(CommitPart(state.part_id, part))
        return events

    def commit_all(self) -> list[ModelEvent]:
        """Finish every open part, in order of appearance."""
        events: list[ModelEvent] = []
        for key in list(self._parts):
            events.extend(self.commit(key))
        return events

    @property
    def parts(self) -> tuple[Part, ...]:
        """The committed parts, in order of appearance."""
        return tuple(p.committed for p in self._parts.values() if p.committed is not None)

    @property
    def has_tool_calls(self) -> bool:
        """Whether any tool call was begun."""
        return any(p.kind is PartKind.TOOL_CALL for p in self._parts.values())

    def result(
        self,
        finish_reason: FinishReason,
        *,
        model: str | None = None,
        response_id: str | None = None,
        metadata: Metadata | None = None,
    ) -> list[ModelEvent]:
        """Commit what is open, then ``Usage`` (if any), then the ``ModelTurnResult``."""
        events = self.commit_all()
        parts = self.parts
        items = (Item(ItemKind.ASSISTANT, parts),) if parts else ()
        if self.usage is not None:
            events.append(self.usage)
        events.append(
            ModelTurnResult(
                finish_reason,
                items,
                self.usage,
                metadata=dict(metadata or {}),
                model=model,
                response_id=response_id,
            )
        )
        return events

    def cancelled(
        self, *, model: str | None = None, response_id: str | None = None
    ) -> list[ModelEvent]:
        """A ``CANCELLED`` result keeping the text and reasoning so far, never a tool call.

        A cancelled turn must not run tools, so every tool call (finished or
        not) is left out of the item.
        """
        events: list[ModelEvent] = []
        for key, state in list(self._parts.items()):
            if state.kind is PartKind.TOOL_CALL:
                del self._parts[key]
            else:
                events.extend(self.commit(key))
        return events + self.result(FinishReason.CANCELLED, model=model, response_id=response_id)

    # -- internals -------------------------------------------------------------------------

    def _open(self, key: str, kind: PartKind) -> _OpenPart:
        part = _OpenPart(f"part-{self._counter}", kind)
        self._counter += 1
        self._parts[key] = part
        return part

    def _check_open(self, key: str, part: _OpenPart, kind: PartKind) -> None:
        if part.kind is not kind:
            raise ProviderError(
                f"{self._provider}: stream sent {kind.value} content for part {key!r}, "
                f"which is a {part.kind.value} part",
                kind=_INVALID,
            )
        if part.committed is not None:
            raise ProviderError(
                f"{self._provider}: stream sent more {kind.value} content for part {key!r} "
                "after it was complete",
                kind=_INVALID,
            )

    def _append(self, key: str, kind: PartKind, fragment: str) -> list[ModelEvent]:
        if not fragment:
            return []
        events: list[ModelEvent] = []
        part = self._parts.get(key)
        if part is None:
            part = self._open(key, kind)
            events.append(BeginPart(part.part_id, kind))
        self._check_open(key, part, kind)
        part.chunks.append(fragment)
        events.append(AppendText(part.part_id, fragment))
        return events

    def _assemble(self, key: str, state: _OpenPart) -> Part:
        if state.complete is not None:
            return state.complete
        text = "".join(state.chunks)
        metadata: Metadata = dict(state.metadata)
        if state.kind is PartKind.TEXT:
            return TextPart(text, metadata=metadata)
        if state.kind is PartKind.REASONING:
            return ReasoningPart(text, metadata=metadata)
        if not state.name:
            raise ProviderError(
                f"{self._provider}: stream sent tool call {key!r} without a function name",
                kind=_INVALID,
            )
        call_input, extra = parse_tool_arguments(text)
        return ToolCallPart(
            state.call_id or self._new_call_id(),
            state.name,
            call_input,
            metadata={**metadata, **extra},
        )


def _kind_of(part: Part) -> PartKind:
    kinds: dict[type, PartKind] = {
        TextPart: PartKind.TEXT,
        ReasoningPart: PartKind.REASONING,
        ToolCallPart: PartKind.TOOL_CALL,
        ToolResultPart: PartKind.TOOL_RESULT,
        StructuredPart: PartKind.STRUCTURED,
        MediaPart: PartKind.MEDIA,
        FilePart: PartKind.FILE,
    }
    return kinds.get(type(part), PartKind.CUSTOM)
