"""``run()``: drive a driver to the end of a turn and return a :class:`RunResult`.

Everything here is a loop over ``await driver.next()``: no second loop
implementation. ``AfterToolResult`` pauses are continued, approvals go to the
``approve`` callback (or stop the run), and ``max_steps`` bounds the number of
``next()`` calls.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from typing import Any, Generic, TypeAlias, assert_never, cast

import anyio
import attrs
from typing_extensions import TypeVar

from .._log import get_logger
from ..core._cancellation import CancellationHandle
from ..core._errors import InvalidInputError, InvalidStateError, ProviderError, ProviderErrorKind
from ..core._items import FinishReason, Item, ItemKind, Usage
from ..core._transcript import find_violation
from ..loop._agent import Agent
from ..loop._driver import LoopDriver
from ..loop._events import TurnResult
from ..loop._output import OUTPUT_ACCEPTED_KEY
from ..loop._steps import (
    AfterToolResult,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    CallInDoubt,
    CallQuestion,
    Finished,
    Step,
)
from ..model._session_config import SessionConfig
from ..tools._questions import QuestionAnswer

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_SESSION_ID",
    "Approver",
    "RunResult",
    "TurnRetryPolicy",
    "RunStopReason",
    "continue_from",
    "run",
]

log = get_logger()

OutT = TypeVar("OutT", default=Any)

DEFAULT_MAX_STEPS = 100
"""How many ``driver.next()`` calls one ``run()`` makes at most by default."""

DEFAULT_SESSION_ID = "run"
"""The session id ``run()`` and ``stream()`` use when no ``config`` is given."""

Approver: TypeAlias = Callable[
    [ApprovalRequest], ApprovalAnswer | bool | Awaitable[ApprovalAnswer | bool]
]
"""A sync or async callable that answers one :class:`ApprovalRequest` with an
:class:`ApprovalAnswer`, or ``True`` (approve) / ``False`` (deny)."""

QuestionAnswerer: TypeAlias = Callable[[CallQuestion], QuestionAnswer | Awaitable[QuestionAnswer]]
"""A sync or async callable that answers one :class:`CallQuestion` (``run(answer=...)``)."""


def _non_negative(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"TurnRetryPolicy.{attribute.name} must be a number, got {value!r}")
    if value < 0:
        raise InvalidInputError(f"TurnRetryPolicy.{attribute.name} must be >= 0, got {value!r}")


def _attempts(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"TurnRetryPolicy.max_retries must be an int >= 0, got {value!r}")


def _kinds(value: Any) -> frozenset[ProviderErrorKind]:
    kinds = frozenset(value)
    for kind in kinds:
        if not isinstance(kind, ProviderErrorKind):
            raise InvalidInputError(
                f"TurnRetryPolicy.retry_on expects ProviderErrorKind values, got {kind!r}"
            )
    return kinds


@attrs.frozen(kw_only=True)
class TurnRetryPolicy:
    """Turn-level retries for :func:`run` and :func:`~agentloop.stream`.

    When a turn ends with ``FinishReason.ERROR`` and its error's kind is in
    ``retry_on`` (default: ``RETRYABLE`` only), the run sleeps
    ``initial_delay * multiplier ** n`` seconds (capped at ``max_delay``; ``n``
    counts this turn's retries from 0) and calls ``driver.retry()``, at most
    ``max_retries`` times per turn. These retries come on top of the model
    adapter's own request retries.
    """

    max_retries: int = attrs.field(default=2, validator=_attempts)
    initial_delay: float = attrs.field(default=1.0, validator=_non_negative)
    multiplier: float = attrs.field(default=2.0, validator=_non_negative)
    max_delay: float = attrs.field(default=30.0, validator=_non_negative)
    retry_on: frozenset[ProviderErrorKind] = attrs.field(
        default=frozenset({ProviderErrorKind.RETRYABLE}), converter=_kinds
    )

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        return float(min(self.initial_delay * self.multiplier**retry, self.max_delay))

    def allows(self, error: ProviderError | None, retries: int) -> bool:
        """Whether a turn that failed with ``error`` after ``retries`` retries is retried."""
        return error is not None and error.kind in self.retry_on and retries < self.max_retries


class RunStopReason(StrEnum):
    """Why a run returned."""

    FINISHED = "finished"
    """A turn ended (see ``RunResult.finish_reason``: completed, cancelled, limit_reached...)."""
    APPROVAL_REQUIRED = "approval_required"
    """A call needs approval and no approver answered it; see ``pending_approval``."""
    MAX_STEPS = "max_steps"
    """``max_steps`` calls of ``next()`` were made before the turn ended."""
    AWAITING_INPUT = "awaiting_input"
    """The driver had nothing to answer (no input was queued)."""
    QUESTION_PENDING = "question_pending"
    """A running call asked a question and no ``answer`` callback answered it; see
    ``pending_question`` (the call still waits in this process: answer it and call
    :func:`continue_from`)."""
    CALL_IN_DOUBT = "call_in_doubt"
    """A restore left a call in doubt and the agent asks the host (``ask_in_doubt``); see
    ``pending_in_doubt``: settle, fail or run it again, then call :func:`continue_from`."""


@attrs.frozen
class RunResult(Generic[OutT]):
    """The outcome of :func:`run` or :func:`~agentloop.stream`.

    ``turns`` are the turns that finished during the run, ``usage`` is summed
    over every model call of the run, ``transcript`` is the whole session
    history afterwards. ``pending_approval`` is set when the run stopped at an
    approval: answer it (``approve()`` / ``deny()``) and call
    :func:`continue_from`, or pass ``approve=`` there. ``output`` is the typed
    answer of an agent built with ``.output(T)``.
    """

    final_text: str
    turns: tuple[TurnResult, ...]
    usage: Usage
    stop_reason: RunStopReason
    transcript: tuple[Item, ...]
    steps: int
    config: SessionConfig
    pending_approval: ApprovalRequest | None = None
    pending_question: CallQuestion | None = None
    pending_in_doubt: CallInDoubt | None = None
    """The call in doubt the run stopped at (``CALL_IN_DOUBT``)."""
    agent: Agent | None = attrs.field(default=None, eq=False, repr=False)
    driver: LoopDriver | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def output(self) -> OutT:
        """The last turn's validated structured output (``None`` for an agent built
        without ``.output()``). Raises ``InvalidStateError`` when the run did not end
        with one (it stopped at an approval, or the turn failed: see ``error``)."""
        spec = self.driver.config.output if self.driver is not None else None
        if spec is None and self.agent is not None:
            spec = self.agent.output
        if spec is None:
            return cast(OutT, None)
        last = self.turns[-1] if self.turns else None
        if last is None or last.metadata.get(OUTPUT_ACCEPTED_KEY) is not True:
            ended = (
                "no turn finished"
                if last is None
                else f"the last turn ended {last.finish_reason.value}"
            )
            why = f": {last.error}" if last is not None and last.error is not None else ""
            raise InvalidStateError(
                f"cannot read the output {spec.name!r}: the run stopped with "
                f"{self.stop_reason.value} and {ended}{why}; no validated output exists"
            )
        return cast(OutT, last.output)

    @property
    def finish_reason(self) -> FinishReason | None:
        """How the last finished turn ended (``None`` if no turn finished)."""
        return self.turns[-1].finish_reason if self.turns else None

    @property
    def error(self) -> ProviderError | None:
        """The error of the last finished turn, when it ended with ``FinishReason.ERROR``."""
        return self.turns[-1].error if self.turns else None

    @property
    def is_paused(self) -> bool:
        """Whether the run stopped inside a turn (at an approval or ``max_steps``)."""
        return self.stop_reason in (
            RunStopReason.APPROVAL_REQUIRED,
            RunStopReason.MAX_STEPS,
            RunStopReason.QUESTION_PENDING,
            RunStopReason.CALL_IN_DOUBT,
        )

    def continuation(self, agent: Agent | None = None) -> Agent:
        """An agent whose prior transcript is this run's transcript (seed 001's continuation).

        ``agent`` defaults to the run's own agent; give another to continue with
        a different model or tools. Raises ``InvalidStateError`` for a paused run
        whose transcript has unanswered calls: use :func:`continue_from` instead.
        """
        base = agent if agent is not None else self.agent
        if base is None:
            raise InvalidInputError(
                "cannot build a continuation: this RunResult holds no agent; "
                "pass continuation(agent=...)"
            )
        violation = find_violation(self.transcript)
        if violation is not None:
            raise InvalidStateError(
                f"cannot build a continuation of a run stopped with {self.stop_reason.value}: "
                f"{violation.message}; call continue_from(result) to resume the same driver"
            )
        return attrs.evolve(base, transcript=self.transcript, input=())


class DriveHooks:
    """Extension points for :func:`drive_run` (``stream()`` forwards steps through them)."""

    __slots__ = ()

    async def after_step(self, step: Step) -> None:
        """Called after every ``next()`` with the step it returned."""

    async def resolved_by_host(self, request: ApprovalRequest) -> bool:
        """Whether the host already answered ``request`` (before ``approve`` is asked)."""
        return False


_NO_HOOKS = DriveHooks()
"""Shared: the base hooks keep no state."""


def prompt_items(operation: str, prompt: str | Sequence[Item]) -> tuple[Item, ...]:
    """A prompt as input items: a string becomes one user item."""
    if isinstance(prompt, str):
        if not prompt:
            raise InvalidInputError(
                f"{operation}: the prompt is an empty string; give some text or a list of Items"
            )
        return (Item.text(ItemKind.USER, prompt),)
    if isinstance(prompt, Item):
        raise InvalidInputError(f"{operation}: expected a str or a list of Items, got one Item")
    items = tuple(prompt)
    if not items:
        raise InvalidInputError(f"{operation}: the prompt is an empty list; give at least one Item")
    for position, item in enumerate(items):
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"{operation}: prompt element {position} is {type(item).__name__}, not an Item"
            )
    return items


def session_config(config: SessionConfig | str | None) -> SessionConfig:
    """``config`` as a SessionConfig (a str is a session id; ``None`` the default id)."""
    if config is None:
        return SessionConfig(DEFAULT_SESSION_ID)
    if isinstance(config, str):
        return SessionConfig(config)
    return config


def check_retry(operation: str, retry: TurnRetryPolicy | None) -> None:
    """Refuse a ``retry`` that is not a TurnRetryPolicy."""
    if retry is not None and not isinstance(retry, TurnRetryPolicy):
        raise InvalidInputError(
            f"{operation}: retry must be a TurnRetryPolicy or None, got {type(retry).__name__}"
        )


def check_max_steps(operation: str, max_steps: int) -> None:
    """Refuse a ``max_steps`` below 1."""
    if not isinstance(max_steps, int) or max_steps < 1:
        raise InvalidInputError(f"{operation}: max_steps must be an int >= 1, got {max_steps!r}")


async def run(
    agent: Agent[Any, OutT],
    prompt: str | Sequence[Item],
    *,
    approve: Approver | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    config: SessionConfig | str | None = None,
    retry: TurnRetryPolicy | None = None,
    answer: QuestionAnswerer | None = None,
) -> RunResult[OutT]:
    """Start a driver for ``agent`` with ``prompt`` as input and drive it until the turn ends.

    ``approve`` answers approval requests; without it the run stops with
    ``stop_reason="approval_required"``. ``answer`` answers the questions running
    calls ask (:class:`CallQuestion`); without it the run stops with
    ``stop_reason="question_pending"``. After ``max_steps`` calls of
    ``next()`` the run stops with ``stop_reason="max_steps"`` (no exception);
    both kinds of stop can be resumed with :func:`continue_from`. A failed
    model call ends the turn with ``FinishReason.ERROR`` (``result.error``
    holds the ``ProviderError``); ``retry`` retries such turns (see
    :class:`TurnRetryPolicy`). Errors that fail the driver (a ``MutatorError``, a
    bug) propagate.
    """
    items = prompt_items("run", prompt)
    check_max_steps("run", max_steps)
    check_retry("run", retry)
    settings = session_config(config)
    driver = await attrs.evolve(agent, input=agent.input + items).start(settings)
    return await drive_run(
        driver, agent, settings, approve=approve, max_steps=max_steps, retry=retry, answer=answer
    )


async def continue_from(
    result: RunResult[OutT],
    prompt: str | Sequence[Item] | None = None,
    *,
    agent: Agent[Any, OutT] | None = None,
    approve: Approver | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    retry: TurnRetryPolicy | None = None,
    answer: QuestionAnswerer | None = None,
) -> RunResult[OutT]:
    """Ask again after ``result``.

    A finished run: starts a new driver on ``result.continuation(agent)`` (the
    prior transcript as history) with ``prompt`` as input. A paused run
    (approval required, max steps): resumes the same driver, after the host
    answered ``result.pending_approval`` or with ``approve`` (a pending question:
    ``result.pending_question`` or ``answer``); ``prompt`` is
    only accepted at a pause that takes input (not at an approval). A run
    whose turn failed (``result.error``) without a prompt retries the failed
    model call on the same driver (``driver.retry()``).
    """
    check_max_steps("continue_from", max_steps)
    check_retry("continue_from", retry)
    driver = result.driver
    if prompt is None and result.error is not None and driver is not None and agent is None:
        return await _retry_failed_turn(result, driver, approve, max_steps, retry)
    if not result.is_paused:
        if prompt is None:
            raise InvalidInputError(
                f"continue_from: the run stopped with {result.stop_reason.value}, so there is "
                "nothing to resume; give a prompt to ask again"
            )
        return await run(
            result.continuation(agent),
            prompt,
            approve=approve,
            max_steps=max_steps,
            config=result.config,
            retry=retry,
            answer=answer,
        )
    return await drive_run(
        _paused_driver(result, prompt, agent),
        result.agent,
        result.config,
        approve=approve,
        max_steps=max_steps,
        retry=retry,
        answer=answer,
    )


async def _retry_failed_turn(
    result: RunResult[OutT],
    driver: LoopDriver,
    approve: Approver | None,
    max_steps: int,
    retry: TurnRetryPolicy | None,
) -> RunResult[OutT]:
    """``continue_from`` a run whose turn failed, without a prompt: its driver retries the
    failed model call (refused once the driver moved on)."""
    if driver.retry_point is None:
        raise InvalidStateError(
            "continue_from: the run's turn failed but its driver moved on since; "
            "give a prompt to ask again"
        )
    return await drive_run(
        driver,
        result.agent,
        result.config,
        approve=approve,
        max_steps=max_steps,
        retry=retry,
        first=driver.retry,
    )


def _paused_driver(
    result: RunResult[Any], prompt: str | Sequence[Item] | None, agent: Agent[Any, Any] | None
) -> LoopDriver:
    """The driver of the paused run ``result``, with ``prompt`` submitted if given; refuses
    another agent, or a prompt while an approval waits."""
    driver = result.driver
    if driver is None or agent is not None:
        raise InvalidInputError(
            f"continue_from: a run stopped at {result.stop_reason.value} can only resume its "
            "own driver; do not pass agent= (the result must come from run() or stream())"
        )
    if prompt is not None:
        if result.pending_approval is not None:
            raise InvalidStateError(
                f"continue_from: the run is waiting for approval of "
                f"{result.pending_approval.call_id}; answer it (result.pending_approval."
                "approve()/deny() or approve=) and resume without a prompt"
            )
        driver.submit_input(prompt_items("continue_from", prompt))
    return driver


async def drive_run(
    driver: LoopDriver,
    agent: Agent | None,
    config: SessionConfig,
    *,
    approve: Approver | None,
    max_steps: int,
    hooks: DriveHooks | None = None,
    retry: TurnRetryPolicy | None = None,
    first: Callable[[], Awaitable[Step]] | None = None,
    answer: QuestionAnswerer | None = None,
) -> RunResult:
    """Call ``driver.next()`` until a turn finishes, an approval stops it, or ``max_steps``.

    ``first`` replaces the first ``next()`` (``continue_from`` passes ``driver.retry``);
    a turn that failed with an error ``retry`` allows is retried after its delay.
    """
    # Without hooks nobody sees an AfterToolResult pause: the step loop goes on through
    # them within one call (each still counts as a step; one frame less per waiting
    # run); a driver with a store still takes every step (each pause is saved).
    through_pauses = hooks is None
    hooks = hooks or _NO_HOOKS
    usage_before = driver.usage
    turns: tuple[TurnResult, ...] = ()  # a tuple per turn: no list held while waiting
    steps = retries = 0
    advance: Callable[[], Awaitable[Step]] | None = first  # else driver.next

    while steps < max_steps:
        if advance is None and through_pauses:
            runner = driver._runner
            step = await runner.next_through_pauses(max_steps - steps - 1, driver)
            steps += runner.passed
        else:
            step = await (advance or driver.next)()
        advance = None
        steps += 1
        await hooks.after_step(step)
        if isinstance(step, Finished):
            turns = (*turns, step.result)
            if retry is not None and retry.allows(step.result.error, retries):
                retries = await _wait_to_retry(step.result, retry, retries)
                advance = driver.retry
                continue
            retries = 0
            stop = _stop_after(driver, step)
        else:
            stop = await _stop_at(driver, agent, step, approve, answer, hooks)
        if stop is not None:
            return _run_result(stop, driver, agent, config, turns, usage_before, steps, step)
    return _run_result(RunStopReason.MAX_STEPS, driver, agent, config, turns, usage_before, steps)


def _stop_after(driver: LoopDriver, finished: Finished) -> RunStopReason | None:
    """``FINISHED`` unless the turn ended well with input queued for another turn."""
    if finished.result.error is not None or not driver.snapshot().pending_input:
        return RunStopReason.FINISHED
    return None


async def _wait_to_retry(failed: TurnResult, retry: TurnRetryPolicy, retries: int) -> int:
    """Sleep ``retry``'s delay before the failed turn's retry; the retries made so far."""
    error = failed.error
    assert error is not None
    delay = retry.delay(retries)
    log.info(
        "retrying a failed turn",
        turn_id=failed.turn_id,
        kind=error.kind.value,
        retry=retries + 1,
        delay=delay,
    )
    await anyio.sleep(delay)
    return retries + 1


_Paused: TypeAlias = AwaitingInput | AfterToolResult | ApprovalRequest | CallQuestion | CallInDoubt
"""Every step but ``Finished``."""


async def _stop_at(
    driver: LoopDriver,
    agent: Agent | None,
    step: _Paused,
    approve: Approver | None,
    answer: QuestionAnswerer | None,
    hooks: DriveHooks,
) -> RunStopReason | None:
    """Why ``drive_run`` stops at the interrupt ``step``, or ``None`` once it answered it
    (``approve``, ``answer``) or it is a pause to go on through."""
    if isinstance(step, AwaitingInput):
        return RunStopReason.AWAITING_INPUT
    if isinstance(step, ApprovalRequest):
        cancellation = agent.cancellation if agent is not None else None
        if await _answer(driver, step, approve, hooks, cancellation):
            return None
        return RunStopReason.APPROVAL_REQUIRED
    if isinstance(step, CallQuestion):
        if answer is None:
            return RunStopReason.QUESTION_PENDING
        await _answer_question(driver, step, answer)
        return None
    if isinstance(step, CallInDoubt):
        return RunStopReason.CALL_IN_DOUBT
    if isinstance(step, AfterToolResult):
        return None
    assert_never(step)


def _run_result(
    reason: RunStopReason,
    driver: LoopDriver,
    agent: Agent | None,
    config: SessionConfig,
    turns: tuple[TurnResult, ...],
    usage_before: Usage | None,
    steps: int,
    step: Step | None = None,
) -> RunResult:
    """What ``drive_run`` returns when it stops at ``step`` (a function, not a closure: a
    running ``drive_run`` holds no cells for it)."""
    return RunResult(
        final_text=_final_text(turns),
        turns=turns,
        usage=_usage_since(usage_before, driver.usage),
        stop_reason=reason,
        transcript=driver.snapshot().transcript,
        steps=steps,
        config=config,
        pending_approval=step if isinstance(step, ApprovalRequest) else None,
        pending_question=step if isinstance(step, CallQuestion) else None,
        pending_in_doubt=step if isinstance(step, CallInDoubt) else None,
        agent=agent,
        driver=driver,
    )


async def _answer(
    driver: LoopDriver,
    request: ApprovalRequest,
    approve: Approver | None,
    hooks: DriveHooks,
    cancellation: CancellationHandle | None,
) -> bool:
    """Resolve ``request`` through the host or ``approve``; ``False`` if nobody answered."""
    if await hooks.resolved_by_host(request):
        return True
    if approve is None:
        return False
    generation = cancellation.generation if cancellation is not None else 0
    answer = approve(request)
    if inspect.isawaitable(answer):
        answer = await answer
    decision = _decision(answer, request)
    if cancellation is not None and cancellation.generation != generation:
        # The turn was interrupted while the approver thought: drop the
        # answer; the next step closes the turn as cancelled.
        return True
    driver.answer_approval_for(request.call_id, decision)
    return True


async def _answer_question(
    driver: LoopDriver, question: CallQuestion, answer: QuestionAnswerer
) -> None:
    """Answer ``question`` with what ``answer`` returns (checked by the driver)."""
    reply = answer(question)
    if inspect.isawaitable(reply):
        reply = await reply
    driver.answer_question_for(question.id, reply)


def _decision(answer: object, request: ApprovalRequest) -> ApprovalAnswer:
    if isinstance(answer, ApprovalAnswer):
        return answer
    if isinstance(answer, bool):
        return ApprovalAnswer.approve() if answer else ApprovalAnswer.deny()
    raise InvalidInputError(
        f"approve callback: for {request.call_id} ({request.tool_name}) it returned "
        f"{answer!r}; expected an ApprovalAnswer (ApprovalAnswer.approve(), "
        ".approve_with(input), .deny(reason)) or a bool"
    )


def _final_text(turns: Sequence[TurnResult]) -> str:
    if not turns:
        return ""
    texts = (item.text_content for item in turns[-1].final_items)
    return "\n".join(text for text in texts if text)


def _usage_since(before: Usage | None, after: Usage | None) -> Usage:
    if after is None:
        return Usage()
    if before is None:
        return after
    cost = None
    if after.cost is not None:
        cost = after.cost - (before.cost or 0.0)
    return Usage(
        after.input_tokens - before.input_tokens,
        after.output_tokens - before.output_tokens,
        after.reasoning_tokens - before.reasoning_tokens,
        after.cache_read_tokens - before.cache_read_tokens,
        after.cache_write_tokens - before.cache_write_tokens,
        cost,
    )
