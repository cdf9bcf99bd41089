"""The agent behind an A2A server: tasks run on sessions and wait in ``input-required``.

A task's context is a session of the agent's store. A message that starts a
task is the next turn's input (its text parts). When the session parks on
approvals, the task moves to ``TASK_STATE_INPUT_REQUIRED`` with a message
listing them: a text part saying what waits, and a data part
``{"approvals": [{callId, toolName, input, reason, inputDigest,
responseSchema}]}``. The client answers on the same task and context with a
data part per call, ``{callId?, approved, editedArgs?, reason?}`` (``callId``
may be left out when one call waits), or a text part ``approve`` / ``deny``
(``deny: REASON``) for every waiting call. A bad answer changes nothing: the
task stays in ``input-required`` and the status message says what was wrong.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus

from .._log import get_logger
from ..core._items import FinishReason, Item, ItemKind, TextPart
from ..loop._steps import ApprovalRequest, AwaitingInput, Finished
from ..serve._inbox import InboxRow
from ..ui._answers import response_schema
from ..ui._problems import RunRefused
from ._run import EVERY_CALL, A2ARunner, Rested

__all__ = ["AgentLoopExecutor"]

log = get_logger()

_APPROVE = ("approve", "approved", "yes")
_DENY = ("deny", "denied", "no")


class AgentLoopExecutor(AgentExecutor):
    """Runs A2A tasks on ``runner``'s sessions; decisions are recorded as made by ``who``."""

    def __init__(self, runner: A2ARunner, *, who: str) -> None:
        self._runner = runner
        self._who = who

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start or continue the task of ``context`` until its session rests."""
        message = context.message
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue=event_queue, task_id=task_id, context_id=context_id)
        current = context.current_task
        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message] if message is not None else [],
                )
            )
        waiting = (
            current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        )
        try:
            if waiting:
                rested = await self._runner.answer(context_id, _answers(message), self._who)
            else:
                await updater.start_work()
                rested = await self._runner.start(context_id, _input(message))
        except RunRefused as refused:
            text = f"{refused.code}: {refused.message}"
            if waiting:
                rows = await self._runner.waiting_now(context_id)
                await updater.requires_input(message=_approvals_message(updater, rows, text))
            else:
                await updater.reject(message=updater.new_agent_message([new_text_part(text)]))
            return
        await self._report(updater, rested)

    async def _report(self, updater: TaskUpdater, rested: Rested) -> None:
        step = rested.step
        if isinstance(step, ApprovalRequest):
            waiting = "; ".join(f"{r.call_id} ({r.tool_name})" for r in rested.waiting)
            text = f"waiting for approval: {waiting or step.call_id}"
            message = _approvals_message(updater, list(rested.waiting), text)
            await updater.requires_input(message=message)
        elif isinstance(step, Finished):
            result = step.result
            if result.finish_reason is FinishReason.ERROR:
                error = str(result.error) if result.error is not None else "the model call failed"
                await updater.failed(message=updater.new_agent_message([new_text_part(error)]))
                return
            if result.finish_reason is FinishReason.CANCELLED:
                await updater.cancel()
                return
            text = "".join(item.text_content for item in result.final_items)
            if text:
                await updater.add_artifact(parts=[new_text_part(text)], name="response")
            await updater.complete()
        elif isinstance(step, AwaitingInput):
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Mark the task cancelled (its session keeps what it saved)."""
        updater = TaskUpdater(
            event_queue=event_queue,
            task_id=context.task_id or "",
            context_id=context.context_id or "",
        )
        await updater.cancel()


def _input(message: Message | None) -> list[Item]:
    text = "\n".join(get_text_parts(message.parts)) if message is not None else ""
    if message is None or not text.strip():
        raise RunRefused("the message has no text; send the task as text parts", code="empty")
    return [Item(ItemKind.USER, [TextPart(text)], id=message.message_id or None)]


def _answers(message: Message | None) -> list[tuple[str | None, Any]]:
    """The answers a message carries: data parts, or an approve / deny text."""
    if message is None:
        raise RunRefused("no message", code="bad_answer")
    found: list[tuple[str | None, Any]] = []
    for data in get_data_parts(message.parts):
        if isinstance(data, dict) and isinstance(data.get("callId"), str):
            payload = {k: v for k, v in data.items() if k != "callId"}
            found.append((data["callId"], payload))
        else:
            found.append((None, data))
    if found:
        return found
    text = " ".join(get_text_parts(message.parts)).strip()
    word, _, reason = text.partition(":")
    if word.strip().lower() in _APPROVE:
        return [(EVERY_CALL, {"approved": True})]
    if word.strip().lower() in _DENY:
        denial: dict[str, Any] = {"approved": False}
        if reason.strip():
            denial["reason"] = reason.strip()
        return [(EVERY_CALL, denial)]
    raise RunRefused(
        "the task waits for approvals: answer with a data part {callId?, approved, "
        "editedArgs?, reason?} per call, or the text 'approve' or 'deny: REASON'. "
        "Nothing was recorded",
        code="bad_answer",
    )


def _approvals_message(updater: TaskUpdater, rows: list[InboxRow], text: str) -> Message:
    approvals = [
        {
            "callId": row.call_id,
            "toolName": row.tool_name,
            "input": row.input,
            "reason": "; ".join(r.reason or r.summary for r in row.requests),
            "inputDigest": row.digest,
            "responseSchema": response_schema(row.schema),
        }
        for row in rows
    ]
    parts: list[Part] = [new_text_part(text), new_data_part({"approvals": approvals})]
    return updater.new_agent_message(parts)
