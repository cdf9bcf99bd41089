"""Routing policies: which calls run in the foreground, the background, or detach later.

A policy is anything with ``route(request) -> TaskRoute`` or a plain
callable from a :class:`~agentloop.ToolRequest` to a ``TaskRoute``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from ..core._errors import InvalidInputError, ToolError
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..tools._tool import ToolRequest
from ._protocol import TaskKind

__all__ = [
    "DetachAfter",
    "RouteByAnnotation",
    "RouteByName",
    "TaskRoute",
    "Routing",
    "RoutingPolicy",
    "SpecCatalog",
    "route_request",
]


def _check_seconds(instance: object, attribute: object, value: float) -> None:
    if not isinstance(value, int | float) or math.isnan(value) or value < 0:
        raise InvalidInputError(f"DetachAfter expects a number of seconds >= 0, got {value!r}")


@attrs.frozen
class DetachAfter:
    """Run in the foreground; move to the background if still running after ``seconds``."""

    seconds: float = attrs.field(validator=_check_seconds)


TaskRoute: TypeAlias = TaskKind | DetachAfter
"""Where a routing policy sends one call: ``TaskKind.FOREGROUND``, ``TaskKind.BACKGROUND``,
or ``DetachAfter(seconds)`` (the foreground, then the background if still running)."""


@runtime_checkable
class RoutingPolicy(Protocol):
    """Decides how one call runs."""

    def route(self, request: ToolRequest) -> TaskRoute:
        """``TaskKind.FOREGROUND``, ``TaskKind.BACKGROUND`` or ``DetachAfter(seconds)``."""
        ...


Routing: TypeAlias = RoutingPolicy | Callable[[ToolRequest], TaskRoute]


class SpecCatalog(Protocol):
    """Anything that lists tool specs: a ``ToolRegistry``, a ``ToolSource``, an executor."""

    def specs(self) -> list[ToolSpec]:
        """The specs offered now."""
        ...


class RouteByName:
    """Routes by tool name; names not listed get ``default`` (foreground)."""

    def __init__(
        self,
        routes: Mapping[str, TaskRoute],
        *,
        default: TaskRoute = TaskKind.FOREGROUND,
    ) -> None:
        for name, decision in routes.items():
            _check_decision(decision, f"RouteByName route for {name!r}")
        _check_decision(default, "RouteByName default")
        self.routes = dict(routes)
        self.default = default

    def route(self, request: ToolRequest) -> TaskRoute:
        """The decision listed for ``request.tool_name``, else the default."""
        return self.routes.get(request.tool_name, self.default)


class RouteByAnnotation:
    """Routes by the called tool's :class:`~agentloop.ToolAnnotations`.

    ``catalog`` is read at routing time (so dynamic catalogs work); a tool it
    does not list gets ``default``. Example: run open-world tools in the
    background with ``RouteByAnnotation(registry, lambda a: TaskKind.BACKGROUND
    if a.open_world else TaskKind.FOREGROUND)``.
    """

    def __init__(
        self,
        catalog: SpecCatalog,
        decide: Callable[[ToolAnnotations], TaskRoute],
        *,
        default: TaskRoute = TaskKind.FOREGROUND,
    ) -> None:
        _check_decision(default, "RouteByAnnotation default")
        self.catalog = catalog
        self.decide = decide
        self.default = default

    def route(self, request: ToolRequest) -> TaskRoute:
        """``decide(annotations)`` of the named tool, else the default."""
        for spec in self.catalog.specs():
            if spec.name == request.tool_name:
                return self.decide(spec.annotations)
        return self.default


def route_request(routing: Routing, request: ToolRequest) -> TaskRoute:
    """Ask ``routing`` about ``request``; a raising or ill-typed policy is a ``ToolError``."""
    route = routing.route if isinstance(routing, RoutingPolicy) else routing
    try:
        decision = route(request)
    except Exception as error:
        raise ToolError(
            f"routing policy {_name(routing)} raised for call {request.call_id} "
            f"({request.tool_name}): {type(error).__name__}: {error}"
        ) from error
    _check_decision(decision, f"routing policy {_name(routing)} for call {request.call_id}")
    return decision


def _check_decision(decision: object, what: str) -> None:
    if not isinstance(decision, TaskKind | DetachAfter):
        raise ToolError(
            f"{what} returned {decision!r}; expected TaskKind.FOREGROUND, "
            "TaskKind.BACKGROUND or DetachAfter(seconds)"
        )


def _name(routing: object) -> str:
    return getattr(routing, "__qualname__", None) or type(routing).__name__
