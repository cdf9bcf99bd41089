"""One call of a remote A2A agent: send, follow the task, ask our host, answer, finish.

The call sends the model's message as a new task (its context id is the
call's idempotency key, so it is the same in every process), follows the
task's events (streamed, else ``SendMessage``'s answer, then ``GetTask``
polls while it works) until it rests, and then:

- ``COMPLETED`` (or a direct message reply): the artifacts become the result;
- ``FAILED`` / ``REJECTED`` / ``CANCELED``: an error result with the status text;
- ``AUTH_REQUIRED``: the task is cancelled, an error result;
- ``INPUT_REQUIRED``: each thing it asks becomes a question to our host
  (``ToolContext.ask``; see ``_remote_questions``), and the answers go back in
  one message on the same task and context. A declined or cancelled question
  cancels the remote task (``CancelTask``) and ends the call with an error
  result, except a remote call's own question (an agentloop server's
  ``{"questions": [...]}``): its decline or cancel is sent back as the answer.
  Each question's ``resume`` data holds the task and context ids and the
  answers given so far, so after a restart the call goes on from the
  answer (``ToolContext.resumed``) on the same remote task.

Time spent waiting for our host does not count against ``call_timeout``; the
remote agent's does. A cancelled call cancels the remote task (shielded, at
most 5 s), except a call stopped while it waits for the host's answer without the
turn being cancelled (the process stops, the task manager closes, the host releases
the driver with ``LoopDriver.release()``): its task is
left waiting in ``input-required``, so a restored driver can ask again and
answer it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import attrs
from a2a.client import Client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    TaskState,
)

from .._log import get_logger
from ..core._errors import AgentLoopError
from ..tools._tool import ToolContext, ToolOutput
from ._errors import RemoteAgentError
from ._remote_http import describe
from ._remote_parts import TaskView, build_message, state_name, to_output
from ._remote_questions import Asked, answer_parts, asked_of, bounded, question_for

__all__ = ["CallLimits", "RemoteCall"]

log = get_logger()

T = TypeVar("T")

_CANCEL_TIMEOUT = 5.0
_RESTING = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_CANCELED,
)
_SETTLED = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
)
_ENDED = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "was rejected",
    TaskState.TASK_STATE_CANCELED: "was cancelled",
}


@attrs.frozen(kw_only=True)
class CallLimits:
    """How long and how much one call may take (see ``A2AToolSource``)."""

    call_timeout: float
    poll_interval: float
    max_events: int
    max_rounds: int
    streaming: bool


class RemoteCall:
    """One call of tool ``tool`` (arguments ``arguments``) on the agent at ``agent``."""

    def __init__(
        self,
        client: Client,
        agent: str,
        limits: CallLimits,
        *,
        tool: str,
        arguments: dict[str, Any],
        ctx: ToolContext,
        skill: str | None = None,
    ) -> None:
        self._client = client
        self._agent = agent
        self._limits = limits
        self._tool = tool
        self._arguments = arguments
        self._ctx = ctx
        self._skill = skill
        self._view = TaskView()
        self._left = limits.call_timeout
        self._events = 0
        self._asking = False  # waiting for the host's answer to a question

    async def run(self) -> ToolOutput:
        """The call's result; raises :class:`RemoteAgentError` when the agent cannot
        serve it; a cancelled call cancels the remote task."""
        try:
            return await self._run()
        except anyio.get_cancelled_exc_class():
            turn = self._ctx.cancellation
            if self._asking and not (turn is not None and turn.is_cancelled):
                # Stopped while the host thinks, not by the host (the process stops, the
                # task manager closes, the driver is released): a restored driver asks
                # again and goes on.
                log.info("a2a call stopped, its task left waiting", agent=self._agent,
                         task=self._view.task_id)  # fmt: skip
            else:
                await self._cancel_remote("the call was cancelled")
            raise

    async def reconcile(self) -> ToolOutput | None:
        """The result of this call's remote task when it ended completed, failed or
        rejected (found with ``ListTasks`` on the call's own context), else ``None``:
        the call stays in doubt (still running, waiting, cancelled, or not found)."""
        context_id = self._ctx.idempotency_key
        with anyio.move_on_after(self._limits.call_timeout):
            listed = await self._client.list_tasks(ListTasksRequest(context_id=context_id))
            ended = [t for t in listed.tasks if t.status.state in _SETTLED]
            if not ended:
                return None
            # ListTasks leaves artifacts out unless asked; GetTask has the whole task.
            self._view.take_task(await self._client.get_task(GetTaskRequest(id=ended[-1].id)))
            log.info("a2a call reconciled", agent=self._agent, task=self._view.task_id)
            return await self._finished()
        return None

    async def _run(self) -> ToolOutput:
        resume = self._resume_data()
        if resume is None:
            message = self._arguments.get("message")
            if not isinstance(message, str) or not message:
                raise self._error(
                    f"tool {self._tool!r} expects the input {{message: non-empty str, data?: "
                    f"object}}, got {bounded(repr(self._arguments), 300)}; nothing was sent"
                )
            parts = [{"text": message}]
            if "data" in self._arguments:
                parts.append({"data": self._arguments["data"]})
            self._view.context_id = self._ctx.idempotency_key
            await self._send(parts)
        else:
            resumed = await self._resumed_parts(resume)
            if isinstance(resumed, ToolOutput):
                return resumed
            await self._send(resumed)
        for _ in range(self._limits.max_rounds):
            await self._settle()
            if self._view.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                return await self._finished()
            parts_or_end = await self._ask_round([], None)
            if isinstance(parts_or_end, ToolOutput):
                return parts_or_end
            await self._send(parts_or_end)
        await self._settle()
        if self._view.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return await self._finished()
        await self._cancel_remote("too many input rounds")
        raise self._error(
            f"the remote task {self._view.task_id} asked for input more than "
            f"{self._limits.max_rounds} times; it was cancelled"
        )

    # -- the task's end --------------------------------------------------------------

    async def _finished(self) -> ToolOutput:
        view = self._view
        if view.reply is not None or view.state == TaskState.TASK_STATE_COMPLETED:
            log.info("a2a call completed", agent=self._agent, task=view.task_id)
            return self._output(view)
        if view.state == TaskState.TASK_STATE_AUTH_REQUIRED:
            await self._cancel_remote("authentication required")
            return self._error_output(
                "requires authentication the caller cannot give "
                f"({bounded(view.status_text()) or 'no details'}); the task was cancelled "
                "(give the source credentials with A2AToolSource(headers=...))"
            )
        why = _ENDED.get(view.state, f"ended in {state_name(view.state)}")  # type: ignore[call-overload]
        return self._error_output(f"{why}: {bounded(view.status_text()) or '(no message)'}")

    def _error_output(self, text: str) -> ToolOutput:
        view = self._view
        output = self._output(view, is_error=True)
        message = f"remote agent {self._agent}: task {view.task_id} {text}"
        return attrs.evolve(output, value=message)

    def _output(self, view: TaskView, *, is_error: bool = False) -> ToolOutput:
        try:
            return to_output(view, self._agent, is_error=is_error)
        except ValueError as error:  # e.g. a data part holding Infinity
            raise self._error(
                f"task {view.task_id or '(a message)'} answered badly: {error}"
            ) from None

    def _error(self, text: str) -> RemoteAgentError:
        return RemoteAgentError(f"remote agent {self._agent}: {text}", agent=self._agent)

    # -- input-required --------------------------------------------------------------

    async def _ask_round(
        self, answered: list[dict[str, Any]], pending: list[Asked] | None
    ) -> list[dict[str, Any]] | ToolOutput:
        """Ask our host what the waiting task asks (or the ``pending`` rest of it after
        ``answered``); the parts to send, or the error output of a refusal."""
        view = self._view
        if pending is None:
            try:
                pending = asked_of(view.status_text(), view.status_data())
            except ValueError as error:
                await self._cancel_remote("a malformed input request")
                raise self._error(f"{error}; the task was cancelled") from None
        parts = list(answered)
        for position, asked in enumerate(pending):
            where = {"agent": self._agent, "taskId": view.task_id, "contextId": view.context_id}
            question = question_for(
                asked,
                agent=self._agent,
                text=view.status_text(),
                data_parts=view.status_data(),
                where=where,
            )
            resume = {
                **where,
                "tool": self._tool,
                "arguments": self._arguments,
                "answered": parts,
                "asked": asked.to_json(),
                "pending": [a.to_json() for a in pending[position + 1 :]],
                "text": bounded(view.status_text()),
            }
            try:
                self._asking = True
                answer = await self._ctx.ask(attrs.evolve(question, resume=resume))
                self._asking = False
            except AgentLoopError as error:  # nobody can answer (the call runs inline)
                await self._cancel_remote("the question could not be asked")
                raise self._error(
                    f"task {view.task_id} needs input, which could not be asked of the "
                    f"host ({error}); the task was cancelled"
                ) from None
            if not answer.accepted and asked.question is None:
                return await self._refused(question.message, answer.action.value)
            parts.extend(answer_parts(asked, answer))
        return parts

    async def _refused(self, asked: str, action: str) -> ToolOutput:
        await self._cancel_remote(f"the host answered {action}")
        verb = "declined" if action == "decline" else "cancelled"
        return self._error_output(f"was cancelled: the host {verb} its question ({asked})")

    def _resume_data(self) -> dict[str, Any] | None:
        """The resume data of a question this very call asked before a restart."""
        resumed = self._ctx.resumed
        if resumed is None:
            return None
        data = resumed.question.resume
        if not isinstance(data, dict) or data.get("agent") != self._agent:
            return None
        if data.get("tool") != self._tool or data.get("arguments") != self._arguments:
            return None
        return data

    async def _resumed_parts(self, resume: dict[str, Any]) -> list[dict[str, Any]] | ToolOutput:
        """After a restart: check the remote task still waits, then the parts to send
        (the answers before the restart, this answer, the rest asked now)."""
        assert self._ctx.resumed is not None
        view = self._view
        view.task_id, view.context_id = str(resume["taskId"]), str(resume["contextId"])
        task = await self._timed(
            lambda: self._client.get_task(GetTaskRequest(id=view.task_id)), "GetTask"
        )
        view.take_task(task)
        if view.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return self._error_output(
                f"is {state_name(view.state)} now, no longer waiting for input; the answer "
                "given after the restart was not sent"
            )
        asked = Asked.from_json(resume["asked"])
        answer = self._ctx.resumed.answer
        if not answer.accepted and asked.question is None:
            return await self._refused(self._ctx.resumed.question.message, answer.action.value)
        parts = [*resume["answered"], *answer_parts(asked, answer)]
        pending = [Asked.from_json(item) for item in resume["pending"]]
        log.info("a2a call resumed", agent=self._agent, task=view.task_id)
        return await self._ask_round(parts, pending) if pending else parts

    # -- talking to the agent --------------------------------------------------------

    async def _send(self, parts: list[dict[str, Any]]) -> None:
        """One message on the task (a new one when there is none yet), its events folded in."""
        view = self._view
        view.state = TaskState.TASK_STATE_SUBMITTED  # until the answer says otherwise
        metadata = {"skill": self._skill} if self._skill and not view.task_id else None
        message = build_message(
            parts, task_id=view.task_id or None, context_id=view.context_id, metadata=metadata
        )

        async def exchange() -> None:
            async for event in self._client.send_message(SendMessageRequest(message=message)):
                self._events += 1
                if self._events > self._limits.max_events:
                    raise self._error(f"the task sent more than {self._limits.max_events} events")
                view.add(event)

        what = "SendStreamingMessage" if self._limits.streaming else "SendMessage"
        await self._timed(exchange, what)

    async def _settle(self) -> None:
        """Poll ``GetTask`` while the task works (a stream may end before it rests)."""
        view = self._view
        while not view.done:
            if not view.task_id:
                raise self._error("the answer named no task and held no message")
            await self._timed(lambda: anyio.sleep(self._limits.poll_interval), "waiting")
            task = await self._timed(
                lambda: self._client.get_task(GetTaskRequest(id=view.task_id)), "GetTask"
            )
            view.take_task(task)

    async def _timed(self, work: Callable[[], Awaitable[T]], what: str) -> T:
        """``work()`` within what is left of ``call_timeout``; foreign errors translated."""
        started = anyio.current_time()
        try:
            with anyio.move_on_after(max(self._left, 0.0)) as scope:
                return await work()
        except RemoteAgentError:
            raise
        except Exception as error:
            raise self._error(f"{what} failed: {describe(error)}") from None
        finally:
            self._left -= anyio.current_time() - started
        assert scope.cancelled_caught
        await self._cancel_remote("the call timed out")
        raise self._error(
            f"no answer within {self._limits.call_timeout:g} s (call_timeout) during "
            f"{what}; the task {self._view.task_id or '(not started)'} was cancelled"
        )

    async def _cancel_remote(self, why: str) -> None:
        """``CancelTask`` (shielded, bounded) unless the task ended; a task whose id no
        answer named yet (a blocking ``SendMessage`` still waiting) is looked up among
        the tasks of the call's own context (``ListTasks``)."""
        view = self._view
        if view.reply is not None or view.state in _ENDED:
            return
        if view.state == TaskState.TASK_STATE_COMPLETED:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_TIMEOUT):
            try:
                if not view.task_id and view.context_id:
                    listed = await self._client.list_tasks(
                        ListTasksRequest(context_id=view.context_id)
                    )
                    open_tasks = [t for t in listed.tasks if t.status.state not in _RESTING]
                    view.task_id = open_tasks[-1].id if open_tasks else ""
                if view.task_id:
                    await self._client.cancel_task(CancelTaskRequest(id=view.task_id))
                    log.info("a2a task cancelled", agent=self._agent, task=view.task_id, why=why)
                return
            except Exception as error:
                log.warning(
                    "a2a task not cancelled",
                    agent=self._agent,
                    task=view.task_id,
                    why=why,
                    error=describe(error),
                )
                return
        log.warning("a2a task not cancelled: no answer", agent=self._agent, task=view.task_id)
