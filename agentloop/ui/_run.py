"""One AG-UI run: lease the thread's session, check the input, record answers, drive, report.

The thread id is the session id. A run takes the session's lease for its
whole length (a second run on the thread meanwhile, from this process or
another, ends in ``RUN_ERROR``), loads the session, and refuses before
changing anything: an unknown or bad resume entry, new input on a thread
with an open interrupt, or an open interrupt left unanswered. Answers are
recorded through the inbox's decider (single-use, bound to the input,
audited), so the session resumes with exactly those decisions, here or
after a restart; answers to a running call's question (``_questions``)
through the store's ``record_answer``, and the question, asked again when
the session resumes, is answered from the store. Then the driver runs until
it rests (a question: an ``input_required`` interrupt).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, assert_never

import anyio
import attrs
from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)

from .._log import get_logger
from ..core._items import FinishReason
from ..loop._agent import Agent
from ..loop._driver import LoopDriver
from ..loop._questions import answer_if_waiting
from ..loop._release import release_dropped
from ..loop._session_store import Lease, SessionStore
from ..loop._steps import (
    AfterToolResult,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    ChildApprovalRequest,
    Finished,
    Step,
)
from ..loop._stored_answers import PendingQuestion
from ..serve._child import shown_child, split_questions
from ..serve._decide import Decider
from ..serve._inbox import InboxRow, pending_approvals
from ..serve._redact import Redactor
from ._answers import interrupt_id, read_resume, record_decisions, response_schema
from ._child import read_child_answers
from ._config import AguiConfig
from ._events import EventTranslator
from ._in_doubt import (
    apply_resolutions,
    doubt_interrupt,
    open_doubts,
    read_resolutions,
    step_doubt,
)
from ._interrupts import child_interrupt, question_interrupt
from ._lease import run_leased
from ._messages import new_input, snapshot_messages
from ._problems import RunRefused
from ._questions import (
    open_questions,
    pending_of,
    read_question_answers,
    record_replies,
    stored_answer,
)
from ._resume import interrupts

__all__ = ["AguiRunner"]

log = get_logger()

Emit = Callable[[BaseEvent], None]


@attrs.frozen(kw_only=True)
class _Thread:
    """What a run found and prepared on its thread before driving."""

    driver: LoopDriver
    resumed: bool


class AguiRunner:
    """Runs ``RunAgentInput``s against ``agent``'s store, emitting AG-UI events."""

    def __init__(
        self,
        agent: Agent,
        store: SessionStore,
        *,
        config: AguiConfig,
        decider: Decider,
        redactor: Redactor,
        schemas: Callable[[], Any],
    ) -> None:
        self._agent = agent
        self._store = store
        self._config = config
        self._decider = decider
        self._redactor = redactor
        self._schemas = schemas

    async def run(self, run_input: RunAgentInput, who: str, emit: Emit) -> None:
        """One run, start to terminal event; never raises for a refused or failed run."""
        thread, run_id = run_input.thread_id, run_input.run_id
        emit(RunStartedEvent(thread_id=thread, run_id=run_id, protocol_version=PROTOCOL_VERSION))
        translator = EventTranslator(emit)
        try:
            await self._run_leased(run_input, who, emit, translator)
        except RunRefused as refused:
            translator.close()
            emit(RunErrorEvent(message=self._redactor.text(refused.message), code=refused.code))
        except Exception as error:
            log.exception("AG-UI run failed", thread_id=thread, run_id=run_id)
            translator.close()
            message = f"the run failed: {type(error).__name__}: {error}"
            emit(RunErrorEvent(message=self._redactor.text(message), code=type(error).__name__))

    async def _run_leased(
        self, run_input: RunAgentInput, who: str, emit: Emit, translator: EventTranslator
    ) -> None:
        async def work(lease: Lease) -> None:
            await self._run_on(run_input, who, emit, translator, lease)

        await run_leased(self._store, run_input.thread_id, self._config.lease_ttl, work)

    async def _run_on(
        self,
        run_input: RunAgentInput,
        who: str,
        emit: Emit,
        translator: EventTranslator,
        lease: Lease,
    ) -> None:
        agent = attrs.evolve(
            self._agent,
            observers=(*self._agent.observers, translator),
            transcript_observers=(*self._agent.transcript_observers, translator),
        )
        prepared = await self._prepare(run_input, who, agent, lease)
        try:
            transcript = prepared.driver.snapshot().transcript
            if prepared.resumed:
                emit(MessagesSnapshotEvent(messages=snapshot_messages(transcript)))
            translator.begin(len(transcript))
            await self._drive(run_input, prepared.driver, emit, translator)
        finally:  # saved as it rests: a call still waiting (a question) ends, unrecorded
            await release_dropped(prepared.driver)

    async def _prepare(
        self, run_input: RunAgentInput, who: str, agent: Agent, lease: Lease
    ) -> _Thread:
        """Check everything, record the answers, and return the thread's driver."""
        thread = run_input.thread_id
        stored = await self._store.load(thread)
        resume = run_input.resume or []
        if stored is None:
            items = new_input(run_input.messages, [])
            if resume:
                read_resume(resume, [], now=self._now())
            driver = await agent.start(thread, lease=lease)
            if items:
                driver.submit_input(items)
            return _Thread(driver=driver, resumed=False)
        transcript = await self._store.transcript(thread) or []
        items = new_input(run_input.messages, transcript)
        rows, waiting, doubts = self._rows(stored), open_questions(stored), open_doubts(stored)
        children, questions = split_questions(waiting, self._agent)
        doubt_ids = [f"in_doubt:{d['call_id']}" for d in doubts]
        listed = ", ".join(
            [*(interrupt_id(r.call_id) for r in rows), *_question_ids(waiting), *doubt_ids]
        )
        if (rows or waiting or doubts) and items:
            raise RunRefused(
                f"thread {thread!r} has open interrupts ({listed}); new messages cannot "
                "be sent until they are answered: send a run with resume entries for them "
                "and no new messages. Nothing was changed",
                code="interrupt_open",
            )
        replies = [*read_question_answers(resume, questions), *read_child_answers(resume, children)]
        resolutions = read_resolutions(resume, doubts)
        asked_ids = {*_question_ids(waiting), *doubt_ids}
        rest = [entry for entry in resume if entry.interrupt_id not in asked_ids]
        answers = read_resume(rest, rows, now=self._now())
        if (rows or waiting or doubts) and not (answers or replies or resolutions):
            raise RunRefused(
                f"thread {thread!r} has open interrupts ({listed}); answer them with "
                "RunAgentInput.resume. Nothing was changed",
                code="interrupt_open",
            )
        await record_replies(self._store, thread, replies, label="interrupt")
        await record_decisions(
            self._decider,
            thread,
            answers,
            who=who,
            name=lambda call: f"interrupt {interrupt_id(call)!r}",
        )
        driver = await agent.resume(session_id=thread, lease=lease)
        try:
            apply_resolutions(driver, resolutions)
        except BaseException:
            await release_dropped(driver)
            raise
        if items:
            driver.submit_input(items)
        # A question's call (an earlier run's) gets its result in this run: open it with
        # the snapshot too, as a run resumed by answers is.
        asked = stored.checkpoint.get("state") in ("AWAITING_ANSWER", "AWAITING_RESOLUTION")
        return _Thread(driver=driver, resumed=bool(answers) or asked)

    async def _drive(
        self,
        run_input: RunAgentInput,
        driver: LoopDriver,
        emit: Emit,
        translator: EventTranslator,
    ) -> None:
        """Step until the driver rests, then end the run with what it rests at."""
        for _ in range(self._config.max_steps):
            step = await _next_saving_on_cancel(driver)
            match step:
                case AfterToolResult():
                    continue
                case CallQuestion():
                    answer = await stored_answer(self._store, run_input.thread_id, step.id)
                    if answer is not None:
                        answer_if_waiting(driver, run_input.thread_id, step.id, answer)
                        continue
                    translator.close()
                    emit(await self._terminal(run_input, step, emit, translator))
                    return
                case ChildApprovalRequest():
                    answer = await stored_answer(self._store, run_input.thread_id, step.question_id)
                    if answer is not None:
                        answer_if_waiting(driver, run_input.thread_id, step.question_id, answer)
                        continue
                    translator.close()
                    emit(await self._terminal(run_input, step, emit, translator))
                    return
                case ApprovalRequest() | Finished() | AwaitingInput():
                    translator.close()
                    emit(await self._terminal(run_input, step, emit, translator))
                    return
                case CallInDoubt():
                    translator.close()
                    emit(await self._terminal(run_input, step, emit, translator))
                    return
                case _:
                    assert_never(step)
        raise RunRefused(
            f"the run took more than {self._config.max_steps} steps without resting; "
            "the session is saved as it is: send another run to go on",
            code="max_steps",
        )

    async def _terminal(
        self,
        run_input: RunAgentInput,
        step: ApprovalRequest | CallQuestion | CallInDoubt | Finished | AwaitingInput,
        emit: Emit,
        translator: EventTranslator,
    ) -> BaseEvent:
        """The run's last event for the step it rests at (after its ``STATE_SNAPSHOT``)."""
        thread, run_id, usage = run_input.thread_id, run_input.run_id, translator.token_usage()
        found: list[Interrupt] = []
        if isinstance(step, ChildApprovalRequest):
            stored = await self._store.load(thread)
            children, _ = split_questions(open_questions(stored), self._agent)
            shown = children or (shown_child(step, self._agent),)
            found = [child_interrupt(child) for child in shown]
        elif isinstance(step, ApprovalRequest):
            rows = self._rows(await self._store.load(thread))
            found = interrupts(rows) if rows else [_step_interrupt(step)]
        if isinstance(step, CallQuestion):
            found = [question_interrupt(pending_of(step))]
        if isinstance(step, CallInDoubt):  # every call in doubt of the round, as stored
            doubts = open_doubts(await self._store.load(thread)) or [step_doubt(step)]
            found = [doubt_interrupt(doubt) for doubt in doubts]
        await self._state(run_input, emit, found)
        if found:
            outcome = RunFinishedInterruptOutcome(interrupts=found)
            return RunFinishedEvent(thread_id=thread, run_id=run_id, outcome=outcome, usage=usage)
        if isinstance(step, Finished) and step.result.finish_reason is FinishReason.ERROR:
            error = step.result.error
            message = str(error) if error is not None else "the model call failed"
            code = f"model_error:{error.kind.value}" if error is not None else None
            return RunErrorEvent(message=self._redactor.text(message), code=code, usage=usage)
        cancelled = (
            isinstance(step, Finished) and step.result.finish_reason is FinishReason.CANCELLED
        )
        return RunFinishedEvent(
            thread_id=thread,
            run_id=run_id,
            outcome=RunFinishedCancelledOutcome() if cancelled else None,
            usage=usage,
        )

    async def _state(self, run_input: RunAgentInput, emit: Emit, found: list[Interrupt]) -> None:
        """``STATE_SNAPSHOT``: the client's state with the session's status under ``agentloop``."""
        stored = await self._store.load(run_input.thread_id)
        state = dict(run_input.state) if isinstance(run_input.state, dict) else {}
        state["agentloop"] = {
            "sessionId": run_input.thread_id,
            "status": stored.status.value if stored is not None else None,
            "pendingInterrupts": [i.id for i in found],
        }
        emit(StateSnapshotEvent(snapshot=state))

    def _rows(self, stored: Any) -> list[InboxRow]:
        if stored is None:
            return []
        return pending_approvals(
            stored,
            schemas=self._schemas(),
            agent_name=self._config.agent_name,
            ttl=self._config.approval_ttl,
            redactor=self._redactor,
        )

    @staticmethod
    def _now() -> datetime:
        return datetime.now(UTC)


async def _next_saving_on_cancel(driver: LoopDriver) -> Step:
    """``driver.next()``; when the run is cancelled (the client left), the driver closes
    the turn (every open call answered ``cancelled``), and that is saved before the
    cancellation goes on, so the next run finds the turn closed, not calls in doubt."""
    try:
        return await driver.next()
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            try:
                await driver.save()
            except Exception:
                log.exception("saving the cancelled AG-UI run failed", session_id=driver.session_id)
        raise


def _question_ids(questions: tuple[PendingQuestion, ...]) -> list[str]:
    return [pending.question_id for pending in questions]


def _step_interrupt(step: ApprovalRequest) -> Interrupt:
    """The interrupt of the surfaced call, when the store lists none (decided meanwhile)."""
    return Interrupt(
        id=interrupt_id(step.call_id),
        reason="tool_call",
        message=step.reason or step.summary,
        tool_call_id=step.call_id,
        response_schema=response_schema(None),
    )
