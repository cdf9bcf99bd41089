"""2026-07-28 calls that need input, driven here so a question survives a restart.

A server answers ``tools/call`` with an ``InputRequiredResult`` (input
requests plus an opaque ``requestState``); the client asks, then calls again
with the responses and the echoed state. The SDK's own driver keeps the
state in memory; this one puts it in each question's ``resume`` data (the
tool, its arguments, the state, the request's key, the responses given so
far and the requests still to answer). The driver's checkpoint then holds
it: a restored driver asks the question again, and the call runs again from
the answer (``ToolContext.resumed``) by sending the responses with the saved
state, never by starting over.
"""

from __future__ import annotations

from typing import Any

import attrs
import mcp_types
import pydantic
from mcp import Client
from mcp.shared.exceptions import MCPError

from ..tools._questions import QuestionAnswer, Resumed
from ..tools._tool import ToolContext
from ._asking import (
    Asking,
    elicit_result,
    elicitation_question,
    sampling_question,
    sampling_result,
)
from ._connection import is_modern
from ._errors import McpCallError
from ._task_wire import ResumedTask, TaskCreated

__all__ = ["MAX_ROUNDS", "answer_round", "call_with_input", "respond", "send_call"]

MAX_ROUNDS = 10
"""How many input-required rounds one call may take."""

_REQUESTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(mcp_types.InputRequest)
_URL_ELICITATIONS: pydantic.TypeAdapter[list[mcp_types.ElicitRequestURLParams]] = (
    pydantic.TypeAdapter(list[mcp_types.ElicitRequestURLParams])
)
_RESPONSES: dict[str, type[pydantic.BaseModel]] = {
    "elicitation/create": mcp_types.ElicitResult,
    "sampling/createMessage": mcp_types.CreateMessageResult,
    "roots/list": mcp_types.ListRootsResult,
}


async def send_call(
    client: Client,
    asking: Asking,
    name: str,
    arguments: dict[str, Any],
    ctx: ToolContext | None,
) -> Any:
    """``tools/call``; on a 2026-era connection a call that may ask drives its
    input-required rounds itself, so each question carries what resumes it. A call
    refused with a URL elicitation required error (-32042) asks each URL, then runs
    again (the server did not process the refused request). A call the server runs
    as a task (tasks extension) gives its :class:`TaskHandle` (a restored one, its
    :class:`ResumedTask`): the caller follows it."""
    for _ in range(MAX_ROUNDS):
        try:
            return await _call_once(client, asking, name, arguments, ctx)
        except TaskCreated as created:
            return created.handle
        except MCPError as error:
            if error.code != mcp_types.URL_ELICITATION_REQUIRED:
                raise
            if ctx is None or not asking.elicitation:
                raise
            await _ask_required_urls(asking, name, error)
    raise McpCallError(
        f"MCP server {asking.server!r} required URL elicitations more than {MAX_ROUNDS} "
        f"times in tools/call {name!r}",
        server=asking.server,
    )


async def _ask_required_urls(asking: Asking, name: str, error: MCPError) -> None:
    """Ask the host each URL elicitation of a -32042 error; raises :class:`McpCallError`
    when one is declined, cancelled or cannot be asked, or the error is malformed."""
    server = asking.server
    try:
        wanted = _URL_ELICITATIONS.validate_python((error.data or {}).get("elicitations"))
    except (pydantic.ValidationError, AttributeError) as invalid:
        raise McpCallError(
            f"MCP server {server!r} refused tools/call {name!r} with a malformed URL "
            f"elicitation required error ({error.message}): {invalid}",
            server=server,
        ) from None
    for params in wanted:
        answer = await asking.ask("elicitation/create", elicitation_question(server, params))
        if isinstance(answer, mcp_types.ErrorData):
            raise McpCallError(
                f"MCP server {server!r} requires a visit to {params.url} before tools/call "
                f"{name!r}, which could not be asked: {answer.message}",
                server=server,
            )
        if not answer.accepted:
            raise McpCallError(
                f"MCP server {server!r} requires a visit to {params.url} before tools/call "
                f"{name!r}; the host answered {answer.action.value}, so the call was not run",
                server=server,
            )


async def _call_once(
    client: Client,
    asking: Asking,
    name: str,
    arguments: dict[str, Any],
    ctx: ToolContext | None,
) -> Any:
    if ctx is not None and asking.enabled and is_modern(client):
        return await call_with_input(client, asking, ctx, name, arguments)
    if ctx is not None and ctx.resumed is not None:
        raise McpCallError(
            f"MCP server {asking.server!r} cannot go on with tools/call {name!r} from the "
            "answer given after the restart: the connection is of the 2025 era (no request "
            "state to resume from); the call was not run again",
            server=asking.server,
        )
    return await client.call_tool(name, arguments)


async def call_with_input(
    client: Client, asking: Asking, ctx: ToolContext, name: str, arguments: dict[str, Any]
) -> Any:
    """``tools/call`` on a 2026-era connection, answering input-required rounds through
    ``ctx`` (or going on from ``ctx.resumed`` after a restart)."""
    resume = _resume_of(ctx.resumed, name, arguments)
    if resume is not None:
        responses = await _resumed_responses(asking, ctx.resumed, resume)
        if "task" in resume:  # the call's task waits for these answers (tasks/update)
            return ResumedTask(resume["task"], responses)
        result = await _send(client, name, arguments, responses, resume["state"])
    else:
        result = await _send(client, name, arguments, None, None)
    for _ in range(MAX_ROUNDS):
        if not isinstance(result, mcp_types.InputRequiredResult):
            return result
        base = {"tool": name, "arguments": arguments, "state": result.request_state}
        responses = await answer_round(asking, dict(result.input_requests or {}), base, {})
        result = await _send(client, name, arguments, responses, result.request_state)
    raise McpCallError(
        f"MCP server {asking.server!r} asked for input more than {MAX_ROUNDS} times in "
        f"tools/call {name!r}",
        server=asking.server,
    )


async def _send(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    responses: dict[str, Any] | None,
    state: str | None,
) -> Any:
    return await client.session.call_tool(
        name,
        arguments,
        input_responses=responses,
        request_state=state,
        allow_input_required=True,
        allow_claimed=True,  # a task answer (TaskHandle) ends the rounds
    )


async def answer_round(
    asking: Asking,
    requests: dict[str, Any],
    base: dict[str, Any],
    answered: dict[str, Any],
) -> dict[str, Any]:
    """Ask each of ``requests`` in turn (after those ``answered``); each question's
    resume data is ``base`` (the tool, its arguments, and the request state or the
    task id) with what the round has answered and has still to ask."""
    keys = [key for key in requests if key not in answered]
    for position, key in enumerate(keys):
        resume = {
            **base,
            "key": key,
            "answered": {k: _response_json(v) for k, v in answered.items()},
            "pending": {k: _json(requests[k]) for k in keys[position + 1 :]},
            "request": _json(requests[key]),
        }
        answered[key] = await respond(asking, requests[key], resume)
    return answered


async def respond(asking: Asking, request: Any, resume: dict[str, Any]) -> Any:
    """The response to one input request, asked of the host (roots answer at once)."""
    if isinstance(request, mcp_types.ListRootsRequest):
        raise McpCallError(
            f"MCP server {asking.server!r} asked for roots inside an input-required result "
            "of a call that asks the host; give the source roots= to answer it",
            server=asking.server,
        )
    method = request.method
    if isinstance(request, mcp_types.ElicitRequest):
        question = elicitation_question(asking.server, request.params)
    else:
        question = sampling_question(asking.server, request.params, by_model=asking.by_model)
    answer = await asking.ask(method, attrs.evolve(question, resume=resume))
    return _response(asking, method, answer)


def _response(asking: Asking, method: str, answer: QuestionAnswer | Any) -> Any:
    if isinstance(answer, mcp_types.ErrorData):
        raise McpCallError(
            f"MCP server {asking.server!r}: {method} could not be asked: {answer.message}",
            server=asking.server,
        )
    if method == "elicitation/create":
        return elicit_result(answer)
    sampled = sampling_result(answer)
    if isinstance(sampled, mcp_types.ErrorData):
        raise McpCallError(f"MCP server {asking.server!r}: {sampled.message}", server=asking.server)
    return sampled


def _resume_of(
    resumed: Resumed | None, name: str, arguments: dict[str, Any]
) -> dict[str, Any] | None:
    """The resume data of ``resumed`` when it belongs to this call of ``name``."""
    if resumed is None:
        return None
    resume = resumed.question.resume
    if not isinstance(resume, dict) or resume.get("tool") != name:
        return None
    if resume.get("arguments") != arguments:
        return None
    return resume


async def _resumed_responses(
    asking: Asking, resumed: Resumed | None, resume: dict[str, Any]
) -> dict[str, Any]:
    """The responses a restored call sends: those given before the restart, the answer to
    the question asked again, and the requests it had not reached yet (asked now)."""
    assert resumed is not None
    answered: dict[str, Any] = {}
    for key, saved in resume["answered"].items():
        answered[key] = _RESPONSES[saved["method"]].model_validate(saved["result"])
    request = _REQUESTS.validate_python(resume["request"])
    answered[resume["key"]] = _response(asking, request.method, resumed.answer)
    pending = {key: _REQUESTS.validate_python(raw) for key, raw in resume["pending"].items()}
    if pending:
        base = {k: v for k, v in resume.items() if k in ("tool", "arguments", "state", "task")}
        answered = await answer_round(asking, pending, base, answered)
    return answered


def _json(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def _response_json(response: Any) -> dict[str, Any]:
    method = next(m for m, cls in _RESPONSES.items() if isinstance(response, cls))
    return {"method": method, "result": _json(response)}
