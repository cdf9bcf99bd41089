"""What a model is told about a tool: name, description, input schema, hints."""

from __future__ import annotations

from typing import Any

import attrs

from ._items import Metadata, _empty_metadata

__all__ = ["ToolAnnotations", "ToolSpec"]


@attrs.frozen
class ToolAnnotations:
    """Advisory hints about a tool's behaviour; policies may act on them."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@attrs.frozen
class ToolSpec:
    """A tool as advertised to the model.

    ``input_schema`` is a JSON Schema object for the call's input.
    ``output_schema`` is informational and never sent to providers.
    """

    name: str
    description: str
    input_schema: Any = attrs.field(factory=lambda: {"type": "object", "properties": {}})
    output_schema: Any = attrs.field(default=None, kw_only=True)
    annotations: ToolAnnotations = attrs.field(factory=ToolAnnotations, kw_only=True)
    metadata: Metadata = attrs.field(default=_empty_metadata(), kw_only=True)
