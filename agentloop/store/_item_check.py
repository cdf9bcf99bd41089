"""A fast check of the items a save encodes afresh, for the shapes the driver writes.

``usual_item_answers`` decides the usual items (text, tool-call and tool-result
parts, exact types, no unknown key) without structuring them; anything else
is left to ``loop._converter.structure(data, Item)``, which decides it and words the
refusal. It accepts only what structuring accepts (a hypothesis property in
``tests/store/test_item_check.py``): a change to ``Item``'s rules must be
mirrored here or the property fails.
"""

from __future__ import annotations

from typing import Any

from ..core._items import FinishReason, ItemKind

__all__ = ["NO_ANSWERS", "usual_item_answers"]

NO_ANSWERS: frozenset[str] = frozenset()
"""An item that answers no call."""

_ITEM_KEYS = frozenset({"kind", "parts", "id", "metadata", "usage", "finish_reason", "created_at"})
_ITEM_KINDS = frozenset(kind.value for kind in ItemKind)
_FINISH_REASONS = frozenset(reason.value for reason in FinishReason)
_USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
_USAGE_KEYS = frozenset({*_USAGE_COUNTS, "cost"})
_TEXT_KEYS = frozenset({"type", "text", "metadata"})
_CALL_KEYS = frozenset({"type", "id", "name", "input", "metadata"})
_RESULT_KEYS = frozenset({"type", "call_id", "output_type", "output", "is_error", "metadata"})


def usual_item_answers(data: dict[str, Any]) -> frozenset[str] | None:
    """The call ids a plain item answers, if it has a shape that surely structures as an ``Item``.

    ``data`` is exact JSON (``_is_plain_json``). Decided here: the shapes the
    driver writes (text, tool-call and tool-result parts; exact types; no
    unknown key), which ``loop._converter.structure(data, Item)`` accepts. ``None``
    for anything else: structuring decides it (and words the refusal).
    """
    kind = data.get("kind")
    if not data.keys() <= _ITEM_KEYS or type(kind) is not str or kind not in _ITEM_KINDS:
        return None
    optional = data.get("id")
    if optional is not None and type(optional) is not str:
        return None
    if type(data.get("metadata", _NO_METADATA)) is not dict:
        return None
    usage = data.get("usage")
    if usage is not None and not _usual_usage(usage):
        return None
    reason = data.get("finish_reason")
    if reason is not None and (type(reason) is not str or reason not in _FINISH_REASONS):
        return None
    created = data.get("created_at")
    if created is not None and type(created) is not float and type(created) is not int:
        return None
    parts = data.get("parts")
    if type(parts) is not list:
        return None
    answered: list[str] | None = None
    for part in parts:
        if type(part) is not dict or type(part.get("metadata", _NO_METADATA)) is not dict:
            return None
        tag = part.get("type")
        if tag == "text":
            if not part.keys() <= _TEXT_KEYS or type(part.get("text")) is not str:
                return None
        elif tag == "tool_call":
            if (
                not part.keys() <= _CALL_KEYS
                or type(part.get("id")) is not str
                or type(part.get("name")) is not str
                or "input" not in part
            ):
                return None
        elif tag == "tool_result":
            call_id = part.get("call_id")
            output_type = part.get("output_type")
            if (
                not part.keys() <= _RESULT_KEYS
                or type(call_id) is not str
                or type(part.get("is_error", False)) is not bool
                or "output" not in part
                or not (
                    output_type == "json" or (output_type == "text" and type(part["output"]) is str)
                )
            ):
                return None
            answered = [call_id] if answered is None else [*answered, call_id]
        else:
            return None
    return NO_ANSWERS if answered is None else frozenset(answered)


_NO_METADATA: dict[str, Any] = {}


def _usual_usage(usage: Any) -> bool:
    if type(usage) is not dict or not usage.keys() <= _USAGE_KEYS:
        return False
    for key in _USAGE_COUNTS:
        if type(usage.get(key, 0)) is not int:
            return False
    cost = usage.get("cost")
    return cost is None or type(cost) is float or type(cost) is int
