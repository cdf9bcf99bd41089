"""The client as a task receiver (MCP 2025-11-25 ``tasks``, server to client).

A server may send ``elicitation/create`` or ``sampling/createMessage`` with
``params.task``: the client answers at once with a task (``CreateTaskResult``)
and asks the question in the background, exactly as a mid-call request (a
``CallQuestion`` of the call in flight); the server polls ``tasks/get``, reads
``tasks/result`` (which waits for the end) and may send ``tasks/cancel`` or
``tasks/list``. A task is ``working``, ``input_required`` while the host is
asked, then ``completed`` (the answer), ``failed`` (the request's error) or
``cancelled``. Tasks are kept per connection, at most ``max_tasks`` of them
(the oldest ended one makes room; when all still run, a new one is refused),
each for its ttl (the requested one, within ``[1 s, max_ttl]``): after it the
task and its result are dropped. The SDK does not dispatch ``tasks/*``,
so :meth:`TaskReceiver.install` answers them in front of the session's own
request handler.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.methods import parse_server_request
from pydantic import ValidationError

from .._log import get_logger
from ..tools._questions import Question, QuestionAnswer
from ._asking import (
    Asking,
    AskingCall,
    elicit_result,
    elicitation_question,
    sampling_question,
    sampling_result,
)
from ._received_tasks import ReceivedTask, task_id_of, ttl_of

__all__ = ["RELATED_TASK", "TaskReceiver"]

log = get_logger()

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key tying a ``tasks/result`` answer to its task."""

_PAGE = 50
_CREATES = frozenset({"elicitation/create", "sampling/createMessage"})
_OnRequest = Callable[[Any, str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]


def _tasks_era(version: str) -> bool:
    """Whether protocol ``version`` has tasks in its core (2025-11-25; the 2026 revision
    moved them into an extension)."""
    return "2025-11-25" <= version < "2026"


def _error(code: int, message: str) -> MCPError:
    return MCPError(code=code, message=message)


class TaskReceiver:
    """One connection's tasks for task-augmented elicitation and sampling requests
    (an async context manager: leaving it cancels the tasks still running)."""

    def __init__(
        self,
        asking: Asking,
        *,
        max_tasks: int = 64,
        max_ttl: float = 3600.0,
        default_ttl: float = 600.0,
        poll_interval: float = 0.5,
    ) -> None:
        self.asking = asking
        self.max_tasks = max_tasks
        self.max_ttl_ms = int(max_ttl * 1000)
        self.default_ttl_ms = int(default_ttl * 1000)
        self.poll_interval_ms = int(poll_interval * 1000)
        self._tasks: dict[str, ReceivedTask] = {}
        self._numbers = itertools.count(1)
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> TaskReceiver:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        for task in self._tasks.values():
            task.cancel("the connection closed")
        assert group is not None
        group.cancel_scope.cancel()
        return await group.__aexit__(exc_type, exc, traceback)

    @property
    def enabled(self) -> bool:
        """Whether any request type may be task-augmented (elicitation or sampling on)."""
        return self.asking.enabled

    def capabilities(self) -> mcp_types.ClientTasksCapability:
        """The client's ``tasks`` capability: list, cancel, and the request types on."""
        elicitation = (
            mcp_types.TasksElicitationCapability(
                create=mcp_types.TasksCreateElicitationCapability()
            )
            if self.asking.elicitation
            else None
        )
        sampling = (
            mcp_types.TasksSamplingCapability(
                create_message=mcp_types.TasksCreateMessageCapability()
            )
            if self.asking.sampling
            else None
        )
        return mcp_types.ClientTasksCapability(
            list=mcp_types.TasksListCapability(),
            cancel=mcp_types.TasksCancelCapability(),
            requests=mcp_types.ClientTasksRequestsCapability(
                elicitation=elicitation, sampling=sampling
            ),
        )

    def install(self, session: ClientSession) -> None:
        """Answer ``session``'s task requests and advertise ``tasks`` (2025 era only;
        call before the session is entered)."""
        original: _OnRequest = session._on_request
        build = session._build_capabilities

        def capabilities(version: str) -> mcp_types.ClientCapabilities:
            built = build(version)
            if not _tasks_era(version) or not self.enabled:
                return built
            return built.model_copy(update={"tasks": self.capabilities()})

        async def on_request(
            context: Any, method: str, params: Mapping[str, Any] | None
        ) -> dict[str, Any]:
            version = session.protocol_version or "2025-11-25"
            if _tasks_era(version) and self.enabled:
                answer = await self.answer(method, params, version)
                if answer is not None:
                    return answer
            return await original(context, method, params)

        session._on_request = on_request  # type: ignore[method-assign,assignment]
        session._build_capabilities = capabilities  # type: ignore[method-assign]

    # -- answering the server --------------------------------------------------------

    async def answer(
        self, method: str, params: Mapping[str, Any] | None, version: str = "2025-11-25"
    ) -> dict[str, Any] | None:
        """The answer to a task request (raises ``MCPError``), or ``None`` when
        ``method``/``params`` are not one (the session answers them as usual)."""
        self._purge()
        if method in _CREATES and isinstance(params, Mapping) and "task" in params:
            if not self._tasked(method):
                return None
            return self._create(method, params, version)
        if method == "tasks/get":
            return self._find(method, params).wire()
        if method == "tasks/result":
            return await self._result(params)
        if method == "tasks/cancel":
            return self._cancel(params)
        if method == "tasks/list":
            return self._list(params)
        return None

    def _tasked(self, method: str) -> bool:
        return self.asking.elicitation if method == "elicitation/create" else self.asking.sampling

    def _create(self, method: str, params: Mapping[str, Any], version: str) -> dict[str, Any]:
        ttl = ttl_of(method, params["task"], self.default_ttl_ms, self.max_ttl_ms)
        plain = {key: value for key, value in params.items() if key != "task"}
        try:
            request = parse_server_request(method, version, plain)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, issue['loc'])) or '(params)'}: {issue['msg']}"
                for issue in error.errors(include_url=False)[:5]
            )
            raise _error(
                mcp_types.INVALID_PARAMS, f"{method}: malformed params ({problems}); no task made"
            ) from None
        call = self.asking.call_for(method)
        if call is None:
            raise _error(
                mcp_types.INVALID_REQUEST,
                f"{method} is answered only during a tool call of this client; no task made",
            )
        self._make_room(method)
        task = ReceivedTask.start(str(uuid.uuid4()), method, next(self._numbers), ttl)
        task.poll_interval_ms = self.poll_interval_ms
        self._tasks[task.task_id] = task
        assert self._group is not None
        self._group.start_soon(self._run, task, call, request.params)
        log.info("mcp task received", server=self.asking.server, task=task.task_id, method=method)
        return {"task": task.wire()}

    def _make_room(self, method: str) -> None:
        """Drop the oldest ended tasks past ``max_tasks``; refuse when all are running."""
        if len(self._tasks) < self.max_tasks:
            return
        for task in list(self._tasks.values()):
            if task.ended:
                del self._tasks[task.task_id]
                return
        raise _error(
            mcp_types.INVALID_REQUEST,
            f"{method}: this client already runs {self.max_tasks} tasks for the server "
            "(its limit); no task made: read or cancel one first",
        )

    async def _run(self, task: ReceivedTask, call: AskingCall, params: Any) -> None:
        """Ask the question and keep the outcome. A task that ends while its question
        waits (``tasks/cancel``, its ttl, the connection closing) stops the wait: the
        host's question is withdrawn and ``next()`` goes on with the call."""
        try:
            if task.method == "elicitation/create":
                question = elicitation_question(self.asking.server, params)
            else:
                server, by_model = self.asking.server, self.asking.by_model
                question = sampling_question(server, params, by_model=by_model)
            who = "the host" if question.model_prompt is None else "the agent's model"
            if question.model_prompt is None:
                task.update("input_required", "waiting for the host's answer")
            else:
                task.update("working", "waiting for the agent's model")
            answer = await self._ask_while_running(task, question, call)
            if answer is None:  # the task ended first: the question was withdrawn
                log.info(
                    "mcp task question withdrawn",
                    server=self.asking.server,
                    task=task.task_id,
                    status=task.status,
                    reason=task.message,
                )
                return
            if isinstance(answer, mcp_types.ErrorData):
                task.fail(answer)
            elif task.method == "elicitation/create":
                task.complete(_dump(elicit_result(answer)), f"{who} answered: {answer.action}")
            else:
                sampled = sampling_result(answer)
                if isinstance(sampled, mcp_types.ErrorData):
                    task.fail(sampled)
                else:
                    task.complete(_dump(sampled), f"{who} answered")
        except Exception as error:  # a bug of ours: the server learns it, nothing hangs
            log.exception("mcp task failed", server=self.asking.server, task=task.task_id)
            task.fail(mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=str(error)))
        log.info(
            "mcp task ended",
            server=self.asking.server,
            task=task.task_id,
            status=task.status,
            kept=task.task_id in self._tasks,
        )

    async def _ask_while_running(
        self, task: ReceivedTask, question: Question, call: AskingCall
    ) -> QuestionAnswer | mcp_types.ErrorData | None:
        """The answer to ``question``, or ``None`` when ``task`` ended first."""
        answer: QuestionAnswer | mcp_types.ErrorData | None = None
        async with anyio.create_task_group() as group:

            async def stop_at_end() -> None:
                await task.done.wait()
                group.cancel_scope.cancel()

            group.start_soon(stop_at_end)
            answer = await self.asking.ask(task.method, question, call)
            group.cancel_scope.cancel()
        return answer  # an answer that came as the task ended changes nothing: it ended

    def _find(self, method: str, params: Mapping[str, Any] | None) -> ReceivedTask:
        task_id = task_id_of(method, params)
        task = self._tasks.get(task_id)
        if task is None:
            raise _error(
                mcp_types.INVALID_PARAMS,
                f"{method}: Task not found: no task {task_id!r} on this connection (never "
                "made here, or dropped after its ttl)",
            )
        return task

    async def _result(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        task = self._find("tasks/result", params)
        left = task.expires - anyio.current_time()
        with anyio.move_on_after(max(left, 0)):
            await task.done.wait()
        if not task.ended:
            self._purge()
            raise _error(
                mcp_types.INVALID_PARAMS,
                f"tasks/result: task {task.task_id!r} was dropped after its ttl "
                f"({task.ttl_ms} ms) before it ended",
            )
        if task.error is not None:
            raise MCPError.from_error_data(task.error)
        assert task.result is not None
        meta = {**task.result.get("_meta", {}), RELATED_TASK: {"taskId": task.task_id}}
        return {**task.result, "_meta": meta}

    def _cancel(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        task = self._find("tasks/cancel", params)
        if task.ended:
            raise _error(
                mcp_types.INVALID_PARAMS,
                f"tasks/cancel: task {task.task_id!r} already ended ({task.status}); "
                "only a working or input_required task can be cancelled",
            )
        task.cancel("the server sent tasks/cancel")
        return task.wire()

    def _list(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        cursor = params.get("cursor") if isinstance(params, Mapping) else None
        start = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.isdecimal() and len(cursor) < 20):
                raise _error(
                    mcp_types.INVALID_PARAMS,
                    f"tasks/list: cursor {cursor!r} is not one this client gave; pass the "
                    "nextCursor of the previous page, or none for the first",
                )
            start = int(cursor)
        tasks = [task for task in self._tasks.values() if task.number >= start]
        page: dict[str, Any] = {"tasks": [task.wire() for task in tasks[:_PAGE]]}
        if len(tasks) > _PAGE:
            page["nextCursor"] = str(tasks[_PAGE].number)
        return page

    def _purge(self) -> None:
        """Drop the tasks whose ttl passed (a running one is cancelled first)."""
        now = anyio.current_time()
        for task in [task for task in self._tasks.values() if task.expires <= now]:
            task.cancel(f"dropped after its ttl ({task.ttl_ms} ms)")
            del self._tasks[task.task_id]


def _dump(result: mcp_types.Result) -> dict[str, Any]:
    data: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data
