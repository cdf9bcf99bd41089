"""Tool sources: the registry (a dynamic catalog) and its change events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import attrs

from ..core._errors import InvalidInputError
from ..core._tool_spec import ToolSpec
from ._tool import Tool, current_spec

__all__ = ["ToolCatalogEvent", "ToolRegistry", "ToolSource", "compare_catalogs"]


def _to_names(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(names)


@attrs.frozen
class ToolCatalogEvent:
    """A source's tools changed: names added, removed and changed."""

    source: str
    added: tuple[str, ...] = attrs.field(default=(), converter=_to_names)
    removed: tuple[str, ...] = attrs.field(default=(), converter=_to_names)
    changed: tuple[str, ...] = attrs.field(default=(), converter=_to_names)


def compare_catalogs(
    source: str, before: Mapping[str, ToolSpec], after: Mapping[str, ToolSpec]
) -> ToolCatalogEvent | None:
    """The event that takes catalog ``before`` to ``after`` (specs by name; names sorted),
    or ``None`` if they advertise the same thing. Handy for a custom :class:`ToolSource`."""
    added = sorted(name for name in after if name not in before)
    removed = sorted(name for name in before if name not in after)
    changed = sorted(name for name in after if name in before and before[name] != after[name])
    if not (added or removed or changed):
        return None
    return ToolCatalogEvent(source, added, removed, changed)


@runtime_checkable
class ToolSource(Protocol):
    """Anything that can list, look up and report changes to tools."""

    def specs(self) -> list[ToolSpec]:
        """The specs to advertise now."""
        ...

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        ...

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """Changes since the last drain (the driver drains before each model call)."""
        ...


class ToolRegistry:
    """A mutable set of tools keyed by name: a dynamic catalog.

    ``with_tool`` is for construction and is never reported. Any other change
    to what the registry advertises (``add``, ``remove``, or a tool whose
    ``current_spec()`` now says something else or hides it) is reported by
    :meth:`drain_catalog_events`: one :class:`ToolCatalogEvent` with the net
    difference since the last drain. The driver drains before each model
    call, so the model's next request and the event agree.
    """

    __slots__ = ("__weakref__", "_reported", "_sorted", "_tools", "name")

    def __init__(self, name: str = "registry") -> None:
        if not isinstance(name, str):
            raise InvalidInputError(
                f"ToolRegistry(name) expects the source's name as a str, got "
                f"{type(name).__name__}; add tools with .add(tool) or .with_tool(tool)"
            )
        self.name = name
        self._tools: dict[str, Tool] = {}
        self._sorted: tuple[Tool, ...] | None = None  # the tools by name; None after a change
        # The specs last reported (or added by with_tool), by name: a tuple, not a
        # dict (a dict costs ~200 bytes per registry, a tuple ~70).
        self._reported: tuple[ToolSpec, ...] = ()

    def __repr__(self) -> str:
        return f"<ToolRegistry {self.name!r}: {', '.join(self.names()) or 'no tools'}>"

    def with_tool(self, tool: Tool) -> ToolRegistry:
        """Add (or replace) ``tool`` without reporting it; returns the registry, for chaining."""
        name = tool.spec.name
        self._tools[name] = tool
        self._sorted = None
        reported = {spec.name: spec for spec in self._reported}
        spec = current_spec(tool)
        if spec is None:
            reported.pop(name, None)
        else:
            reported[name] = spec
        self._reported = tuple(reported[name] for name in sorted(reported))
        return self

    def add(self, tool: Tool) -> None:
        """Add or replace ``tool``; reported as added, or as changed if its spec differs."""
        self._tools[tool.spec.name] = tool
        self._sorted = None

    def remove(self, name: str) -> bool:
        """Remove the tool called ``name``; returns whether there was one."""
        self._sorted = None
        return self._tools.pop(name, None) is not None

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        """Tool names, sorted."""
        return sorted(self._tools)

    def specs(self) -> list[ToolSpec]:
        """Current specs of the visible tools, sorted by name."""
        if self._sorted is None:
            self._sorted = tuple(self._tools[name] for name in sorted(self._tools))
        # Asked on every model call: the order is cached, the specs are not
        # (a tool's current_spec() may change at any time).
        specs = []
        for tool in self._sorted:
            spec = current_spec(tool)
            if spec is not None:
                specs.append(spec)
        return specs

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """The net change of the advertised specs since the last drain (none or one event)."""
        specs = self.specs()  # sorted by name, as ``_reported`` is
        reported = self._reported
        if len(specs) == len(reported) and all(
            spec is reported[index] for index, spec in enumerate(specs)
        ):  # the usual case, decided without comparing
            return []
        change = compare_catalogs(
            self.name, {spec.name: spec for spec in reported}, {spec.name: spec for spec in specs}
        )
        self._reported = tuple(specs)
        return [] if change is None else [change]
