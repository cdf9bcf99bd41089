"""One A2A request against a session: check, record answers, drive until the session rests.

The A2A context id is the session id. A new task brings user input; a message
on a task waiting in ``input-required`` answers its approvals or the question
a running call asked. Either way the session's lease is held for the whole
request, nothing is changed before every check passed, approvals are recorded
through the inbox's decider (single-use, bound to the input, audited) and
answers to questions through the store's ``record_answer`` (checked against
the question's schema, final), so the session resumes from the store with
exactly those answers, here or after a restart: a question, asked again when
the session resumes, is answered from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, assert_never

import attrs

from .._log import get_logger
from ..core._items import Item
from ..loop._agent import Agent
from ..loop._driver import LoopDriver
from ..loop._questions import answer_if_waiting
from ..loop._release import release_dropped
from ..loop._session_store import AnswerStore, Lease, SessionStore, StoredSession
from ..loop._steps import (
    AfterToolResult,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    ChildApprovalRequest,
    Finished,
)
from ..loop._stored_answers import PendingQuestion
from ..serve._child import ChildApproval, split_questions
from ..serve._decide import Decider
from ..serve._inbox import InboxRow, pending_approvals
from ..serve._redact import Redactor
from ..ui._answers import interrupt_id, read_resume, record_decisions
from ..ui._lease import run_leased
from ..ui._problems import RunRefused
from ..ui._questions import open_questions, pending_of, record_replies, stored_answer
from ._child import child_replies
from ._replies import EVERY_CALL, Reply, approval_answers, question_answers

__all__ = ["A2ARunner", "Rested"]

log = get_logger()


@attrs.frozen(kw_only=True)
class _Entry:
    """One answer to a waiting call, as ``read_resume`` takes it."""

    interrupt_id: str
    status: str
    payload: Any


@attrs.frozen(kw_only=True)
class Rested:
    """Where a request left the session: the step it rests at, and the calls waiting for
    a decision or the questions waiting for an answer."""

    step: Finished | AwaitingInput | ApprovalRequest | CallQuestion | None = None
    waiting: tuple[InboxRow, ...] = ()
    questions: tuple[PendingQuestion, ...] = ()
    children: tuple[ChildApproval, ...] = ()
    """Child agents' calls waiting for approval (``Agent.as_tool``), answered as approvals."""


class A2ARunner:
    """Advances ``agent``'s sessions (one per A2A context) for the A2A executor."""

    def __init__(
        self,
        agent: Agent,
        store: SessionStore,
        *,
        decider: Decider,
        redactor: Redactor,
        schemas: Callable[[], Any],
        agent_name: str,
        approval_ttl: float | None,
        lease_ttl: float = 60.0,
        max_steps: int = 100,
    ) -> None:
        self._agent = agent
        self._store = store
        self._decider = decider
        self._redactor = redactor
        self._schemas = schemas
        self._agent_name = agent_name
        self._approval_ttl = approval_ttl
        self._lease_ttl = lease_ttl
        self._max_steps = max_steps

    def waiting(self, stored: StoredSession | None) -> list[InboxRow]:
        """The calls of ``stored``'s round waiting for a decision."""
        if stored is None:
            return []
        return pending_approvals(
            stored,
            schemas=self._schemas(),
            agent_name=self._agent_name,
            ttl=self._approval_ttl,
            redactor=self._redactor,
        )

    async def waiting_now(self, session_id: str) -> Rested:
        """What the session waits for, as the store has it now (``step`` left ``None``)."""
        stored = await self._store.load(session_id)
        children, questions = split_questions(open_questions(stored), self._agent)
        return Rested(waiting=tuple(self.waiting(stored)), questions=questions, children=children)

    async def start(self, session_id: str, items: Sequence[Item]) -> Rested:
        """A new task's input on the session; refused while approvals of another task wait."""

        async def work(lease: Lease) -> Rested:
            stored = await self._store.load(session_id)
            open_calls = self.waiting(stored)
            if open_calls:
                listed = ", ".join(row.call_id for row in open_calls)
                raise RunRefused(
                    f"context {session_id!r} has calls waiting for approval ({listed}) on "
                    "the task that asked for them; answer that task first. Nothing was changed",
                    code="interrupt_open",
                )
            asked = open_questions(stored)
            if asked:
                listed = ", ".join(pending.question_id for pending in asked)
                raise RunRefused(
                    f"context {session_id!r} has questions waiting for an answer ({listed}) "
                    "on the task that asked them; answer that task first. Nothing was changed",
                    code="interrupt_open",
                )
            if stored is None:
                driver = await self._agent.start(session_id, lease=lease)
            else:
                driver = await self._agent.resume(session_id=session_id, lease=lease)
            driver.submit_input(list(items))
            return await self._drive(session_id, driver)

        return await run_leased(
            self._store, session_id, self._lease_ttl, work, owner="agentloop-a2a"
        )

    async def answer(self, session_id: str, reply: Reply, who: str) -> Rested:
        """Record what ``reply`` answers (the waiting questions, else the waiting calls'
        approvals), then drive the session until it rests."""

        async def work(lease: Lease) -> Rested:
            stored = await self._store.load(session_id)
            children, questions = split_questions(open_questions(stored), self._agent)
            if questions:
                replies = question_answers(reply, questions)
                await record_replies(self._store, session_id, replies, label="question")
            elif children:
                replies = child_replies(reply, children)
                await record_replies(self._store, session_id, replies, label="call")
            else:
                await self._decide(session_id, self.waiting(stored), reply, who)
            driver = await self._agent.resume(session_id=session_id, lease=lease)
            return await self._drive(session_id, driver)

        return await run_leased(
            self._store, session_id, self._lease_ttl, work, owner="agentloop-a2a"
        )

    async def _decide(self, session_id: str, rows: list[InboxRow], reply: Reply, who: str) -> None:
        """Check every approval answer, then record each through the decider."""
        entries = [
            self._entry(call, payload, rows)
            for call_id, payload in approval_answers(reply)
            for call in ([r.call_id for r in rows] if call_id == EVERY_CALL else [call_id])
        ]
        checked = read_resume(entries, rows, now=datetime.now(UTC), label="answers")
        if rows and not checked:
            raise RunRefused("the message answers no waiting call", code="interrupt_open")
        await record_decisions(
            self._decider, session_id, checked, who=who, name=lambda call: f"call {call!r}"
        )

    @staticmethod
    def _entry(call_id: str | None, payload: Any, rows: list[InboxRow]) -> _Entry:
        if call_id is None:
            if len(rows) != 1:
                listed = ", ".join(row.call_id for row in rows) or "none"
                raise RunRefused(
                    f"an answer without a callId is ambiguous: {len(rows)} calls wait "
                    f"({listed}); name the call with callId. Nothing was recorded",
                    code="bad_answer",
                )
            call_id = rows[0].call_id
        return _Entry(interrupt_id=interrupt_id(call_id), status="resolved", payload=payload)

    async def _drive(self, session_id: str, driver: LoopDriver) -> Rested:
        """Step until the session rests; then release the driver (saved as it rests, a
        call still waiting for a question's answer ends, unrecorded)."""
        try:
            return await self._steps(session_id, driver)
        finally:
            await release_dropped(driver)

    async def _steps(self, session_id: str, driver: LoopDriver) -> Rested:
        for _ in range(self._max_steps):
            step = await driver.next()
            match step:
                case AfterToolResult():
                    continue
                case ChildApprovalRequest():
                    answer = await stored_answer(self._store, session_id, step.question_id)
                    if answer is not None:
                        answer_if_waiting(driver, session_id, step.question_id, answer)
                        continue
                    return attrs.evolve(await self.waiting_now(session_id), step=step)
                case ApprovalRequest():
                    rows = self.waiting(await self._store.load(session_id))
                    return Rested(step=step, waiting=tuple(rows))
                case Finished() | AwaitingInput():
                    return Rested(step=step)
                case CallQuestion():
                    answer = await stored_answer(self._store, session_id, step.id)
                    if answer is not None:
                        answer_if_waiting(driver, session_id, step.id, answer)
                        continue
                    return self._asked(step, await self._store.load(session_id))
                case CallInDoubt():
                    raise RunRefused(
                        f"tool call {step.call_id} ({step.tool_name}) is in doubt after a "
                        "restore and the agent asks the host (ask_in_doubt); A2A tasks cannot "
                        "resolve calls in doubt yet (the session is saved): resolve it in a "
                        "host (Agent.resume), or build the agent without ask_in_doubt()",
                        code="in_doubt_unsupported",
                    )
                case _:
                    assert_never(step)
        raise RunRefused(
            f"the task took more than {self._max_steps} steps without resting; "
            "the session is saved as it is",
            code="max_steps",
        )

    def _asked(self, step: CallQuestion, stored: StoredSession | None) -> Rested:
        """The session rests on ``step``'s question (and any other its round asked)."""
        if not isinstance(self._store, AnswerStore):
            raise RunRefused(
                f"tool call {step.call_id} ({step.tool_name}) asked a question "
                f"({step.question.kind}: {step.question.message}), but this session store "
                "keeps no answers to questions (use a store of agentloop.store); the session "
                "is saved, its next message answers the call as in doubt",
                code="question_unsupported",
            )
        questions = open_questions(stored) or (pending_of(step),)
        return Rested(step=step, questions=questions)
