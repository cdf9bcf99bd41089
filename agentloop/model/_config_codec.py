"""The model layer's conversion hooks: prompt-cache breakpoints and strategies."""

from __future__ import annotations

from typing import Any, get_origin

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

from ..core._converter import configure_tagged
from ..core._errors import CheckpointError
from ..output._spec import OutputMode, OutputSpec
from ._session_config import (
    AfterItem,
    AfterPart,
    AfterTools,
    AutomaticCache,
    CacheBreakpoint,
    ExplicitCache,
    PromptCacheStrategy,
    SessionConfig,
)

__all__ = ["configure_model"]

_BREAKPOINT_TAGS: dict[type, str] = {
    AfterTools: "tools_end",
    AfterItem: "transcript_item_end",
    AfterPart: "transcript_part_end",
}
_STRATEGY_TAGS: dict[type, str] = {AutomaticCache: "automatic", ExplicitCache: "explicit"}


def configure_model(converter: cattrs.Converter) -> None:
    """Tag the cache breakpoint and strategy unions (on top of ``configure_core``)."""
    configure_tagged(converter, CacheBreakpoint, _BREAKPOINT_TAGS)
    configure_tagged(converter, PromptCacheStrategy, _STRATEGY_TAGS)
    converter.register_unstructure_hook_func(_is_output_spec, _unstructure_output)
    converter.register_structure_hook_func(_is_output_spec, _structure_output)
    converter.register_unstructure_hook(
        SessionConfig,
        make_dict_unstructure_fn(SessionConfig, converter, output=override(omit_if_default=True)),
    )


def _is_output_spec(cls: Any) -> bool:
    return cls is OutputSpec or get_origin(cls) is OutputSpec


_OUTPUT_KEYS = ("name", "schema", "wrapped", "mode", "max_retries", "description")


def _unstructure_output(spec: OutputSpec[Any]) -> dict[str, Any]:
    """An output spec without its Python type (a restore validates against the schema;
    the agent resumed with the same spec gives the type back)."""
    return {
        "name": spec.name,
        "schema": dict(spec.schema),
        "wrapped": spec.wrapped,
        "mode": spec.mode.value,
        "max_retries": spec.max_retries,
        "description": spec.description,
    }


def _structure_output(data: Any, _cls: Any) -> OutputSpec[Any]:
    if not isinstance(data, dict) or sorted(data) != sorted(_OUTPUT_KEYS):
        raise CheckpointError(
            f"an output spec document must have the keys {list(_OUTPUT_KEYS)}, got {data!r}"
        )
    name, schema, wrapped, mode = data["name"], data["schema"], data["wrapped"], data["mode"]
    retries, description = data["max_retries"], data["description"]
    if not (isinstance(name, str) and isinstance(schema, dict) and isinstance(wrapped, bool)
            and isinstance(retries, int) and not isinstance(retries, bool)
            and (description is None or isinstance(description, str))
            and mode in {m.value for m in OutputMode}):  # fmt: skip
        raise CheckpointError(f"the output spec document has a value of the wrong type: {data!r}")
    return OutputSpec(
        name=name,
        schema=schema,
        wrapped=wrapped,
        mode=OutputMode(mode),
        max_retries=retries,
        description=description,
    )
