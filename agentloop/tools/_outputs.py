"""A tool's return value as a result that can always be stored: JSON rules and the limit.

Conversion rules (``docs/tools.md`` lists them for users):

- ``str``, ``bool``, ``None`` stay; ``int`` stays (one with more than 4,000
  digits is refused); a finite ``float`` stays, ``NaN`` and the infinities
  become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
- an ``Enum`` member becomes its value; ``datetime``/``date``/``time`` their
  ISO text; ``UUID``, ``Decimal``, ``Fraction`` and paths their ``str``;
- ``bytes`` that are UTF-8 become that text (other bytes are refused);
- ``list``/``tuple`` become lists, ``set``/``frozenset`` lists sorted by their
  JSON text; attrs instances and dataclasses become objects of their fields;
- mapping keys that are ``str`` stay, ``int``/``float``/``bool``/``None``/enum
  keys become text as :func:`json.dumps` writes them; other keys, and two
  keys that become the same text, are refused;
- anything else, nesting deeper than 100 levels and reference cycles are
  refused: the call's result is then an error naming the problem and where.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import fractions
import json
import math
import pathlib
import uuid
from collections.abc import Mapping
from enum import Enum
from typing import Any

import attrs

from ..core._converter import make_converter
from ..core._items import (
    CustomPart,
    FilePart,
    MediaPart,
    StructuredPart,
    TextPart,
    ToolResultPart,
)
from ._tool import ToolOutput

__all__ = [
    "METADATA_DROPPED_KEY",
    "OutputProblem",
    "json_value",
    "measure",
    "stored_result",
    "to_parts",
]

MAX_DEPTH = 100
_MAX_INT_BITS = 13_000  # ~3,900 decimal digits, under Python's 4,300-digit str() limit
_OUTPUT_PARTS = (TextPart, MediaPart, FilePart, StructuredPart, CustomPart)


class OutputProblem(Exception):
    """A value that has no JSON form; the message names the problem and its JSON path."""


def json_value(value: Any, path: str = "$") -> Any:
    """``value`` converted to plain JSON by the module's rules; raises :class:`OutputProblem`."""
    return _convert(value, path, 0, set())


def _convert(value: Any, path: str, depth: int, active: set[int]) -> Any:
    if depth > MAX_DEPTH:
        raise OutputProblem(f"at {path}: nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, Enum):
        return _convert(value.value, path, depth + 1, active)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            raise OutputProblem(f"at {path}: an integer with more than 3,900 digits")
        return int(value)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise OutputProblem(
                f"at {path}: {len(bytes(value))} bytes that are not UTF-8 text; return a str, "
                "or a MediaPart/FilePart with base64 data"
            ) from None
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return _float(float(value)) if not value.is_finite() else str(value)
    if isinstance(value, uuid.UUID | fractions.Fraction | pathlib.PurePath):
        return str(value)
    marker = id(value)
    if marker in active:
        raise OutputProblem(f"at {path}: a reference cycle (the value contains itself)")
    active.add(marker)
    try:
        return _container(value, path, depth, active)
    finally:
        active.discard(marker)


def _float(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _container(value: Any, path: str, depth: int, active: set[int]) -> Any:
    if isinstance(value, Mapping):
        converted: dict[str, Any] = {}
        for key, item in value.items():
            text = _key(key, path)
            if text in converted:
                raise OutputProblem(f"at {path}: two keys become the same text {text!r}")
            converted[text] = _convert(item, f"{path}.{text}", depth + 1, active)
        return converted
    if isinstance(value, list | tuple):
        return [_convert(item, f"{path}[{i}]", depth + 1, active) for i, item in enumerate(value)]
    if isinstance(value, set | frozenset):
        items = [_convert(item, f"{path}[]", depth + 1, active) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if attrs.has(type(value)):
        fields = {f.name: getattr(value, f.name) for f in attrs.fields(type(value))}
        return _container(fields, path, depth, active)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _container(fields, path, depth, active)
    raise OutputProblem(
        f"at {path}: an object of type {type(value).__name__} has no JSON form; return a str, "
        "a number, a bool, None, a list, a dict, an attrs class or a dataclass"
    )


def _key(key: Any, path: str) -> str:
    if isinstance(key, Enum):
        key = key.value
    if isinstance(key, str):
        return str(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise OutputProblem(
        f"at {path}: a key of type {type(key).__name__} ({_short(key)}); keys must be "
        "strings (numbers, booleans and None are converted)"
    )


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:60] + "..."


def is_part_list(value: Any) -> bool:
    """Whether ``value`` is a non-empty list or tuple made only of agentloop parts."""
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(
            attrs.has(type(part)) and type(part).__module__.startswith("agentloop.")
            for part in value
        )
    )


def _is_part(value: Any) -> bool:
    kind = type(value)
    return attrs.has(kind) and kind.__module__.startswith("agentloop.core.")


def to_parts(value: list[Any] | tuple[Any, ...]) -> list[Any]:
    """A tool's part list checked: each part of a kind a tool may return, every field of
    the type it must have, ``bytes`` data base64-encoded, values and metadata as JSON."""
    parts: list[Any] = []
    for index, part in enumerate(value):
        path = f"$[{index}]"
        if not isinstance(part, _OUTPUT_PARTS):
            raise OutputProblem(
                f"at {path}: a {type(part).__name__}; a tool may return text, media, file, "
                "structured and custom parts"
            )
        metadata = metadata_value(part.metadata, f"{path}.metadata")
        if isinstance(part, TextPart):
            parts.append(TextPart(_text(part.text, f"{path}.text"), metadata=metadata))
        elif isinstance(part, MediaPart):
            parts.append(
                MediaPart(
                    _text(part.mime_type, f"{path}.mime_type"),
                    data=_data(part.data, f"{path}.data"),
                    uri=_optional_text(part.uri, f"{path}.uri"),
                    metadata=metadata,
                )
            )
        elif isinstance(part, FilePart):
            parts.append(
                FilePart(
                    _optional_text(part.name, f"{path}.name"),
                    mime_type=_optional_text(part.mime_type, f"{path}.mime_type"),
                    data=_data(part.data, f"{path}.data"),
                    uri=_optional_text(part.uri, f"{path}.uri"),
                    metadata=metadata,
                )
            )
        elif isinstance(part, StructuredPart):
            parts.append(
                StructuredPart(
                    json_value(part.value, f"{path}.value"),
                    schema=json_value(part.schema, f"{path}.schema"),
                    metadata=metadata,
                )
            )
        else:
            parts.append(
                CustomPart(
                    _text(part.kind, f"{path}.kind"),
                    json_value(part.value, f"{path}.value"),
                    metadata=metadata,
                )
            )
    return parts


def metadata_value(metadata: Any, path: str = "$.metadata") -> dict[str, Any]:
    """Metadata as a JSON object with string keys; raises :class:`OutputProblem`."""
    if not isinstance(metadata, Mapping):
        raise OutputProblem(f"at {path}: metadata must be a mapping, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise OutputProblem(
                f"at {path}: a metadata key of type {type(key).__name__} ({_short(key)}); "
                "metadata keys must be strings"
            )
    converted = json_value(dict(metadata), path)
    assert isinstance(converted, dict)
    return converted


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise OutputProblem(f"at {path}: expected a str, got {type(value).__name__}")
    return str(value)


def _optional_text(value: Any, path: str) -> str | None:
    return None if value is None else _text(value, path)


def _data(value: Any, path: str) -> str | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return _optional_text(value, path)


def measure(part: Any) -> int:
    """How many characters of the output limit a (checked) part uses."""
    if isinstance(part, TextPart):
        return len(part.text)
    if isinstance(part, MediaPart | FilePart):
        return len(part.data or "") + len(part.uri or "")
    value = part.value
    return len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False))


_RESERVED_PREFIX = "agentloop."


def stored_result(call_id: str, value: Any, limit: int | None) -> ToolResultPart:
    """The result for a tool's return ``value``: converted, limited, checked to store.

    Raises :class:`OutputProblem` naming what cannot be stored.
    """
    fits = limit is None or (limit >= 2 and len(value) <= limit) if type(value) is str else False
    if fits and type(call_id) is str:
        # The usual result, text within the limit: what the steps below give (no
        # conversion, no cut, no metadata; "{}" fits any limit >= 2), built directly.
        return ToolResultPart(call_id, value, False)
    is_error = False
    metadata: dict[str, Any] = {}
    if isinstance(value, ToolOutput):
        if not isinstance(value.is_error, bool):
            raise OutputProblem(
                f"ToolOutput.is_error must be a bool, got {type(value.is_error).__name__}"
            )
        is_error = value.is_error
        metadata = metadata_value(value.metadata)
        reserved = sorted(key for key in metadata if key.startswith(_RESERVED_PREFIX))
        if reserved:
            raise OutputProblem(
                f"at $.metadata: the keys {', '.join(map(repr, reserved))} are reserved for "
                "agentloop; use another prefix"
            )
        value = value.value
    output: Any
    if is_part_list(value):
        output = _limit_parts(to_parts(value), limit)
    else:
        output = _truncate(json_value(value), limit)
    if limit is not None:
        size = len(json.dumps(metadata, ensure_ascii=False)) if metadata else len("{}")
        if size > limit:
            metadata = {
                METADATA_DROPPED_KEY: f"the tool's metadata was {size} characters, over the "
                f"output limit of {limit}; it was dropped"
            }
    if not metadata:
        result = ToolResultPart(call_id, output, is_error)  # the shared empty metadata
        if type(output) is str and type(call_id) is str:
            return result  # text and an id: a save and a load give it back unchanged
    else:
        result = ToolResultPart(call_id, output, is_error, metadata=metadata)
    _check_storable(result)
    return result


_CONVERTER = make_converter()
"""The core layer's converter: a result holds only core types."""

METADATA_DROPPED_KEY = "agentloop.metadata_dropped"
"""Result metadata key: why the tool's own metadata was dropped (it was too large)."""


def _check_storable(result: ToolResultPart) -> None:
    """Raise :class:`OutputProblem` unless ``result`` survives a save and a load unchanged."""
    try:
        text = json.dumps(_CONVERTER.unstructure(result), allow_nan=False, ensure_ascii=False)
        back: ToolResultPart = _CONVERTER.structure(json.loads(text), ToolResultPart)
    except Exception as error:
        raise OutputProblem(f"it cannot be saved: {type(error).__name__}: {error}") from None
    if back != result:
        raise OutputProblem("it does not read back as it was written")


def _truncate(value: Any, limit: int | None) -> Any:
    """``value``, or its text cut to ``limit`` characters with a marker saying how much."""
    if limit is None:
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= limit:
        return value
    cut = len(text) - limit
    return f"{text[:limit]}\n[output truncated: {cut} of {len(text)} characters cut]"


def _limit_parts(parts: list[Any], limit: int | None) -> list[Any]:
    """``parts`` cut to ``limit`` characters in all (text, media data, JSON values): the
    part that crosses the limit is cut if it is text and left out otherwise, later parts
    are left out, and a text part says how much was cut."""
    if limit is None:
        return parts
    sizes = [measure(part) for part in parts]
    total = sum(sizes)
    if total <= limit:
        return parts
    kept: list[Any] = []
    budget = limit
    omitted = 0
    for part, size in zip(parts, sizes, strict=True):
        if size <= budget:
            kept.append(part)
            budget -= size
            continue
        if isinstance(part, TextPart) and budget > 0:
            kept.append(TextPart(part.text[:budget], metadata=part.metadata))
            budget = 0
            continue
        budget = 0
        omitted += 1
    left_out = f"; {omitted} part(s) left out" if omitted else ""
    kept.append(
        TextPart(
            f"[output truncated: {total - limit} of {total} characters cut (text, media and "
            f"structured parts count together){left_out}]"
        )
    )
    return kept
