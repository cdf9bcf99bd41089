"""Tool sources: the static/dynamic registry and catalog change events."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs

from ..core._tool_spec import ToolSpec
from ._tool import Tool, current_spec

__all__ = ["ToolCatalogEvent", "ToolRegistry", "ToolSource"]


def _to_names(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(names)


@attrs.frozen
class ToolCatalogEvent:
    """A source's tools changed: names added, removed and changed."""

    source: str
    added: tuple[str, ...] = attrs.field(default=(), converter=_to_names)
    removed: tuple[str, ...] = attrs.field(default=(), converter=_to_names)
    changed: tuple[str, ...] = attrs.field(default=(), converter=_to_names)


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
    """A mutable set of tools keyed by name.

    ``with_tool`` is for construction and records no event; ``add`` and
    ``remove`` are runtime changes and are reported as a
    :class:`ToolCatalogEvent` before the next model call.
    """

    def __init__(self, name: str = "registry") -> None:
        self.name = name
        self._tools: dict[str, Tool] = {}
        self._pending: list[ToolCatalogEvent] = []

    def with_tool(self, tool: Tool) -> ToolRegistry:
        """Add (or replace) ``tool`` and return the registry, for chaining."""
        self._tools[tool.spec.name] = tool
        return self

    def add(self, tool: Tool) -> None:
        """Add or replace ``tool``; reported as added or changed."""
        name = tool.spec.name
        existed = name in self._tools
        self._tools[name] = tool
        if existed:
            self._pending.append(ToolCatalogEvent(self.name, changed=(name,)))
        else:
            self._pending.append(ToolCatalogEvent(self.name, added=(name,)))

    def remove(self, name: str) -> bool:
        """Remove the tool called ``name``; returns whether there was one."""
        if self._tools.pop(name, None) is None:
            return False
        self._pending.append(ToolCatalogEvent(self.name, removed=(name,)))
        return True

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
        specs = []
        for name in sorted(self._tools):
            spec = current_spec(self._tools[name])
            if spec is not None:
                specs.append(spec)
        return specs

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """Runtime changes since the last drain."""
        events, self._pending = self._pending, []
        return events
