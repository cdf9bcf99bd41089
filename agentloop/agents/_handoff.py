"""Handoffs: a tool call hands the conversation to another agent.

``handoff(agent, name=..., description=...)`` is a tool; when the model calls
it, its result says so (``HANDOFF_KEY`` in the result's metadata). After that
round (an ``AfterToolResult`` step), :func:`take_handoff` starts the target
agent on the history so far, made portable (``_history.portable_history``),
without the transfer round, and passed through the handoff's ``history``
filter; the new driver's ``continue_turn()`` lets the target answer.
:func:`run_handoffs` drives a conversation through any number of handoffs.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from ..core._errors import InvalidInputError
from ..core._items import Item, ItemKind
from ..core._tool_spec import ToolSpec
from ..loop._agent import Agent
from ..loop._driver import LoopDriver
from ..loop._steps import (
    AfterToolResult,
    ApprovalAnswer,
    ApprovalRequest,
    AwaitingInput,
    CallQuestion,
    Finished,
    Step,
)
from ..model._session_config import SessionConfig
from ..tools._questions import QuestionAnswer
from ..tools._tool import ToolContext, ToolOutput, ToolRequest
from ._history import HistoryFilter, checked_history, portable_history, without_round

__all__ = [
    "HANDOFF_KEY",
    "Handoff",
    "HandoffResult",
    "handoff",
    "run_handoffs",
    "take_handoff",
]

HANDOFF_KEY = "agent.handoff"
"""Tool result metadata: the name of the handoff tool whose call handed the conversation on."""

_INPUT = {
    "type": "object",
    "properties": {"reason": {"type": "string", "description": "Why you hand over."}},
    "additionalProperties": False,
}


class Handoff:
    """A tool whose call hands the conversation to ``agent`` (see :func:`handoff`)."""

    def __init__(
        self, agent: Agent[Any, Any], name: str, description: str, history: HistoryFilter | None
    ) -> None:
        if not isinstance(agent, Agent):
            raise InvalidInputError(
                f"handoff({name!r}) expects an Agent to hand over to, got {type(agent).__name__}"
            )
        if history is not None and not callable(history):
            raise InvalidInputError(
                f"handoff({name!r}): history must be a callable (items -> items) or None, "
                f"got {history!r}"
            )
        self.spec = ToolSpec(name, description, _INPUT)
        self.agent = agent
        self.history = history

    def __repr__(self) -> str:
        return f"Handoff({self.spec.name!r})"

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> ToolOutput:
        """Acknowledge the transfer; the host hands over after the round."""
        return ToolOutput(f"Handed over ({self.spec.name}).", False, {HANDOFF_KEY: self.spec.name})

    def handed_history(self, transcript: Sequence[Item], call_id: str) -> tuple[Item, ...]:
        """What the target agent gets: the portable history without the transfer round's
        call ``call_id``, through the ``history`` filter, checked."""
        items = without_round(portable_history(transcript), frozenset({call_id}))
        if self.history is not None:
            items = tuple(self.history(items))
        return checked_history(f"handoff {self.spec.name!r}", items)


def handoff(
    agent: Agent[Any, Any],
    *,
    name: str,
    description: str,
    history: HistoryFilter | None = None,
) -> Handoff:
    """A tool that hands the conversation to ``agent`` when the model calls it.

    ``history`` (items -> items) chooses what ``agent`` sees of the conversation
    so far (default: all of it, made portable); its answer must stay a valid
    transcript ending in input, else the handoff raises ``InvalidInputError``.
    """
    return Handoff(agent, name, description, history)


def _asked_handoff(
    agent: Agent[Any, Any], transcript: Sequence[Item]
) -> tuple[Handoff, str] | None:
    """The handoff tool (and its call id) the last tool round called first, if any."""
    if not transcript or transcript[-1].kind is not ItemKind.TOOL:
        return None
    round_start = len(transcript)
    while round_start > 0 and transcript[round_start - 1].kind is ItemKind.TOOL:
        round_start -= 1
    for item in transcript[round_start:]:
        for result in item.tool_results():
            name = result.metadata.get(HANDOFF_KEY)
            if not isinstance(name, str):
                continue
            for source in agent.tool_sources:
                tool = source.get(name)
                if isinstance(tool, Handoff):
                    return tool, result.call_id
    return None


async def take_handoff(
    driver: LoopDriver, agent: Agent[Any, Any], *, session_id: str | None = None
) -> tuple[Handoff, LoopDriver] | None:
    """After a tool round (``AfterToolResult``) in which ``agent``'s model called a
    handoff: the handoff and a driver for its target on the handed-over history
    (session ``session_id``, default ``<session>/<handoff name>``); call its
    ``continue_turn()`` to let the target answer. ``None``: no handoff was asked."""
    transcript = driver.snapshot().transcript
    asked = _asked_handoff(agent, transcript)
    if asked is None:
        return None
    tool, call_id = asked
    history = tool.handed_history(transcript, call_id)
    target = attrs.evolve(tool.agent, transcript=(*tool.agent.transcript, *history), input=())
    config = SessionConfig(session_id or f"{driver.session_id}/{tool.spec.name}")
    return tool, await target.start(config)


Approve = Callable[[ApprovalRequest], "ApprovalAnswer | bool | Awaitable[ApprovalAnswer | bool]"]
Answer = Callable[[CallQuestion], "QuestionAnswer | Awaitable[QuestionAnswer]"]


@attrs.frozen
class HandoffResult:
    """Where :func:`run_handoffs` stopped: the agent holding the conversation, its
    driver, the last step (``Finished``, or an interrupt nobody answered) and the
    handoffs taken (tool names, in order)."""

    agent: Agent[Any, Any]
    driver: LoopDriver
    step: Step
    handoffs: tuple[str, ...]

    @property
    def final_text(self) -> str:
        """The text of the last turn's final answer ("" if the run did not finish)."""
        if not isinstance(self.step, Finished):
            return ""
        texts = (item.text_content for item in self.step.result.final_items)
        return "\n".join(text for text in texts if text)


async def run_handoffs(
    agent: Agent[Any, Any],
    prompt: str | Sequence[Item],
    *,
    session_id: str = "conversation",
    approve: Approve | None = None,
    answer: Answer | None = None,
    max_handoffs: int = 8,
) -> HandoffResult:
    """Drive ``agent`` on ``prompt`` to the end of the turn, following handoffs: after
    each round that called one, its target takes the conversation (at most
    ``max_handoffs`` times; after that the last agent's turn goes on). Approvals go
    to ``approve`` and questions to ``answer``; without one, the run stops on the step."""
    driver = await agent.start(SessionConfig(session_id))
    driver.submit_input(prompt)
    taken: list[str] = []
    step = await driver.next()
    while True:
        if isinstance(step, AfterToolResult):
            handed = None
            if len(taken) < max_handoffs:
                handed = await take_handoff(driver, agent)
            if handed is not None:
                tool, driver = handed
                agent = tool.agent
                taken.append(tool.spec.name)
                step = await driver.continue_turn()
                continue
        elif isinstance(step, Finished | AwaitingInput):
            return HandoffResult(agent, driver, step, tuple(taken))
        elif isinstance(step, ApprovalRequest):
            if approve is None:
                return HandoffResult(agent, driver, step, tuple(taken))
            decision = await _maybe(approve(step))
            if isinstance(decision, bool):
                decision = ApprovalAnswer.approve() if decision else ApprovalAnswer.deny()
            driver.answer_approval_for(step.call_id, decision)
        elif isinstance(step, CallQuestion):
            if answer is None:
                return HandoffResult(agent, driver, step, tuple(taken))
            driver.answer_question_for(step.id, await _maybe(answer(step)))
        step = await driver.next()


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
