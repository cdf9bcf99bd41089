"""Questions from running calls: where they wait, how they surface, how they are answered.

A running call asks through its ``ToolContext.ask``, which lands in the
driver's :class:`QuestionBox`: the question waits there (the call's task
awaits its answer) and wakes the driver if it is waiting for the round's
running calls. The core surfaces the first question not yet shown as a
:class:`~agentloop.loop._steps.CallQuestion` (``surface_question``), the
driver rests in ``AWAITING_ANSWER``, and the host's answer
(``answer_question``) is checked against the question's schema and handed to
the waiting call at once; the next ``next()`` waits for the round again.

A shown question whose call stops waiting before the host answers (the
``ask`` was cancelled: the call ended, its timeout fired, an MCP server
cancelled its request or task, the connection closed) is *withdrawn*: its
call no longer holds it, so the next ``next()`` goes on to the call's result
instead of showing it again; answering it raises ``QuestionWithdrawnError`` (an
``InvalidStateError``), changing nothing. The step runner reports each withdrawal
once (``take_withdrawn``): a ``QuestionAnswered`` event with action
``"withdrawn"``, and a save that no longer holds the question as pending.

A question can surface only while its call runs in a task of its own (an
``AsyncTaskManager``'s foreground task): a call running inline in the
driver's step (``SimpleTaskManager``, or a round's only call, which the
driver then starts as a task of its own when it may ask) cannot let
``next()`` return, so its ``ask`` is refused with the fix.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from .._log import get_logger
from ..core._errors import InvalidInputError, InvalidStateError, QuestionWithdrawnError
from ..tools._questions import Question, QuestionAnswer, check_answer
from ._core import LoopCore
from ._nested import host_step
from ._rounds import shown_question
from ._state import CallStatus, DriverState, RoundCall, ToolRound, TurnState
from ._steps import CallQuestion, ChildApprovalRequest, Resolver

__all__ = [
    "ASKED",
    "deliver",
    "Asked",
    "QuestionBox",
    "answer_question",
    "can_resume",
    "claim_key",
    "answer_if_waiting",
    "surface_question",
    "WITHDRAWN",
]

T = TypeVar("T")
log = get_logger()

WITHDRAWN = "withdrawn"
"""The ``QuestionAnswered`` action of a question whose call stopped waiting for it."""

_REMEMBERED = 64
"""How many withdrawn questions a box remembers, to name them when answered late."""


class Asked:
    """What a wait for the round returns when a question came first."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ASKED"


ASKED = Asked()
"""The driver's wait was ended by a question (``QuestionBox.race``)."""


class _Waiting:
    """One question a call waits on."""

    __slots__ = ("answer", "call", "call_id", "done", "question", "shown", "taken")

    def __init__(self, call_id: str, question: Question) -> None:
        self.call: RoundCall | None = None  # the round's call, once shown
        self.call_id = call_id
        self.question = question
        self.done = anyio.Event()
        self.answer: QuestionAnswer | None = None
        self.shown: CallQuestion | None = None
        self.taken = False  # a question for the model: its model call began


class QuestionBox:
    """One driver's questions in flight (process-local: the waiting calls' tasks)."""

    __slots__ = (
        "_asked",
        "_counter",
        "_fresh",
        "_held",
        "_waker",
        "_withdrawn",
        "holds",
        "may_ask",
        "starting",
    )

    def __init__(self) -> None:
        self._asked: list[_Waiting] = []
        # Empty tuples and None until used: a driver that never sees a question pays no
        # containers (memory per idle session is a benchmarked figure).
        self._withdrawn: dict[str, CallQuestion] | None = None  # the last few, by id
        self._fresh: tuple[CallQuestion, ...] = ()  # withdrawn since the runner last looked
        self._held: tuple[tuple[_Waiting, QuestionAnswer], ...] = ()
        self.holds = False
        """Whether an answer a call can resume from waits for the next save before its call
        gets it (a driver with a store: see :func:`answer_question`)."""
        self._counter = 0
        self._waker: anyio.CancelScope | None = None
        self.starting: str | None = None
        """The call the driver is starting now (an ``ask`` from it would run inline)."""
        self.may_ask: set[str] | None = None
        """The running calls whose tools declare ``asks_host`` (made by the first one):
        only they may ask, and only while one runs does a wait watch for questions."""

    def allow(self, call_id: str) -> None:
        """``call_id`` (its tool declares ``asks_host``) may ask while it runs."""
        if self.may_ask is None:
            self.may_ask = set()
        self.may_ask.add(call_id)

    async def ask(self, call_id: str, question: Question) -> QuestionAnswer:
        """``ToolContext.ask``: queue ``question`` for the host and wait for the answer."""
        if not isinstance(question, Question):
            raise InvalidInputError(
                f"ToolContext.ask expects a Question, got {type(question).__name__}"
            )
        if self.may_ask is None or call_id not in self.may_ask:
            raise InvalidStateError(
                f"cannot ask the host from call {call_id}: its tool does not declare that it "
                "asks (the driver would not watch for its question); set asks_host = True on "
                "the tool (@tool(asks_host=True))"
            )
        if self.starting == call_id:
            raise InvalidStateError(
                f"cannot ask the host from call {call_id}: it runs inline in the driver's "
                "step, so next() cannot return the question while it runs; build the agent "
                "with .task_manager(AsyncTaskManager()) entered around the driver, so each "
                "call runs in a task of its own"
            )
        waiting = _Waiting(call_id, question)
        self._asked.append(waiting)
        if self._waker is not None:
            self._waker.cancel()
        try:
            await waiting.done.wait()
        finally:
            self.discard(waiting)
            if waiting.answer is None:
                self._withdraw(waiting)
        assert waiting.answer is not None
        return waiting.answer

    def _withdraw(self, waiting: _Waiting) -> None:
        """``waiting``'s call stopped waiting before any answer: a shown question is
        withdrawn (its call no longer holds it; the next step goes on to the call)."""
        shown, call = waiting.shown, waiting.call
        held = tuple(entry for entry in self._held if entry[0] is not waiting)
        if len(held) < len(self._held):  # answered already (held until the next save)
            self._held = held
            return
        if shown is None:
            return
        if call is not None and call.question is shown:
            call.question = None
        if self._withdrawn is None:
            self._withdrawn = {}
        self._withdrawn[shown.id] = shown
        while len(self._withdrawn) > _REMEMBERED:
            del self._withdrawn[next(iter(self._withdrawn))]
        self._fresh = (*self._fresh, shown)
        log.info(
            "question withdrawn",
            question_id=shown.id,
            call_id=shown.call_id,
            tool=shown.tool_name,
        )

    def withdrawn(self, question_id: str) -> CallQuestion | None:
        """The shown question ``question_id`` if its call stopped waiting for it."""
        return None if self._withdrawn is None else self._withdrawn.get(question_id)

    def take_withdrawn(self) -> tuple[CallQuestion, ...]:
        """The questions withdrawn since the last look (each reported once)."""
        fresh, self._fresh = self._fresh, ()
        return fresh

    @property
    def asked(self) -> bool:
        """Whether any question waits (shown or not): the step loop's cheap check."""
        return bool(self._asked)

    def unshown(self) -> _Waiting | None:
        """The oldest question for the host not yet shown to it."""
        for waiting in self._asked:
            if waiting.shown is None and waiting.question.model_prompt is None:
                return waiting
        return None

    def for_model(self) -> _Waiting | None:
        """The oldest question for the agent's own model not yet taken (marked taken)."""
        for waiting in self._asked:
            if waiting.question.model_prompt is not None and not waiting.taken:
                waiting.taken = True
                return waiting
        return None

    def waiting_for(self, question_id: str) -> _Waiting | None:
        """The shown question ``question_id`` whose call still waits for it."""
        for waiting in self._asked:
            if waiting.shown is not None and waiting.shown.id == question_id:
                return waiting
        return None

    def hold(self, waiting: _Waiting, answer: QuestionAnswer) -> None:
        """Keep ``answer`` for ``waiting`` until :meth:`hand_held` (after the next save)."""
        self._held = (*self._held, (waiting, answer))

    def hand_held(self) -> None:
        """Hand the held answers to their calls (a save now holds that they no longer wait)."""
        held, self._held = self._held, ()
        for waiting, answer in held:
            if not waiting.done.is_set():
                deliver(waiting, answer)

    def discard(self, waiting: _Waiting) -> None:
        """Forget ``waiting`` (answered already)."""
        if waiting in self._asked:
            self._asked.remove(waiting)

    def next_id(self, call_id: str, tool_round: ToolRound) -> str:
        """A new question id for ``call_id``: never one the round's calls were asked before,
        in this process or before a restore (a restored question keeps its id, and the
        store may hold an answer recorded for it)."""
        self._counter = max(self._counter, _highest_number(tool_round)) + 1
        return f"question:{call_id}:{self._counter}"

    def release(self, keep: Callable[[str], bool]) -> None:
        """Answer "cancel" to every question whose call ``keep`` says no longer runs (an
        MCP server's request waits in another task than the call's: it must end)."""
        for waiting in list(self._asked):
            if not keep(waiting.call_id):
                deliver(waiting, QuestionAnswer.cancel())
        if self.may_ask:
            self.may_ask = {call_id for call_id in self.may_ask if keep(call_id)}

    def for_model_waiting(self) -> bool:
        """Whether a question for the model waits (not taken yet)."""
        for waiting in self._asked:
            if waiting.question.model_prompt is not None and not waiting.taken:
                return True
        return False

    def waiting(self) -> bool:
        """Whether a question waits to be shown or sent to the model."""
        return any(w.shown is None and not w.taken for w in self._asked)

    async def race(self, wait: Callable[[str], Awaitable[T]], turn_id: str) -> T | Asked:
        """``wait(turn_id)``, ended early (``ASKED``) when a question comes first."""
        if self.waiting():
            await anyio.lowlevel.checkpoint()  # a step loop going round stays cancellable
            return ASKED
        with anyio.CancelScope() as scope:
            self._waker = scope
            try:
                return await wait(turn_id)
            finally:
                self._waker = None
        return ASKED


def _highest_number(tool_round: ToolRound) -> int:
    """The highest number in the ids of the questions the round's calls wait on or run on
    from (``question:<call id>:<number>``)."""
    highest = 0
    for call in tool_round.calls:
        for asked in (call.question, None if call.resumed is None else call.resumed[0]):
            if asked is not None:
                number = asked.id.rpartition(":")[2]
                highest = max(highest, int(number)) if number.isdigit() else highest
    return highest


def deliver(waiting: _Waiting, answer: QuestionAnswer) -> None:
    """Hand ``answer`` to the call waiting on ``waiting``."""
    waiting.answer = answer
    waiting.done.set()


def surface_question(
    turn: TurnState, tool_round: ToolRound, box: QuestionBox, resolver: Resolver
) -> CallQuestion | ChildApprovalRequest | None:
    """The oldest question not yet shown as a step (marked shown on its call), unless the
    turn was cancelled (then every question not shown is answered "cancel"); a question
    of a call that no longer runs is answered "cancel".
    A child agent's approval or question is shown as the child's step (``host_step``)."""
    if turn.is_cancelled:
        # Nobody will be shown them: answered at once, so no wait spins on them.
        while (waiting := box.unshown()) is not None:
            deliver(waiting, QuestionAnswer.cancel())
            box.discard(waiting)
        return None
    while (waiting := box.unshown()) is not None:
        call = tool_round.by_id(waiting.call_id)
        if call is None or call.status is not CallStatus.RUNNING or call.question is not None:
            deliver(waiting, QuestionAnswer.cancel())
            box.discard(waiting)
            continue
        step = CallQuestion(
            box.next_id(call.call.id, tool_round),
            call.call.id,
            call.call.name,
            turn.turn_id,
            waiting.question,
            driver=resolver,
        )
        waiting.shown = call.question = step
        waiting.call = call
        return host_step(step, resolver)
    return None


def answer_question(core: LoopCore, box: QuestionBox, question_id: str, answer: Any) -> str:
    """Check the host's ``answer`` to ``question_id`` and hand it to the waiting call (whose
    id it returns); raises (changing nothing) when no such question waits or the answer
    does not fit."""
    where = f"answer_question_for({question_id!r})"
    if (withdrawn := box.withdrawn(question_id)) is not None:
        raise QuestionWithdrawnError(
            f"cannot {where}: the question was withdrawn: call {withdrawn.call_id} "
            f"({withdrawn.tool_name}) stopped waiting for it before an answer (it ended, "
            "was cancelled or timed out); nothing was recorded; call next() to go on "
            "with the call's result",
            question_id=question_id,
            call_id=withdrawn.call_id,
        )
    call = _pending_call(core, question_id, where)
    assert call.question is not None
    check_answer(call.question.question, answer, where)
    waiting = box.waiting_for(question_id)
    if waiting is None and can_resume(call):
        # Asked before a restore: the call runs again from the answer on the next step.
        call.resumed, call.question = (call.question, answer), None
        return call.call.id
    if waiting is None:
        raise InvalidStateError(
            f"cannot {where}: call {call.call.id} no longer waits for it (it ended, or "
            "this driver was restored from a checkpoint); call next() to go on"
        )
    resumable = call.question.question.resume is not None
    call.question = None
    if box.holds and resumable:
        # Restored from the last save, this call would be asked again and run again from
        # the answer: it gets the answer only once a save holds that it no longer waits
        # (a restore then answers it in doubt), so a kill in between runs nothing twice.
        box.hold(waiting, answer)
    else:
        deliver(waiting, answer)
    return call.call.id


def answer_if_waiting(
    resolver: Resolver, session_id: str, question_id: str, answer: QuestionAnswer
) -> None:
    """Hand ``answer`` (one the host fetched: recorded in a store, or a parent's host's)
    to the question ``question_id``; one withdrawn meanwhile (its call stopped waiting)
    takes none: logged, and the host's next ``next()`` goes on with the call."""
    try:
        resolver.answer_question_for(question_id, answer)
    except QuestionWithdrawnError:
        log.info(
            "answer not handed over: the question was withdrawn",
            session_id=session_id,
            question_id=question_id,
            action=answer.action.value,
        )


def can_resume(call: RoundCall) -> bool:
    """Whether ``call`` (not running: restored) can run again from its question's answer."""
    question = call.question
    return (
        question is not None
        and call.status is CallStatus.PREPARED
        and question.question.resume is not None
    )


def claim_key(call: RoundCall) -> str | None:
    """The claim a call running again from an answer takes (its first run holds the call's
    own): one per question, so the rerun is claimed once too. A call the host chose to
    run again after a restore left it in doubt takes its rerun's claim."""
    if call.rerun is not None:
        return call.rerun
    if call.resumed is None:
        return None
    return f"{call.call.id}#{call.resumed[0].id}"


def _pending_call(core: LoopCore, question_id: str, where: str) -> RoundCall:
    if core.state is not DriverState.AWAITING_ANSWER:
        raise InvalidStateError(
            f"cannot {where} in state {core.state}: no question of a running call is "
            "pending; answer a CallQuestion step returned by next()"
        )
    turn = core.turn
    assert turn is not None
    assert turn.round is not None
    if turn.is_cancelled:
        raise InvalidStateError(
            f"cannot {where}: turn {turn.turn_id} was cancelled; call next() to finish it"
        )
    pending = shown_question(turn.round)
    if pending is None:
        raise InvalidStateError(f"cannot {where}: the pending question was already answered; "
                                "call next() to continue")  # fmt: skip
    if pending.id != question_id:
        raise InvalidStateError(
            f"cannot {where}: that question is not pending (pending: {pending.id!r}, asked "
            f"by call {pending.call_id})"
        )
    call = turn.round.by_id(pending.call_id)
    assert call is not None
    return call
