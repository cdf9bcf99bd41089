"""``SessionWorker``: lease a stored session, drive it until it rests, release the lease.

What every worker of a fleet does with a store: take the oldest ready session
(``store.acquire_ready``) or a given one (``store.acquire``), resume it under
the lease (``Agent.resume(session_id=..., lease=...)``: every save and claim
is fenced with the lease's token and the decisions the store holds are
applied), call ``next()`` until the session rests, and release the lease.
While it drives, a task of the worker's task group renews the lease every
``ttl / 3``; a renewal that fails means the lease is lost: the drive is
cancelled and ``LeaseLostError`` is raised, on its own (never inside an
``ExceptionGroup``). See ``docs/store.md``, "Running many workers".
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import assert_never

import anyio
import attrs
import structlog

from ..core._errors import InvalidInputError, InvalidStateError
from ..loop._agent import Agent
from ..loop._driver import LoopDriver
from ..loop._questions import answer_if_waiting
from ..loop._release import release_dropped
from ..loop._session_store import (
    Lease,
    LeaseError,
    LeaseLostError,
    RecordedApproval,
    SessionStore,
    StaleSessionError,
    check_ttl,
    input_digest,
)
from ..loop._steps import (
    AfterToolResult,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    ChildApprovalRequest,
    Finished,
)
from ..tools._questions import QuestionAnswer
from ._problems import session_problems

__all__ = ["AdvancedSession", "RestingStep", "SessionWorker"]

log = structlog.get_logger("agentloop")

RestingStep = Finished | AwaitingInput | ApprovalRequest | CallQuestion | CallInDoubt
"""A step a worker stops at: the session waits for input, a decision, or nothing."""

_RESUMES = 3
"""Resumes per lease: one, plus one per decision recorded while the worker drove."""


@attrs.frozen(kw_only=True)
class AdvancedSession:
    """What one lease of a session did: the session and the step it rested at."""

    session_id: str
    step: RestingStep
    problems: tuple[str, ...] = ()
    """How the session as stored after the drive disagrees with its transcript
    (``agentloop.store.session_problems``; logged as a warning): empty when consistent."""


def _check_seconds(value: float | None, name: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"SessionWorker: {name} must be seconds > 0, got {value!r}")
    if value <= 0:
        raise InvalidInputError(f"SessionWorker: {name} must be seconds > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class SessionWorker:
    """Advances the sessions of ``store``, one lease at a time, with ``agent``.

    ``agent`` drives every session (bound to ``store``), or is a function of
    the session id returning the agent for it. ``owner`` names this worker in
    the leases it takes, for ``ttl`` seconds each, renewed every ``ttl / 3``
    while it drives. ``step_timeout`` (seconds, or ``None``) bounds one
    lease's drive. ``run()`` polls for ready sessions every ``poll_interval``.
    """

    store: SessionStore
    agent: Agent | Callable[[str], Agent]
    owner: str
    ttl: float = 30.0
    poll_interval: float = 0.5
    step_timeout: float | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.store, SessionStore):
            raise InvalidInputError(
                f"SessionWorker: store must be a SessionStore, got {type(self.store).__name__}"
            )
        if not isinstance(self.agent, Agent) and not callable(self.agent):
            raise InvalidInputError(
                "SessionWorker: agent must be an Agent or a function of the session id "
                f"returning one, got {type(self.agent).__name__}"
            )
        if not isinstance(self.owner, str) or not self.owner:
            raise InvalidInputError(
                f"SessionWorker: owner must be a non-empty str, got {self.owner!r}"
            )
        check_ttl(self.ttl, "create a SessionWorker")
        _check_seconds(self.poll_interval, "poll_interval")
        _check_seconds(self.step_timeout, "step_timeout", optional=True)

    async def run_once(self) -> AdvancedSession | None:
        """Lease the oldest ready session, drive it until it rests, release; ``None`` if none.

        Raises what the drive raised: ``LeaseLostError`` once the lease is
        lost (the session was released or taken over: nothing more was
        written), ``StaleSessionError`` after another writer's save. A drive
        that fails otherwise keeps its lease until it expires, so the worker
        (and the fleet) advance other sessions meanwhile and retry it after
        ``ttl``.
        """
        lease = await self.store.acquire_ready(self.owner, self.ttl)
        if lease is None:
            return None
        return await self._advance_leased(lease, keep_on_failure=True)

    async def advance(self, session_id: str) -> AdvancedSession:
        """Lease ``session_id`` (``LeaseHeldError`` if another owner holds it), drive, release.

        Raises what the drive raised, as :meth:`run_once` does; the lease is
        released whatever happens. ``InvalidInputError``, with no lease taken,
        when the store has no checkpoint for the session.
        """
        if await self.store.load(session_id) is None:
            raise InvalidInputError(
                f"cannot advance session {session_id!r}: the store has no checkpoint for it; "
                "start the session (agent.start(...) and a save) first"
            )
        lease = await self.store.acquire(session_id, self.owner, self.ttl)
        return await self._advance_leased(lease, keep_on_failure=False)

    async def run(self, *, stop: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Advance ready sessions until ``await stop()`` is true (or until cancelled).

        A session the worker could not advance is logged and left to its
        lease (see :meth:`run_once`); the worker goes on with the others. It
        sleeps ``poll_interval`` whenever no session is ready.
        """
        while stop is None or not await stop():
            advanced: AdvancedSession | None = None
            try:
                advanced = await self.run_once()
            except (LeaseError, StaleSessionError) as error:
                log.warning("session taken over; dropped it", owner=self.owner, error=str(error))
                continue
            except Exception:
                log.exception("advancing a session failed", owner=self.owner)
            if advanced is None:
                await anyio.sleep(self.poll_interval)

    async def _advance_leased(self, lease: Lease, *, keep_on_failure: bool) -> AdvancedSession:
        release = True
        try:
            step = await self._drive_renewing(lease)
        except Exception as error:
            if keep_on_failure and not isinstance(error, LeaseError | StaleSessionError):
                release = False
                log.warning(
                    "advancing the session failed; it stays leased until the lease expires",
                    session_id=lease.session_id,
                    owner=self.owner,
                    error=repr(error),
                )
            raise
        finally:
            if release:
                await self._release(lease)
        log.info(
            "session advanced",
            session_id=lease.session_id,
            owner=self.owner,
            step=type(step).__name__,
        )
        problems = await self._problems(lease.session_id)
        return AdvancedSession(session_id=lease.session_id, step=step, problems=problems)

    async def _problems(self, session_id: str) -> tuple[str, ...]:
        """What the store's consistency check finds in the session as the drive left it."""
        stored = await self.store.load(session_id)
        problems = () if stored is None else session_problems(stored)
        if problems:
            log.warning(
                "the stored session disagrees with its transcript",
                session_id=session_id,
                owner=self.owner,
                problems=list(problems),
            )
        return problems

    async def _release(self, lease: Lease) -> None:
        """Release, shielded and bounded; a failure is logged (the lease expires anyway)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            try:
                await self.store.release(lease)
            except Exception:
                log.exception(
                    "releasing the lease failed", session_id=lease.session_id, owner=self.owner
                )

    async def _drive_renewing(self, lease: Lease) -> RestingStep:
        """Drive the session while a sibling task renews the lease; one error, never a group."""
        lost: list[LeaseLostError] = []
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._renew, lease, lost, group.cancel_scope)
                with anyio.fail_after(self.step_timeout):
                    step = await self._drive(lease)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as group_error:
            failure = _single(group_error)
            if failure is group_error and not lost:
                raise  # only cancellations: ours to re-raise as they came
        if lost:
            raise lost[0]
        if failure is not None:
            raise failure
        return step

    async def _renew(
        self, lease: Lease, lost: list[LeaseLostError], scope: anyio.CancelScope
    ) -> None:
        """Renew every ``ttl / 3``; on a failure, record the loss and cancel the drive."""
        while True:
            await anyio.sleep(self.ttl / 3)
            try:
                lease = await self.store.renew(lease, self.ttl)
            except Exception as error:
                lost.append(_as_lost(lease, error))
                log.warning("lease lost; stopping", session_id=lease.session_id, owner=self.owner)
                scope.cancel()
                return

    async def _drive(self, lease: Lease) -> RestingStep:
        """Resume and step until the session rests; again if a decision came meanwhile.

        A question asked again on the resume (its call can go on from an answer)
        is answered with the answer the store holds for it, and the drive goes on;
        so is a child agent's approval (``ChildApprovalRequest``: its parent call's
        question).
        """
        agent = self._agent_for(lease.session_id)
        for _ in range(_RESUMES):
            driver = await agent.resume(session_id=lease.session_id, lease=lease)
            try:
                step = await _until_rest(driver)
                while (asked := _asked(step)) is not None and (
                    answer := await self._answer(lease, asked)
                ) is not None:
                    answer_if_waiting(driver, lease.session_id, asked, answer)
                    step = await _until_rest(driver)
            finally:  # saved as it rests: a call still waiting (a question) ends, unrecorded
                await release_dropped(driver)
            if not isinstance(step, ApprovalRequest) or not await self._decided(lease, step):
                return step
        return step

    async def _answer(self, lease: Lease, question_id: str) -> QuestionAnswer | None:
        """The answer the store holds for the question ``question_id``, or ``None``."""
        stored = await self.store.load(lease.session_id)
        recorded = stored.answers.get(question_id) if stored is not None else None
        if recorded is None:
            return None
        log.info(
            "answering a question from the store",
            session_id=lease.session_id,
            question_id=question_id,
            action=recorded.action,
        )
        return QuestionAnswer(recorded.action, recorded.content)

    def _agent_for(self, session_id: str) -> Agent:
        agent = self.agent if isinstance(self.agent, Agent) else self.agent(session_id)
        if not isinstance(agent, Agent):
            raise InvalidStateError(
                f"cannot advance session {session_id!r}: the worker's agent function "
                f"returned {type(agent).__name__}, expected an Agent"
            )
        return agent if agent.store is self.store else attrs.evolve(agent, store=self.store)

    async def _decided(self, lease: Lease, step: ApprovalRequest) -> bool:
        """Whether a decision the store holds for the surfaced call applies on a resume."""
        stored = await self.store.load(lease.session_id)
        recorded = stored.approvals.get(step.call_id) if stored is not None else None
        if recorded is None:
            return False
        if not _applicable(recorded, step):
            raise InvalidStateError(
                f"cannot apply the decision recorded for call {step.call_id} "
                f"({step.tool_name}) of session {lease.session_id!r}: it approves input "
                f"{recorded.input_digest}, not the call's, and no edited input was "
                "recorded with it; decide the call in a host (Agent.resume) instead"
            )
        return True


def _asked(step: RestingStep) -> str | None:
    """The question ``step`` waits on (a ``CallQuestion``'s, or the one a child agent's
    approval travels in), or ``None``."""
    if isinstance(step, CallQuestion):
        return step.id
    if isinstance(step, ChildApprovalRequest):
        return step.question_id
    return None


async def _until_rest(driver: LoopDriver) -> RestingStep:
    """``next()`` until the session waits for input or a decision, or finished with none queued."""
    while True:
        step = await driver.next()
        if isinstance(step, AfterToolResult):
            continue
        if isinstance(step, Finished):
            if driver.snapshot().pending_input or driver.queued_follow_ups:
                continue
            return step
        if isinstance(step, AwaitingInput | ApprovalRequest | CallQuestion):
            return step  # a question: answered from the store (_drive), else it rests
        if isinstance(step, CallInDoubt):
            return step  # it rests saved: a host resumes the session and resolves it
        assert_never(step)


def _applicable(recorded: RecordedApproval, step: ApprovalRequest) -> bool:
    """Whether resuming applies ``recorded`` to the call (as ``Agent.resume`` decides)."""
    if not recorded.approved or recorded.input_digest == input_digest(step.tool_name, step.input):
        return True
    edited = recorded.edited_input
    return edited is not None and recorded.input_digest == input_digest(step.tool_name, edited)


def _as_lost(lease: Lease, error: Exception) -> LeaseLostError:
    if isinstance(error, LeaseLostError):
        return error
    lost = LeaseLostError(
        f"cannot renew the lease of session {lease.session_id!r} (token {lease.token}): "
        f"{type(error).__name__}: {error}; stopped driving the session (another worker "
        "takes it over once the lease expires)",
        session_id=lease.session_id,
    )
    lost.__cause__ = error
    return lost


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error to raise for ``group``: a lost lease first, else the first non-cancellation.

    ``group`` itself when it holds only cancellations (re-raised unchanged).
    """
    cancelled = anyio.get_cancelled_exc_class()
    leaves = list(_leaves(group))
    real = [leaf for leaf in leaves if not isinstance(leaf, cancelled)]
    if not real:
        return group
    for leaf in real:
        if isinstance(leaf, LeaseLostError):
            return leaf
    return real[0]


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
