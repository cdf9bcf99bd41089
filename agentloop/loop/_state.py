"""The driver's internal bookkeeping: turn, round and call records, and the
items the driver writes itself (all deterministic: no clocks or random ids in text)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import attrs

from ..core._cancellation import TurnCancellation
from ..core._items import Item, ItemKind, TextPart, ToolCallPart, ToolResultPart, Usage
from ..tools._tool import ToolRequest
from ._steps import ApprovalDecision, ApprovalRequest

__all__ = ["CallStatus", "DriverState", "QueuedMessage", "RoundCall", "ToolRound", "TurnState"]

INTERRUPTED_KEY = "agentloop.interrupted"
INTERRUPT_STAGE_KEY = "agentloop.interrupt_stage"
LIMIT_KEY = "agentloop.limit"
NO_MODEL_CALL_KEY = "agentloop.no_model_call"
INTERRUPTED_TEXT = "Previous assistant response was interrupted by the user before completion."


class DriverState(StrEnum):
    """Where the driver is between (or during) steps."""

    IDLE = "IDLE"
    """No turn is waiting on the host; ``next()`` starts a turn or asks for input."""
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    """A tool round waits for approval answers."""
    AFTER_TOOL_RESULT = "AFTER_TOOL_RESULT"
    """Paused between a tool round and the next model call."""
    STEPPING = "STEPPING"
    """Inside ``next()``."""
    FAILED = "FAILED"
    """A step raised; the driver refuses further steps."""


TRANSITIONS: dict[DriverState, frozenset[DriverState]] = {
    DriverState.IDLE: frozenset({DriverState.STEPPING}),
    DriverState.AWAITING_APPROVAL: frozenset({DriverState.STEPPING}),
    DriverState.AFTER_TOOL_RESULT: frozenset({DriverState.STEPPING}),
    DriverState.STEPPING: frozenset(
        {
            DriverState.IDLE,
            DriverState.AWAITING_APPROVAL,
            DriverState.AFTER_TOOL_RESULT,
            DriverState.FAILED,
        }
    ),
    DriverState.FAILED: frozenset(),
}


class CallStatus(StrEnum):
    """Life of one call in a round."""

    UNSTARTED = "unstarted"
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"
    DONE = "done"


def _to_items(items: Any) -> tuple[Item, ...]:
    return tuple(items)


@attrs.frozen
class QueuedMessage:
    """A steering or follow-up message waiting for its delivery point."""

    items: tuple[Item, ...] = attrs.field(converter=_to_items)
    label: str = "the user"
    """Who sent it; named in the "skipped" results a steering message causes."""


@attrs.define
class RoundCall:
    """One tool call of the active round."""

    index: int
    call: ToolCallPart
    request: ToolRequest
    status: CallStatus = CallStatus.UNSTARTED
    approval: ApprovalRequest | None = None
    surfaced: bool = False
    decision: ApprovalDecision | None = None
    task_id: str | None = None
    started_at: float | None = None
    background: bool = False
    journaled: bool = False
    """Recorded as started in the store; cleared once its result is saved too."""
    cancellation: TurnCancellation | None = None
    """The call's own checkpoint (released when it moves to the background)."""

    @property
    def undecided(self) -> bool:
        """Waiting for an approval answer that has not come."""
        return self.status is CallStatus.AWAITING_APPROVAL and self.decision is None


@attrs.define
class ToolRound:
    """The calls of one model response, in the model's order."""

    calls: list[RoundCall]
    results: dict[int, ToolResultPart] = attrs.field(factory=dict)
    """Results not yet appended, by call index (appended in call order)."""

    def by_id(self, call_id: str) -> RoundCall | None:
        """The call with ``call_id``."""
        for call in self.calls:
            if call.call.id == call_id:
                return call
        return None


@attrs.define
class TurnState:
    """The turn in progress."""

    turn_id: str
    cancellation: TurnCancellation | None
    model_calls: int = 0
    usage: Usage | None = None
    round: ToolRound | None = None
    paused: bool = False
    interrupted: bool = False
    """Cancelled before a checkpoint was taken (restored turns only)."""

    @property
    def is_cancelled(self) -> bool:
        """Whether an interrupt hit this turn."""
        return self.interrupted or (
            self.cancellation is not None and self.cancellation.is_cancelled
        )

    def add_usage(self, usage: Usage | None) -> None:
        """Add one model call's usage to the turn's total."""
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage


def interrupted_metadata(stage: str) -> dict[str, Any]:
    """Metadata marking an item or result as written because of an interrupt."""
    return {INTERRUPTED_KEY: True, INTERRUPT_STAGE_KEY: stage}


def interrupted_assistant_item(stage: str, created_at: float) -> Item:
    """The assistant item that closes a cancelled turn."""
    metadata = interrupted_metadata(stage)
    return Item(
        ItemKind.ASSISTANT,
        (TextPart(INTERRUPTED_TEXT, metadata=metadata),),
        metadata=metadata,
        created_at=created_at,
    )


def tool_result_item(result: ToolResultPart, created_at: float) -> Item:
    """A tool item holding one result."""
    return Item(ItemKind.TOOL, (result,), created_at=created_at)
