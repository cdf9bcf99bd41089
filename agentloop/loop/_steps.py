"""What ``driver.next()`` returns: ``Finished`` or an interrupt to resolve."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Protocol

import attrs

from ..core._errors import InvalidStateError
from ..core._items import Item, Metadata
from ..core._items import _empty_metadata as _empty
from ..permissions._requests import PendingPermission
from ..tools._questions import Question, QuestionAnswer
from ._events import TurnResult

__all__ = [
    "AfterToolResult",
    "AnswerKind",
    "ApprovalAnswer",
    "ApprovalRequest",
    "AwaitingInput",
    "Blocked",
    "CallInDoubt",
    "CallQuestion",
    "ChildApprovalRequest",
    "Finished",
    "Interrupt",
    "Resolver",
    "Step",
]


class AnswerKind(StrEnum):
    """Approve as asked, approve with edited input, or deny."""

    APPROVE = "approve"
    APPROVE_WITH = "approve_with"
    DENY = "deny"


@attrs.frozen
class ApprovalAnswer:
    """The host's answer to an :class:`ApprovalRequest`."""

    kind: AnswerKind
    input: Any = None
    reason: str | None = None

    @classmethod
    def approve(cls) -> ApprovalAnswer:
        """Run the call with the model's input."""
        return cls(AnswerKind.APPROVE)

    @classmethod
    def approve_with(cls, input: Any) -> ApprovalAnswer:
        """Run the call with ``input`` instead (the transcript keeps the model's original)."""
        return cls(AnswerKind.APPROVE_WITH, input=input)

    @classmethod
    def deny(cls, reason: str | None = None) -> ApprovalAnswer:
        """Do not run the call; the model sees ``reason`` (or "approval denied")."""
        return cls(AnswerKind.DENY, reason=reason)

    @property
    def approved(self) -> bool:
        """Whether the call may run."""
        return self.kind is not AnswerKind.DENY


class Resolver(Protocol):
    """What an interrupt's ``submit()``, ``approve()`` and friends call: the driver
    that returned it (declared here, so the steps need nothing of the driver)."""

    def submit_input(self, items: str | Sequence[Item]) -> None:
        """Queue ``items`` (a string is one user message)."""
        ...

    def answer_approval_for(self, call_id: str, decision: ApprovalAnswer) -> None:
        """Answer the approval of ``call_id``."""
        ...

    def answer_question_for(self, question_id: str, answer: QuestionAnswer) -> None:
        """Answer the question ``question_id`` of a running call."""
        ...

    def resolve_in_doubt_for(self, call_id: str, how: str, value: Any) -> None:
        """Resolve call ``call_id`` left in doubt (``how``: settle, fail, run_again)."""
        ...


@attrs.frozen
class Finished:
    """The turn ended; ``result`` says how."""

    result: TurnResult


class Interrupt:
    """Base of the steps that pause the loop until the host acts."""

    is_blocking: ClassVar[bool] = False
    _driver: Any

    def _bound(self) -> Resolver:
        driver: Resolver | None = self._driver
        if driver is None:
            raise InvalidStateError(
                f"cannot resolve {type(self).__name__}: it is not bound to a driver "
                "(it was deserialized); use the driver's methods instead"
            )
        return driver


@attrs.frozen
class AwaitingInput(Interrupt):
    """The driver has nothing to do until the host submits input."""

    session_id: str
    reason: str = "the driver is waiting for input"
    _driver: Any = attrs.field(default=None, eq=False, repr=False, kw_only=True, alias="driver")

    def submit(self, items: str | Sequence[Item]) -> None:
        """Queue ``items`` as the next turn's input (a string is one user message)."""
        self._bound().submit_input(items)


@attrs.frozen
class AfterToolResult(Interrupt):
    """A cooperative pause after a tool round, before the next model call.

    Call ``next()`` to continue; ``submit(items)`` first to interject.
    """

    session_id: str
    turn_id: str
    transcript_len: int
    _driver: Any = attrs.field(default=None, eq=False, repr=False, kw_only=True, alias="driver")

    def submit(self, items: str | Sequence[Item]) -> None:
        """Interject ``items`` (a string is one user message): they land after the tool
        results, before the next model call."""
        self._bound().submit_input(items)


def _pending(values: Iterable[PendingPermission]) -> tuple[PendingPermission, ...]:
    return tuple(values)


@attrs.frozen
class ApprovalRequest(Interrupt):
    """A tool call waits for the host's yes or no. ``id`` defaults to ``approval:<call_id>``.

    ``requests`` lists every permission request of the call that needs
    approval (kind, summary, reason each); approving grants exactly those.
    ``request_kind``, ``reason`` and ``summary`` are the first one's (the
    summary joins all of them when there are several).
    """

    is_blocking: ClassVar[bool] = True

    call_id: str
    tool_name: str
    input: Any
    request_kind: str
    reason: str
    summary: str
    id: str
    turn_id: str
    task_id: str | None = None
    metadata: Metadata = attrs.field(default=_empty())
    requests: tuple[PendingPermission, ...] = attrs.field(default=(), converter=_pending)
    path: tuple[str, ...] = attrs.field(default=(), converter=tuple, kw_only=True)
    """The agent calls above the call, from the top: ``"<tool name>:<call id>"`` of each
    call that runs a child agent (``Agent.as_tool``); empty for this driver's own call."""
    _driver: Any = attrs.field(default=None, eq=False, repr=False, kw_only=True, alias="driver")

    def approve(self) -> None:
        """Run the call as the model asked."""
        self._bound().answer_approval_for(self.call_id, ApprovalAnswer.approve())

    def approve_with(self, input: Any) -> None:
        """Run the call with ``input`` instead of the model's arguments."""
        self._bound().answer_approval_for(self.call_id, ApprovalAnswer.approve_with(input))

    def deny(self, reason: str | None = None) -> None:
        """Refuse the call; the model gets an error result with ``reason``."""
        self._bound().answer_approval_for(self.call_id, ApprovalAnswer.deny(reason))


@attrs.frozen
class ChildApprovalRequest(ApprovalRequest):
    """An approval a child agent's call needs (``Agent.as_tool``), surfaced here.

    Answered exactly like an :class:`ApprovalRequest` (``approve()``,
    ``approve_with(input)``, ``deny(reason)``, or the driver's
    ``answer_approval_for(call_id, ...)``); ``path`` names the calls that run
    the child (and grandchild), from the top. The driver rests in
    ``AWAITING_ANSWER``: the call running the child waits for the answer
    (``question_id``) while the round's other calls go on.
    """

    question_id: str = attrs.field(default="", kw_only=True)

    def approve(self) -> None:
        """Run the child's call as its model asked."""
        self.answer(ApprovalAnswer.approve())

    def approve_with(self, input: Any) -> None:
        """Run the child's call with ``input`` instead of its model's arguments."""
        self.answer(ApprovalAnswer.approve_with(input))

    def deny(self, reason: str | None = None) -> None:
        """Refuse the child's call; the child's model gets an error result with ``reason``."""
        self.answer(ApprovalAnswer.deny(reason))

    def answer(self, decision: ApprovalAnswer) -> None:
        """Answer with ``decision``; it reaches the child when the driver goes on."""
        content = {"kind": decision.kind.value, "input": decision.input, "reason": decision.reason}
        self._bound().answer_question_for(self.question_id, QuestionAnswer.accept(content))


@attrs.frozen
class CallQuestion(Interrupt):
    """A running tool call asks the host something (``ToolContext.ask``; an MCP server's
    elicitation or sampling request). The call keeps running, waiting for the answer;
    the round's other calls go on too.

    ``id`` is ``question:<call_id>:<n>``; ``question`` holds the kind, the message,
    the schema an accepted answer must match and the request as JSON; ``path`` names
    the callers above this driver (empty at the top level). Answer with
    :meth:`answer`, :meth:`decline` or :meth:`cancel`, then call ``next()``. A
    question whose call stopped waiting is withdrawn: ``next()`` goes on with the call,
    and answering raises ``QuestionWithdrawnError``.
    """

    is_blocking: ClassVar[bool] = True

    id: str
    call_id: str
    tool_name: str
    turn_id: str
    question: Question
    path: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    _driver: Any = attrs.field(default=None, eq=False, repr=False, kw_only=True, alias="driver")

    def answer(self, content: Any = None) -> None:
        """Accept, with ``content`` (checked against ``question.schema``)."""
        self._bound().answer_question_for(self.id, QuestionAnswer.accept(content))

    def decline(self) -> None:
        """Refuse to answer; the call goes on knowing it was declined."""
        self._bound().answer_question_for(self.id, QuestionAnswer.decline())

    def cancel(self) -> None:
        """Dismiss the question; the call goes on knowing it was cancelled."""
        self._bound().answer_question_for(self.id, QuestionAnswer.cancel())


@attrs.frozen
class CallInDoubt(Interrupt):
    """A call that started before a restore and left no result, which its tool could not
    settle (no ``reconcile``, or it returned ``None``): the host says what it came to.

    Returned by ``next()`` only when the agent opted in (``AgentBuilder.ask_in_doubt()``);
    one step per call, and the round's results go to the model only once every call
    in doubt of the round is resolved. ``idempotency_key`` is the call's
    ``ToolContext.idempotency_key`` (look it up where the side effect landed);
    ``reruns`` counts the times the host already chose :meth:`run_again`. Resolve
    once with :meth:`settle`, :meth:`fail` or :meth:`run_again`, then call ``next()``.
    """

    is_blocking: ClassVar[bool] = True

    call_id: str
    tool_name: str
    input: Any
    turn_id: str
    idempotency_key: str
    reason: str
    reruns: int = 0
    _driver: Any = attrs.field(default=None, eq=False, repr=False, kw_only=True, alias="driver")

    @property
    def id(self) -> str:
        """``in_doubt:<call_id>``."""
        return f"in_doubt:{self.call_id}"

    def settle(self, result: Any) -> None:
        """The call did its work and came to ``result`` (what the tool would have
        returned: a str, a JSON value, parts or a ``ToolResultPart`` of this call)."""
        self._bound().resolve_in_doubt_for(self.call_id, "settle", result)

    def fail(self, reason: str) -> None:
        """The call did not do its work: the model gets an error result with ``reason``."""
        self._bound().resolve_in_doubt_for(self.call_id, "fail", reason)

    def run_again(self) -> None:
        """Run the call again, knowing it may have run already (claimed anew: a kill
        during the new run leaves it in doubt again, never run a third time unasked)."""
        self._bound().resolve_in_doubt_for(self.call_id, "run_again", None)


Step = Finished | AwaitingInput | AfterToolResult | ApprovalRequest | CallQuestion | CallInDoubt
"""Anything ``driver.next()`` can return."""

Blocked = Finished | AwaitingInput | ApprovalRequest | CallQuestion | CallInDoubt
"""The steps ``run_until_blocked()`` returns: every kind but ``AfterToolResult``."""
