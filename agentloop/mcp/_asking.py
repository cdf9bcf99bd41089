"""A server's elicitation and sampling requests, asked of the host as ``CallQuestion`` s.

``McpToolSource(elicitation=True, sampling=True)`` advertises the client
capabilities; a request the server sends while a tool call runs (2025-11-25:
``elicitation/create`` or ``sampling/createMessage`` mid-call; 2026-07-28:
the same requests embedded in an ``InputRequiredResult``, which the SDK
retries with the answers and the echoed ``requestState``) becomes a
:class:`~agentloop.Question` the call asks through its ``ToolContext``:
``driver.next()`` returns it as a ``CallQuestion``, and the host's answer
goes back to the server.
"""

from __future__ import annotations

import contextvars
import itertools
import math
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types
from mcp.client.session import ClientRequestContext

from .._log import get_logger
from ..core._errors import AgentLoopError
from ..core._items import Item, ItemKind
from ..tools._questions import Question, QuestionAnswer
from ..tools._tool import ToolContext

__all__ = [
    "ELICITATION_KIND",
    "SAMPLING_ANSWER_SCHEMA",
    "SAMPLING_KIND",
    "URL_ELICITATION_KIND",
    "Asking",
    "AskingCall",
]

log = get_logger()

ELICITATION_KIND = "mcp.elicitation"
"""``Question.kind`` of a form-mode elicitation: accept with content matching ``schema``."""
URL_ELICITATION_KIND = "mcp.elicitation_url"
"""``Question.kind`` of a URL-mode elicitation: ``data["url"]`` is where to send the user;
accept (no content) once they went there."""
SAMPLING_KIND = "mcp.sampling"
"""``Question.kind`` of a sampling request: accept with ``{"text": ..., "model": ...}``."""

SAMPLING_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "model": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
"""What an accepted sampling answer's content must be: the model's text (and its name)."""

_USER_REJECTED = -1  # the spec's error code for a sampling request the user refused
_current: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "agentloop_mcp_call", default=None
)


class AskingCall:
    """A call in flight that may be asked for: its context and the scope bounding it
    (stopped while any of its questions waits for the host)."""

    __slots__ = ("asks", "ctx", "paused", "timer")

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.timer: anyio.CancelScope | None = None
        self.asks = 0
        self.paused: tuple[float, float] | None = None  # (deadline, since)

    def pause(self) -> None:
        """A question waits: the timeout stops (the host's time is not the server's)."""
        self.asks += 1
        if self.asks == 1 and self.timer is not None:
            self.paused = (self.timer.deadline, anyio.current_time())
            self.timer.deadline = math.inf

    def resume(self) -> None:
        """A question was answered: when none waits, the timeout goes on where it was."""
        self.asks -= 1
        if self.asks == 0 and self.paused is not None and self.timer is not None:
            deadline, since = self.paused
            self.paused = None
            self.timer.deadline = deadline + (anyio.current_time() - since)


class Asking:
    """One source's asking side: which calls may be asked for, and the SDK callbacks."""

    def __init__(self, server: str, *, elicitation: bool, sampling: bool | str) -> None:
        if sampling not in (True, False, "model"):
            raise ValueError(
                f"McpToolSource sampling must be True (the host answers), 'model' (the "
                f"agent's own model answers) or False, got {sampling!r}"
            )
        self.server = server
        self.elicitation = elicitation
        self.sampling = bool(sampling)
        self.by_model = sampling == "model"
        self._calls: dict[int, AskingCall] = {}
        self._numbers = itertools.count(1)

    @property
    def enabled(self) -> bool:
        """Whether calls of this source may ask the host."""
        return self.elicitation or self.sampling

    def enter(self, ctx: ToolContext | None) -> tuple[int, contextvars.Token[int | None]] | None:
        """A call starts: questions during it go to ``ctx`` (undo with :meth:`leave`)."""
        if ctx is None or not self.enabled:
            return None
        number = next(self._numbers)
        self._calls[number] = AskingCall(ctx)
        return number, _current.set(number)

    def timer(
        self, entered: tuple[int, contextvars.Token[int | None]] | None
    ) -> Callable[[anyio.CancelScope], None] | None:
        """What records the scope bounding the call ``entered`` (see ``request``)."""
        if entered is None:
            return None
        call = self._calls[entered[0]]

        def record(scope: anyio.CancelScope) -> None:
            call.timer = scope

        return record

    def leave(self, entered: tuple[int, contextvars.Token[int | None]] | None) -> None:
        """The call ended."""
        if entered is not None:
            number, token = entered
            self._calls.pop(number, None)
            _current.reset(token)

    def call_for(self, request: str) -> AskingCall | None:
        """The call ``request`` belongs to now, for a question asked later (a
        task-augmented request); ``None`` when no call is in flight."""
        return self._asker(request)

    def _asker(self, request: str) -> AskingCall | None:
        """The call a server request belongs to: the caller's (2026 era: the SDK answers
        input-required results in the calling task), else the only call in flight
        (2025 era: the request arrives on the session's reader), else the oldest one."""
        number = _current.get()
        if number is not None and number in self._calls:
            return self._calls[number]
        if not self._calls:
            return None
        if len(self._calls) > 1:
            log.warning(
                "mcp request during several calls: asked through the oldest",
                server=self.server,
                request=request,
                calls=len(self._calls),
            )
        return self._calls[min(self._calls)]

    async def elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """The SDK's ``elicitation_callback``: ask the host, answer the server."""
        question = elicitation_question(self.server, params)
        answer = await self._ask("elicitation/create", question)
        if isinstance(answer, mcp_types.ErrorData):
            return answer
        return elicit_result(answer)

    async def sample(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """The SDK's ``sampling_callback``: ask the host for the model's answer."""
        question = sampling_question(self.server, params, by_model=self.by_model)
        answer = await self._ask("sampling/createMessage", question)
        if isinstance(answer, mcp_types.ErrorData):
            return answer
        return sampling_result(answer)

    async def ask(
        self, request: str, question: Question, call: AskingCall | None = None
    ) -> QuestionAnswer | mcp_types.ErrorData:
        """Ask ``question`` through ``call`` (default: the call ``request`` belongs to);
        the time it waits for the host does not count against the call's timeout."""
        return await self._ask(request, question, call)

    async def _ask(
        self, request: str, question: Question, call: AskingCall | None = None
    ) -> QuestionAnswer | mcp_types.ErrorData:
        call = call or self._asker(request)
        if call is None:
            log.warning("mcp request outside any call refused", server=self.server, request=request)
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"{request} is answered only during a tool call of this client",
            )
        call.pause()
        try:
            return await call.ctx.ask(question)
        except AgentLoopError as error:  # nobody can answer (the call runs inline, say)
            log.warning(
                "mcp request not asked", server=self.server, request=request, error=str(error)
            )
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=str(error))
        finally:
            call.resume()


def elicit_result(answer: QuestionAnswer) -> mcp_types.ElicitResult:
    """The ``elicitation/create`` answer for the host's ``answer``."""
    content = answer.content if answer.accepted else None
    return mcp_types.ElicitResult(action=answer.action.value, content=content)


def sampling_result(answer: QuestionAnswer) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
    """The ``sampling/createMessage`` answer for the host's ``answer`` (a refusal is the
    spec's "user rejected" error)."""
    if not answer.accepted:
        return mcp_types.ErrorData(
            code=_USER_REJECTED,
            message=f"the user rejected the sampling request ({answer.action.value})",
        )
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(text=answer.content["text"]),
        model=answer.content.get("model", "agentloop-host"),
        stop_reason="endTurn",
    )


def _json(params: Any) -> dict[str, Any]:
    data: dict[str, Any] = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def elicitation_question(server: str, params: mcp_types.ElicitRequestParams) -> Question:
    """The question an ``elicitation/create`` request asks (form or URL mode)."""
    data = {"server": server, **_json(params)}
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        return Question(URL_ELICITATION_KIND, params.message, None, data)
    return Question(ELICITATION_KIND, params.message, dict(params.requested_schema), data)


def sampling_question(
    server: str, params: mcp_types.CreateMessageRequestParams, *, by_model: bool = False
) -> Question:
    """The question a ``sampling/createMessage`` request asks: the model's answer to
    ``data["messages"]`` (the message shows the last one's text); ``by_model``: the
    agent's own model answers it (its ``model_prompt`` holds the request's messages)."""
    last = params.messages[-1].content if params.messages else None
    blocks = last if isinstance(last, list) else [last]
    text = " ".join(block.text for block in blocks if isinstance(block, mcp_types.TextContent))
    message = f"MCP server {server!r} asks for a model answer to: {text or '(no text)'}"
    prompt = _prompt(params) if by_model else None
    data = {"server": server, **_json(params)}
    return Question(SAMPLING_KIND, message, SAMPLING_ANSWER_SCHEMA, data, model_prompt=prompt)


def _prompt(params: mcp_types.CreateMessageRequestParams) -> tuple[Item, ...]:
    """The request's system prompt and messages as items (text blocks only)."""
    items = [Item.text(ItemKind.SYSTEM, params.system_prompt)] if params.system_prompt else []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        text = "\n".join(b.text for b in blocks if isinstance(b, mcp_types.TextContent))
        kind = ItemKind.ASSISTANT if message.role == "assistant" else ItemKind.USER
        items.append(Item.text(kind, text))
    return tuple(items)
