"""What the core tells the driver to do next (h11's events, the other way round).

The core (:class:`~agentloop.loop._machine.LoopMachine`) decides; the driver
performs each action through its effect modules and feeds the outcome back:

============================  ======================================================
action                        the driver
============================  ======================================================
:class:`Hand`                 returns ``step`` from ``next()``
:class:`CallModel`            runs the mutators, saves, calls the model; hands the
                              answer (or failure) to ``LoopMachine.model_answered``
:class:`RunRound`             starts the round's prepared calls and waits for them;
                              hands the round to ``LoopMachine.round_collected``
:class:`RecordDecisions`      records the host's approval answers in the store, then
                              asks ``LoopMachine.after_decisions``
:class:`FinishCancelled`      stops the turn's running calls (bounded, shielded), then
                              ``LoopMachine.close_cancelled``
============================  ======================================================
"""

from __future__ import annotations

from ._mutators import LoopMutator, MutationPoint
from ._state import ToolRound, TurnState
from ._steps import Step

__all__ = [
    "Action",
    "CallModel",
    "FinishCancelled",
    "Hand",
    "RecordDecisions",
    "RunRound",
]


class Hand:
    """Return ``step`` to the host: the step is over."""

    __slots__ = ("step",)

    def __init__(self, step: Step) -> None:
        self.step = step


class CallModel:
    """Call the model for ``turn`` at ``point`` (``fold_input``: deliver steering and
    pending input first; ``mutators``: run these once, before the agent's own)."""

    __slots__ = ("fold_input", "mutators", "point", "turn")

    def __init__(
        self,
        turn: TurnState,
        point: MutationPoint,
        fold_input: bool = True,
        mutators: tuple[LoopMutator, ...] = (),
    ) -> None:
        self.turn = turn
        self.point = point
        self.fold_input = fold_input
        self.mutators = mutators


class RunRound:
    """Start ``round``'s prepared calls and wait for its running ones (``fresh``: the
    model just asked for them, so the response is journaled first)."""

    __slots__ = ("fresh", "round", "turn")

    def __init__(self, turn: TurnState, round: ToolRound, fresh: bool = False) -> None:
        self.turn = turn
        self.round = round
        self.fresh = fresh


class RecordDecisions:
    """Record the host's answers on ``round``'s calls before they are acted on."""

    __slots__ = ("round", "turn")

    def __init__(self, turn: TurnState, round: ToolRound) -> None:
        self.turn = turn
        self.round = round


class FinishCancelled:
    """An interrupt hit ``turn`` at ``stage``: stop its calls and close it."""

    __slots__ = ("stage", "turn")

    def __init__(self, turn: TurnState, stage: str) -> None:
        self.turn = turn
        self.stage = stage


Action = Hand | CallModel | RunRound | RecordDecisions | FinishCancelled
"""Anything the core can tell the driver to do."""
