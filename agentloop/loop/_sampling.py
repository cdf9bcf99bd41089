"""Questions the agent's own model answers (``Question.model_prompt``): one model call
with the prompt and no tools, made by the driver while it waits for the round, within
the turn's limits (its usage counts against them)."""

from __future__ import annotations

from .._log import get_logger
from ..core._items import Item, ItemKind
from ..model._protocol import TurnRequest
from ..tools._questions import QuestionAnswer
from ._machine import LoopMachine
from ._model_io import ModelIO
from ._questions import QuestionBox, deliver
from ._state import TurnState

__all__ = ["answer_with_model"]

log = get_logger()


async def answer_with_model(
    machine: LoopMachine, model_io: ModelIO, turn: TurnState, box: QuestionBox
) -> None:
    """Answer every question for the model that waits, one model call each."""
    while (waiting := box.for_model()) is not None:
        prompt = waiting.question.model_prompt
        assert prompt is not None
        deliver(waiting, await _sample(machine, model_io, turn, prompt, waiting.call_id))


async def _sample(
    machine: LoopMachine, model_io: ModelIO, turn: TurnState, prompt: tuple[Item, ...], call_id: str
) -> QuestionAnswer:
    limit = machine.core.limit_reached(turn, machine.config.limits)
    if limit is not None:
        log.warning("model question declined: a limit is reached", call_id=call_id, limit=limit)
        return QuestionAnswer.decline()
    request = TurnRequest(machine.session_id, turn.turn_id, prompt)
    answer = await model_io.stream(turn, request)
    result = answer.result
    if result is None:  # failed, timed out or cancelled: the asking call is told no
        why = str(answer.error) if answer.error is not None else "timed out or cancelled"
        log.warning("model question declined: the model call failed", call_id=call_id, error=why)
        return QuestionAnswer.decline()
    model, _usage = machine.count_usage(turn, result, answer.usage)
    text = "\n".join(
        item.text_content for item in result.output_items if item.kind is ItemKind.ASSISTANT
    )
    return QuestionAnswer.accept({"text": text, "model": model or "agentloop"})
