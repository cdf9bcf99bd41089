"""The agent behind an A2A server: tasks run on sessions and wait in ``input-required``.

A task's context is a session of the agent's store. A message that starts a
task is the next turn's input (its text parts). When the session parks on
approvals, the task moves to ``TASK_STATE_INPUT_REQUIRED`` with a message
listing them: a text part saying what waits, and a data part
``{"approvals": [{callId, toolName, input, reason, inputDigest,
responseSchema}]}``. The client answers on the same task and context with a
data part per call, ``{callId?, approved, editedArgs?, reason?}`` (``callId``
may be left out when one call waits), or a text part ``approve`` / ``deny``
(``deny: REASON``) for every waiting call. When a running call asks a
question (``CallQuestion``: an MCP elicitation, a remote agent's question),
the task waits in ``input-required`` too, with a text part saying what is
asked and a data part ``{"questions": [{questionId, callId, toolName, kind,
message, schema, data, resumable}]}``; the client answers with a data part
``{questionId?, action, content?}`` per question (see ``_replies``). A bad
answer changes nothing: the task stays in ``input-required`` and the status
message says what was wrong.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers import get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import Message, Task, TaskState, TaskStatus

from .._log import get_logger
from ..core._items import FinishReason, Item, ItemKind, TextPart
from ..loop._steps import ApprovalRequest, AwaitingInput, CallQuestion, Finished
from ..ui._answers import response_schema
from ..ui._problems import RunRefused
from ._child import child_entry
from ._remote_parts import data_values
from ._replies import Reply, question_entry
from ._run import A2ARunner, Rested

__all__ = ["AgentLoopExecutor"]

log = get_logger()


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
                rested = await self._runner.answer(context_id, _reply(message), self._who)
            else:
                await updater.start_work()
                rested = await self._runner.start(context_id, _input(message))
        except RunRefused as refused:
            text = f"{refused.code}: {refused.message}"
            if waiting:
                now = await self._runner.waiting_now(context_id)
                await updater.requires_input(message=_waiting_message(updater, now, text))
            else:
                await updater.reject(message=updater.new_agent_message([new_text_part(text)]))
            return
        await self._report(updater, rested)

    async def _report(self, updater: TaskUpdater, rested: Rested) -> None:
        step = rested.step
        if isinstance(step, ApprovalRequest):
            waiting = "; ".join(
                [f"{r.call_id} ({r.tool_name})" for r in rested.waiting]
                + [f"{c.call_id} ({c.tool_name}, in {' > '.join(c.path)})" for c in rested.children]
            )
            text = f"waiting for approval: {waiting or step.call_id}"
            await updater.requires_input(message=_waiting_message(updater, rested, text))
        elif isinstance(step, CallQuestion):
            asked = "; ".join(
                f"{q.question_id} ({q.tool_name}): {q.message}" for q in rested.questions
            )
            text = f"waiting for an answer: {asked}"
            await updater.requires_input(message=_waiting_message(updater, rested, text))
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


def _reply(message: Message | None) -> Reply:
    if message is None:
        raise RunRefused("no message", code="bad_answer")
    text = " ".join(get_text_parts(message.parts))
    try:
        data = tuple(data_values(message.parts))
    except ValueError as error:  # e.g. a data part holding Infinity
        raise RunRefused(f"the message cannot be read: {error}", code="bad_answer") from None
    return Reply(data=data, text=text)


def _waiting_message(updater: TaskUpdater, rested: Rested, text: str) -> Message:
    """The status message of a task in ``input-required``: ``text`` and what waits."""
    if rested.questions:
        questions = [question_entry(pending) for pending in rested.questions]
        data: dict[str, Any] = {"questions": questions}
    else:
        data = {"approvals": _approvals(rested)}
    return updater.new_agent_message([new_text_part(text), new_data_part(data)])


def _approvals(rested: Rested) -> list[dict[str, Any]]:
    approvals = [
        {
            "callId": row.call_id,
            "toolName": row.tool_name,
            "input": row.input,
            "reason": "; ".join(r.reason or r.summary for r in row.requests),
            "inputDigest": row.digest,
            "responseSchema": response_schema(row.schema),
        }
        for row in rested.waiting
    ]
    return approvals + [child_entry(child) for child in rested.children]
