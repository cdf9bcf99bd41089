"""Responses API output items to parts: what each output item's events make (pure, no I/O).

:class:`OutputItems` holds the items a response announced (by ``output_index``) and
assembles their parts in a :class:`StreamAccumulator`: a ``message``'s ``output_text``
and ``refusal`` content parts become text parts (key ``item-I-C``), a ``function_call``
a tool call, a ``reasoning`` item one reasoning part (summary or raw reasoning text, a
paragraph per summary part) carrying its id and ``encrypted_content``, and an item of
another type a ``CustomPart("openai.<type>", item)``. A ``done`` event's whole text
completes the deltas (a server may send none); one that contradicts them is malformed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..core._items import CustomPart, PartKind
from ..model._accumulator import StreamAccumulator
from ..model._protocol import ModelEvent
from ._responses_render import (
    ANNOTATIONS_KEY,
    ENCRYPTED_CONTENT_KEY,
    ITEM_ID_KEY,
    PHASE_KEY,
    REASONING_ID_KEY,
    REASONING_TEXT_KEY,
    REFUSAL_KEY,
    SUMMARY_KEY,
)
from ._responses_wire import protocol_error, settled_rest, summary_texts
from ._transport import compact_json
from ._wire import get_index, get_list, get_str, malformed, require_mapping

__all__ = ["OutputItem", "OutputItems"]

_P = "OpenAI"
_SEPARATOR = "\n\n"


@attrs.define
class OutputItem:
    """One announced output item: its type, id, the item as added, and how far it got."""

    type: str
    id: str | None
    item: dict[str, Any]
    done: bool = False
    text_keys: list[str] = attrs.field(factory=list)
    segment: tuple[str, int] | None = None


class OutputItems:
    """The output items of one response and the parts they make (see the module doc)."""

    def __init__(self, *, new_call_id: Callable[[], str] | None = None) -> None:
        self.accumulator = StreamAccumulator(provider=_P, new_call_id=new_call_id)
        self.refused = False
        """Whether a refusal content part was streamed."""
        self._items: dict[int, OutputItem] = {}
        self._streamed: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self._items)

    def __contains__(self, index: object) -> bool:
        return index in self._items

    def index_of(self, item_id: str | None) -> int:
        """The index of the item with ``item_id``, or (``None``, unknown) the next free one."""
        for index, state in self._items.items():
            if item_id is not None and state.id == item_id:
                return index
        return max(self._items, default=-1) + 1

    def append_arguments(self, index: int, delta: str) -> list[ModelEvent]:
        """Stream a piece of function call ``index``'s arguments."""
        key = f"item-{index}"
        self._streamed[key] = self._streamed.get(key, "") + delta
        return self.accumulator.tool_call(key, arguments=delta)

    def add(self, index: int, item: dict[str, Any], where: str) -> list[ModelEvent]:
        """Announce output item ``index`` (``response.output_item.added``)."""
        if index in self._items:
            raise protocol_error(f"{where}: output item {index} was announced twice")
        kind = get_str(item, "type", where, _P)
        if not kind:
            raise malformed(_P, f"{where}.type", "a string", item.get("type"))
        self._items[index] = OutputItem(kind, get_str(item, "id", where, _P), dict(item))
        key = f"item-{index}"
        if kind == "function_call":
            return self.accumulator.tool_call(
                key,
                id=get_str(item, "call_id", where, _P),
                name=get_str(item, "name", where, _P),
                arguments=self._arguments(key, item, where),
            )
        if kind == "reasoning":
            return self.accumulator.begin(key, PartKind.REASONING)
        return []

    def finish(self, index: int, item: dict[str, Any], where: str) -> list[ModelEvent]:
        """Finish output item ``index`` with its whole ``item`` (``output_item.done``)."""
        state = self._items[index]
        if state.done:
            raise protocol_error(f"{where}: output item {index} was finished twice")
        kind = get_str(item, "type", where, _P)
        if kind != state.type:
            raise protocol_error(f"{where}: output item {index} was announced as {state.type!r}")
        state.done = True
        finishers = {
            "message": self._message_done,
            "function_call": self._call_done,
            "reasoning": self._reasoning_done,
        }
        return finishers.get(kind, self._other_done)(index, state, item, where)

    def _message_done(
        self, index: int, state: OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for position, content in enumerate(get_list(item, "content", where, _P)):
            content_where = f"{where}.content[{position}]"
            content = require_mapping(content, content_where, _P)
            kind = get_str(content, "type", content_where, _P)
            if kind not in ("output_text", "refusal"):
                continue
            field = "text" if kind == "output_text" else "refusal"
            final = get_str(content, field, content_where, _P) or ""
            events += self.settle_text(index, state, position, final, kind == "refusal")
            annotations = get_list(content, "annotations", content_where, _P)
            key = f"item-{index}-{position}"
            if annotations and self.accumulator.is_open(key):
                self.accumulator.update_metadata(key, {ANNOTATIONS_KEY: annotations})
        for key in state.text_keys:
            events += self.accumulator.commit(key)
        return events

    def _call_done(
        self, index: int, state: OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        key = f"item-{index}"
        events = self.accumulator.tool_call(
            key, id=get_str(item, "call_id", where, _P), name=get_str(item, "name", where, _P)
        )
        events += self.settle_arguments(index, self._arguments(None, item, where), where)
        if state.id:
            self.accumulator.update_metadata(key, {ITEM_ID_KEY: state.id})
        return events + self.accumulator.commit(key)

    def _reasoning_done(
        self, index: int, state: OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        key = f"item-{index}"
        summaries = summary_texts(item, "summary", "summary_text", where)
        contents = summary_texts(item, "content", "reasoning_text", where)
        metadata: dict[str, Any] = {REASONING_ID_KEY: state.id} if state.id else {}
        encrypted = get_str(item, "encrypted_content", where, _P)
        encrypted = encrypted or get_str(state.item, "encrypted_content", where, _P)
        if encrypted:  # the done item's: the added item's may be incomplete
            metadata[ENCRYPTED_CONTENT_KEY] = encrypted
        metadata[SUMMARY_KEY] = summaries
        if contents:
            metadata[REASONING_TEXT_KEY] = contents
        events: list[ModelEvent] = []
        if key not in self._streamed:  # nothing was streamed: the item's own text
            text = _SEPARATOR.join(text for text in contents or summaries if text)
            events += self.accumulator.reasoning(key, text)
        self.accumulator.update_metadata(key, metadata)
        return events + self.accumulator.commit(key)

    def _other_done(
        self, index: int, state: OutputItem, item: dict[str, Any], where: str
    ) -> list[ModelEvent]:
        part = CustomPart(f"openai.{state.type}", dict(item))
        return self.accumulator.complete_part(f"item-{index}", part)

    def locate(self, payload: dict[str, Any], where: str, kind: str) -> tuple[int, OutputItem]:
        """The announced, unfinished output item of ``kind`` the event addresses."""
        if payload.get("output_index") is None and isinstance(payload.get("item_id"), str):
            index = self.index_of(payload["item_id"])
        else:
            index = get_index(payload, "output_index", where, _P)
        state = self._items.get(index)
        if state is None:
            raise protocol_error(
                f"{where} for output item {payload.get('output_index', payload.get('item_id'))!r}, "
                "which the stream never announced with response.output_item.added"
            )
        if state.done:
            raise protocol_error(
                f"{where} for output item {index} after its response.output_item.done"
            )
        if state.type != kind:
            raise protocol_error(f"{where} for output item {index}, which is a {state.type!r} item")
        return index, state

    def append_text(
        self, index: int, state: OutputItem, position: int, delta: str, refusal: bool
    ) -> list[ModelEvent]:
        """Stream ``delta`` into content part ``position`` of message ``index``."""
        key = f"item-{index}-{position}"
        if not delta:
            return []
        events: list[ModelEvent] = []
        if key not in state.text_keys:
            state.text_keys.append(key)
            events += self.accumulator.begin(key, PartKind.TEXT)
            metadata: dict[str, Any] = {ITEM_ID_KEY: state.id} if state.id else {}
            phase = state.item.get("phase")
            if isinstance(phase, str) and phase:
                metadata[PHASE_KEY] = phase
            if refusal:
                metadata[REFUSAL_KEY] = True
                self.refused = True
            self.accumulator.update_metadata(key, metadata)
        self._streamed[key] = self._streamed.get(key, "") + delta
        return events + self.accumulator.text(key, delta)

    def settle_text(
        self, index: int, state: OutputItem, position: int, final: str, refusal: bool
    ) -> list[ModelEvent]:
        """Append what ``final`` (a ``done`` event's whole text) adds to the deltas."""
        key = f"item-{index}-{position}"
        rest = settled_rest(self._streamed.get(key, ""), final, f"output item {index}'s text")
        return self.append_text(index, state, position, rest, refusal)

    def settle_arguments(self, index: int, final: str, where: str) -> list[ModelEvent]:
        """Append what ``final`` (the whole arguments at the end) adds to the deltas."""
        key = f"item-{index}"
        rest = settled_rest(self._streamed.get(key, ""), final, f"{where}'s arguments")
        if not rest:
            return []
        self._streamed[key] = final
        return self.accumulator.tool_call(key, arguments=rest)

    def append_reasoning(
        self, index: int, state: OutputItem, segment: tuple[str, int], delta: str | None
    ) -> list[ModelEvent]:
        """Stream reasoning text; each new summary part or content part starts a paragraph."""
        if not delta:
            return []
        key = f"item-{index}"
        if state.segment not in (None, segment) and self._streamed.get(key):
            delta = _SEPARATOR + delta
        state.segment = segment
        self._streamed[key] = self._streamed.get(key, "") + delta
        return self.accumulator.reasoning(key, delta)

    def _arguments(self, key: str | None, item: dict[str, Any], where: str) -> str:
        arguments = item.get("arguments")
        if arguments is None:
            return ""
        if isinstance(arguments, dict):
            arguments = compact_json(arguments)  # a few servers send the object itself
        if not isinstance(arguments, str):
            raise malformed(_P, f"{where}.arguments", "a string, an object or null", arguments)
        if key is not None and arguments:
            self._streamed[key] = arguments
        return arguments
