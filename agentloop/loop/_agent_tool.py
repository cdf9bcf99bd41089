"""An agent as a tool of another (``Agent.as_tool``): the child runs its own driver,
nested in the parent's tool round, with its own transcript.

The call's ``invoke`` starts a driver for the child agent (session
``<parent session>/<call id>``), submits the call's ``input`` and drives it
step by step. The child's approvals and its calls' questions go up through
``ToolContext.ask`` (``_nested.child_question``): the parent's driver shows
them to its host as the child's own step with a ``path``, and the answer comes
back down to the child. When the child's turn ends, its final answer is the
call's result, and its usage rides on the result (``CHILD_USAGE_KEY``) into
the parent's usage and limits.

A cancelled call closes the child's turn first (every call in the child's
transcript answered "cancelled"), bounded and shielded, then lets the
cancellation go on.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs

from .._log import get_logger
from ..core._cancellation import CancellationController
from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import FinishReason, Item, Usage
from ..core._tool_spec import ToolSpec
from ..model._session_config import LoopLimits, SessionConfig
from ..tools._questions import QuestionAnswer
from ..tools._tool import ToolContext, ToolOutput, ToolRequest
from ._child_checkpoint import child_resume, restore_child
from ._child_usage import CHILD_USAGE_KEY, usage_fields
from ._converter import structure, unstructure
from ._driver import LoopDriver
from ._driver_parts import CLEANUP_SECONDS
from ._events import TurnResult
from ._nested import child_question, decision_of
from ._questions import answer_if_waiting
from ._state import DriverState
from ._steps import (
    AfterToolResult,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    CallQuestion,
    Finished,
    Step,
)

__all__ = ["CHILD_SESSION_KEY", "AgentTool", "ChildRun"]

log = get_logger()

CHILD_SESSION_KEY = "agent.session_id"
"""Tool result metadata: the session id of the child agent the call ran."""

_RESTING = (DriverState.AWAITING_APPROVAL, DriverState.AWAITING_ANSWER,
            DriverState.AFTER_TOOL_RESULT)  # fmt: skip


@attrs.frozen
class ChildRun:
    """How one call's run of a child agent ended (given to ``as_tool(on_run=...)``).

    ``transcript`` is the child's whole transcript, ``usage`` its usage
    (grandchildren's included), ``result`` the child's last turn (``None`` if
    its driver raised before a turn ended).
    """

    call_id: str
    session_id: str
    transcript: tuple[Item, ...]
    usage: Usage | None
    result: TurnResult | None


def _input_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": description}},
        "required": ["input"],
        "additionalProperties": False,
    }


class AgentTool:
    """A tool whose call runs a child :class:`~agentloop.Agent` (see ``Agent.as_tool``;
    ``agent`` is that ``Agent``)."""

    asks_host = True
    timeout: float | None = None
    max_output_chars: int | None = None
    ask_approval: Callable[[ApprovalRequest], Awaitable[Any]] | None = None
    """Who answers the child's approvals (``None``: the parent's host, through
    ``ToolContext.ask``); a DBOS workflow waits for them durably (``agentloop.durable``)."""

    def __init__(
        self,
        agent: Any,
        *,
        name: str,
        description: str,
        input_description: str = "What to ask the agent, in plain words.",
        limits: LoopLimits | None = None,
        on_run: Callable[[ChildRun], None] | None = None,
    ) -> None:
        if limits is not None and not isinstance(limits, LoopLimits):
            raise InvalidInputError(
                f"Agent.as_tool({name!r}): limits must be a LoopLimits or None, got {limits!r}"
            )
        self.spec = ToolSpec(name, description, _input_schema(input_description))
        self.agent = agent
        self.limits = limits
        self.on_run = on_run

    def __repr__(self) -> str:
        return f"AgentTool({self.spec.name!r})"

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput:
        """Run the child agent on the call's ``input``; its final answer is the result."""
        controller = CancellationController()
        # A child's calls in doubt after a restore are answered in doubt: its host is the
        # parent's call, which has no way to ask about them.
        agent = attrs.evolve(
            self.agent, cancellation=controller.handle(), input=(), ask_in_doubt=False
        )
        session_id = f"{ctx.session_id}/{ctx.call_id}"
        resumed = ctx.resumed
        restored = None if resumed is None else await restore_child(agent, resumed.question.resume)
        if restored is not None:  # a restored parent: the child goes on from its checkpoint
            assert resumed is not None
            driver = restored
            _answer_restored(driver, resumed.question.data, resumed.answer)
        else:
            config = SessionConfig(session_id) if self.limits is None else SessionConfig(
                session_id, limits=self.limits
            )  # fmt: skip
            driver = await agent.start(config)
            driver.submit_input(str(request.input["input"]))
        result: TurnResult | None = None
        try:
            result = await self._drive(driver, ctx)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_SECONDS):
                result = await _close(driver, controller)
            raise
        finally:
            if self.on_run is not None:
                transcript = driver.snapshot().transcript
                self.on_run(ChildRun(ctx.call_id, session_id, transcript, driver.usage, result))
        return self._output(result, driver)

    async def _drive(self, driver: LoopDriver, ctx: ToolContext) -> TurnResult | None:
        """Step the child to the end of its turn, carrying its interrupts up."""
        while True:
            step = await driver.next()
            if isinstance(step, Finished):
                return step.result
            if isinstance(step, AwaitingInput):
                return None
            if isinstance(step, ApprovalRequest):
                if self.ask_approval is not None:
                    await self.ask_approval(step)
                else:
                    await _ask_approval(driver, step, ctx)
            elif isinstance(step, CallQuestion):
                answer = await ctx.ask(child_question(step, child_resume(driver)))
                # Withdrawn meanwhile (the child's call stopped waiting): logged, goes on.
                answer_if_waiting(driver, driver.session_id, step.id, answer)
            else:
                assert isinstance(step, AfterToolResult)

    def _output(self, result: TurnResult | None, driver: LoopDriver) -> ToolOutput:
        """The call's result: the child's final answer, with its usage."""
        metadata: dict[str, Any] = {CHILD_SESSION_KEY: driver.session_id}
        if driver.usage is not None:
            metadata[CHILD_USAGE_KEY] = usage_fields(driver.usage)
        name = self.spec.name
        if result is None:
            return ToolOutput(f"agent {name} gave no answer", True, metadata)
        text = _final_text(result)
        if result.finish_reason is FinishReason.COMPLETED:
            if result.output is not None:
                return ToolOutput(
                    json.dumps(unstructure(result.output), default=str), False, metadata
                )
            return ToolOutput(text or "(no answer)", False, metadata)
        why = str(result.error) if result.error is not None else text or "no answer"
        return ToolOutput(f"agent {name} ended ({result.finish_reason.value}): {why}", True,
                          metadata)  # fmt: skip


def _final_text(result: TurnResult) -> str:
    texts = (item.text_content for item in result.final_items)
    return "\n".join(text for text in texts if text)


def _answer_restored(driver: LoopDriver, data: Any, answer: QuestionAnswer) -> None:
    """Give a child restored from its checkpoint the ``answer`` its parent's host gave
    before the restore, on the step it was given for (``data``: the question's, naming
    that step; a restored child may show its steps in another order, so never "the
    first step it shows"). An answer the child refuses is logged: it asks again."""
    inner = structure(data["step"], Step) if isinstance(data, dict) and "step" in data else None
    try:
        if isinstance(inner, ApprovalRequest):
            driver.answer_approval_for(inner.call_id, decision_of(answer))
        elif isinstance(inner, CallQuestion):
            driver.answer_question_for(inner.id, answer)
        else:
            raise InvalidStateError(f"the question names no step of the child: {data!r}")
    except (InvalidInputError, InvalidStateError) as error:
        log.warning("restored child refused its answer", error=str(error))


async def _ask_approval(driver: LoopDriver, step: ApprovalRequest, ctx: ToolContext) -> None:
    """Ask the parent's host for the child's approval; answer the child with its decision."""
    try:
        answer = await ctx.ask(child_question(step, child_resume(driver)))
    except InvalidStateError as error:  # nobody above can answer: the child's call is denied
        log.warning("child approval cannot surface", call_id=step.call_id, error=str(error))
        driver.answer_approval_for(step.call_id, _denial(error))
        return
    try:
        driver.answer_approval_for(step.call_id, decision_of(answer))
    except InvalidInputError as error:  # an edit the child refuses: asked again next step
        log.warning("child approval answer refused", call_id=step.call_id, error=str(error))


def _denial(error: Exception) -> ApprovalAnswer:
    return ApprovalAnswer.deny(f"no host can answer this approval: {error}")


async def _close(driver: LoopDriver, controller: CancellationController) -> TurnResult | None:
    """Close the child's turn after its parent's call was cancelled: a child resting on
    an interrupt is interrupted and stepped once, so every call it made is answered."""
    if driver.state not in _RESTING:
        return None
    controller.interrupt()
    step = await driver.next()
    return step.result if isinstance(step, Finished) else None
