"""Host actions: what a host can do between two ``driver.next()`` calls.

Plain values (no hypothesis needed): :func:`~agentloop.testing.host_actions`
generates them and :class:`~agentloop.testing.AgentStateMachine` applies them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeAlias

import attrs

from ..core._items import Item

__all__ = [
    "Approve",
    "ApproveWith",
    "Cancel",
    "CancelPoint",
    "Continue",
    "DenyCall",
    "HostAction",
    "Interject",
    "Submit",
]


class CancelPoint(StrEnum):
    """Where an interrupt lands.

    ``MODEL``, ``TOOL``, ``MUTATOR`` and ``HOST`` arm a probe that fires at the
    next model stream, probe-tool run or mutator pass (``HOST`` cancels the
    task awaiting ``next()`` while the model streams); ``APPROVAL`` and
    ``PAUSE`` interrupt at once while an ``ApprovalRequest`` or
    ``AfterToolResult`` is pending.
    """

    MODEL = "model"
    TOOL = "tool"
    MUTATOR = "mutator"
    HOST = "host"
    APPROVAL = "approval"
    PAUSE = "pause"

    @property
    def is_immediate(self) -> bool:
        """Whether the interrupt happens at once rather than at an armed probe."""
        return self in (CancelPoint.APPROVAL, CancelPoint.PAUSE)


def _to_items(items: Any) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class Submit:
    """Submit ``items`` as a new turn's input (when the driver is idle)."""

    items: tuple[Item, ...] = attrs.field(converter=_to_items)


@attrs.frozen
class Interject:
    """Submit ``items`` at an ``AfterToolResult`` pause, before the next model call."""

    items: tuple[Item, ...] = attrs.field(converter=_to_items)


@attrs.frozen
class Approve:
    """Approve the pending call as the model asked."""


@attrs.frozen
class ApproveWith:
    """Approve the pending call with ``input`` instead of the model's arguments."""

    input: Any


@attrs.frozen
class DenyCall:
    """Deny the pending call (``reason`` is shown to the model)."""

    reason: str | None = None


@attrs.frozen
class Cancel:
    """Interrupt the turn at ``point``."""

    point: CancelPoint


@attrs.frozen
class Continue:
    """Do nothing; just call ``next()`` again."""


HostAction: TypeAlias = Submit | Interject | Approve | ApproveWith | DenyCall | Cancel | Continue
"""Anything :func:`~agentloop.testing.host_actions` can generate."""
