"""What the host tells a driver between steps: input, queued messages, answers.

``LoopDriver`` takes these from :class:`DriverInputs`: the host's input
(``submit_input``, ``set_next_turn_cache``), the steering and follow-up queues,
and the answers to the interrupts ``next()`` returned. The answers are the
``Resolver`` protocol the interrupts act through (``ApprovalRequest.approve()``
calls ``answer_approval_for``, ``CallQuestion.answer()`` ``answer_question_for``,
``CallInDoubt.settle()`` ``resolve_in_doubt_for``). Each checks the call against
the core with the synchronous functions of ``_host_calls``, ``_questions`` and
``_in_doubt`` and changes nothing when it refuses. The stepping half (``next()``,
``release()``, reading the state) is ``LoopDriver`` itself (``_driver.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._log import get_logger
from ..core._errors import InvalidInputError
from ..core._items import Item
from ..model._session_config import PromptCacheRequest
from ..tools._questions import QuestionAnswer
from ._core import LoopCore
from ._host_calls import (
    answer_approval,
    input_items,
    queued_message,
    refuse_released,
    sole_undecided,
)
from ._in_doubt import apply_resolution, resolve_in_doubt
from ._machine import LoopMachine
from ._nested import pending_child_approval
from ._questions import answer_question
from ._state import CallStatus, DriverState, QueuedMessage
from ._step_runner import StepRunner
from ._steps import ApprovalAnswer

__all__ = ["DriverInputs"]

log = get_logger()


class DriverInputs:
    """The host's input and answers of a ``LoopDriver`` (its base class; see the module)."""

    __slots__ = ()

    _core: LoopCore
    _machine: LoopMachine
    _runner: StepRunner
    _released: bool

    def submit_input(self, items: str | Sequence[Item]) -> None:
        """Queue ``items`` for the next model call (a new turn, or after a pause).

        A string is one user message: ``submit_input("hi")`` is
        ``submit_input([Item.text(ItemKind.USER, "hi")])``.
        """
        if self._released:
            refuse_released(self._machine.session_id, "submit_input()")
        checked = input_items(self._core, items)
        self._core.pending_input = (*self._core.pending_input, *checked)
        self._runner.idle_steps = 0
        self._machine.observer.input_accepted(self._machine.session_id, checked)

    def set_next_turn_cache(self, request: PromptCacheRequest | None) -> None:
        """Use ``request`` for the next model call only (then the session default again)."""
        if self._released:
            refuse_released(self._machine.session_id, "set_next_turn_cache()")
        self._core.require_state(
            "set the next turn's cache request", DriverState.IDLE, DriverState.AFTER_TOOL_RESULT
        )
        if request is not None and not isinstance(request, PromptCacheRequest):
            raise InvalidInputError(
                f"set_next_turn_cache expects a PromptCacheRequest or None, got {request!r}"
            )
        self._core.next_turn_cache = request

    def steer(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message for the model at the next tool-call boundary.

        Callable at any time, even while ``next()`` runs. At the boundary the
        round's calls not yet started (or still awaiting approval) are answered
        "skipped: <label> sent a new message", and the message goes to the
        model in the continuation call. Queued messages survive a cancelled turn.
        """
        if self._released:
            refuse_released(self._machine.session_id, "steer()")
        message = queued_message(self._core, "steer", items, label)
        self._core.steering = (*self._core.steering, message)

    def follow_up(self, items: Sequence[Item], *, label: str = "the user") -> None:
        """Queue a message that starts a new turn when the current one finishes.

        Callable at any time, even while ``next()`` runs; a cancelled turn
        leaves it queued for the next turn that finishes.
        """
        if self._released:
            refuse_released(self._machine.session_id, "follow_up()")
        message = queued_message(self._core, "follow_up", items, label)
        self._core.follow_ups = (*self._core.follow_ups, message)

    def clear_queues(self) -> tuple[QueuedMessage, ...]:
        """Drop every queued steering and follow-up message; return them."""
        if self._released:
            refuse_released(self._machine.session_id, "clear_queues()")
        core = self._core
        dropped = (*core.steering, *core.follow_ups)
        core.steering = core.follow_ups = ()
        return dropped

    def answer_approval(self, decision: ApprovalAnswer) -> None:
        """Answer the one pending approval (raises if there are none or several)."""
        if self._released:
            refuse_released(self._machine.session_id, "answer_approval()")
        self.answer_approval_for(sole_undecided(self._core), decision)

    def answer_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Answer the approval for ``call_id``; ``next()`` then runs or denies the call.
        A child agent's approval shown as a ``ChildApprovalRequest`` is answered too."""
        if self._released:
            refuse_released(self._machine.session_id, "answer_approval_for()")
        if (child := pending_child_approval(self._core, call_id, self)) is not None:
            child.answer(decision)
            return
        answer_approval(self._core, call_id, decision, self._machine.observer)

    def answer_question_for(self, question_id: str, answer: QuestionAnswer) -> None:
        """Answer the pending ``CallQuestion`` ``question_id`` (its call gets ``answer`` at
        once and runs on); raises, changing nothing, for another question or an answer
        that does not match the question's schema."""
        if self._released:
            refuse_released(self._machine.session_id, "answer_question_for()")
        runner = self._runner
        call_id = answer_question(self._core, runner.tools.questions, question_id, answer)
        self._machine.observer.question_answered(call_id, question_id, answer.action.value)
        runner.journal.note_answer()

    def resolve_in_doubt_for(self, call_id: str, how: str, value: Any) -> None:
        """Resolve the pending ``CallInDoubt`` of ``call_id`` (``how``: ``settle`` with its
        result, ``fail`` with a reason, ``run_again``); raises, changing nothing, for a
        call not in doubt (or resolved already) or a value that does not fit."""
        if self._released:
            refuse_released(self._machine.session_id, "resolve_in_doubt_for()")
        call, tool_round, result = resolve_in_doubt(self._core, call_id, how, value, None)
        assert call.doubt is not None
        apply_resolution(call, call.doubt, result)
        if result is not None:
            self._machine.finalize(call, tool_round, result, CallStatus.ANSWERED)
            self._runner.journal.note_resolved()
        log.info("call in doubt resolved", call_id=call_id, resolution=how)
