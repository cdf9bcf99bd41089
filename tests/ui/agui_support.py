"""What the AG-UI tests share: an agent on a scripted model, a real server, an SSE reader.

The model decides from the request: ``deploy NAME`` asks for one ``deploy`` call
(which needs approval), ``deploy A and B`` for two, ``think`` answers with
reasoning, anything else is answered with streamed text; after a tool result
it reports the result's text. ``hypercorn_serving`` serves an app on a real
hypercorn on 127.0.0.1 on the test's own backend.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import httpx
import sniffio
from ag_ui.core import Event
from ag_ui_validate.pytest_plugin import validate_agui
from hypercorn.config import Config
from pydantic import TypeAdapter

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.store
import agentloop.testing
import agentloop.tools
from agentloop import AppendText, BeginPart, PartKind
from agentloop.testing import call, chunked, fail, reasoning, tool_calls

TOKEN = "agui-test-token-of-at-least-16-characters"
HEADERS = {"authorization": f"Bearer {TOKEN}"}
EVENT = TypeAdapter(Event)

DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {"service": {"type": "string", "minLength": 1}},
    "required": ["service"],
    "additionalProperties": False,
}


class Deploy:
    """Deploys a service; ``gate`` (when set) holds every call until it is set."""

    spec = al.ToolSpec("deploy", "Deploy a service.", DEPLOY_SCHEMA)

    def __init__(self) -> None:
        self.ran: list[Any] = []
        self.gate: anyio.Event | None = None

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if self.gate is not None:
            await self.gate.wait()
        self.ran.append(request.input)
        return f"deployed {request.input['service']}"


class AskFirst:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("deploys need a person", request.summary)


def answer(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.TOOL:
        results = [p for item in request.transcript for p in item.tool_results()]
        return chunked("Result: ", "; ".join(str(r.output) for r in results[-2:]))
    words = last.text_content.split()
    if words[:1] == ["deploy"] and "and" in words:
        return tool_calls(
            call("deploy", {"service": words[1]}, id="call-1"),
            call("deploy", {"service": words[3]}, id="call-2"),
        )
    if words[:1] == ["deploy"]:
        return tool_calls(call("deploy", {"service": words[1]}, id="call-1"), text="Deploying.")
    if words[:1] == ["fail"]:
        overloaded = al.ProviderError("503: overloaded", status=503, retryable=True)
        begun = (BeginPart("text-0", PartKind.TEXT), AppendText("text-0", "Partial"))
        return fail(overloaded, *begun)
    if words[:1] == ["think"]:
        return reasoning("The user wants a thought.", "Thought about it.")
    return chunked("Hello", " there.")


def build_agent(store: al.store.SessionStore, tool: Deploy | None = None) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(tool or Deploy()))
        .permissions(AskFirst())
        .store(store)
        .build()
    )


def run_input(thread: str, run: str, *messages: str, **extra: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` with one user message per text (ids ``u-RUN-N``)."""
    return {
        "threadId": thread,
        "runId": run,
        "messages": [
            {"id": f"u-{run}-{n}", "role": "user", "content": text}
            for n, text in enumerate(messages)
        ],
        **extra,
    }


def resume(*entries: tuple[str, str, Any]) -> list[dict[str, Any]]:
    return [
        {"interruptId": i, "status": s, **({} if p is None else {"payload": p})}
        for i, s, p in entries
    ]


async def post_run(client: httpx.AsyncClient, body: Any, path: str = "/") -> list[dict[str, Any]]:
    """POST a run; the events it streamed, each checked against the ag-ui-protocol models."""
    events: list[dict[str, Any]] = []
    async with client.stream("POST", path, json=body, headers=HEADERS) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                EVENT.validate_python(data)  # the package's own models accept it
                events.append(data)
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


ALLOWED_INFOS = {
    "AGUI902",  # events carry no timestamps (left out: recorded streams stay comparable)
    "AGUI208",  # a tool-call-only response's parentMessageId names the message it opens
}


def assert_conformant(events: list[dict[str, Any]]) -> None:
    """The ag-ui-validate conformance validator finds no error, no warning, and no
    information beyond ``ALLOWED_INFOS``."""
    report = validate_agui(events)
    findings = [
        d for d in report.diagnostics if d.severity != "info" or d.rule not in ALLOWED_INFOS
    ]
    assert findings == [], findings
    assert report.internal_errors == []


@asynccontextmanager
async def hypercorn_serving(app: Any) -> AsyncIterator[str]:
    """``app`` on a real hypercorn on 127.0.0.1, on the running backend; yields its URL."""
    if sniffio.current_async_library() == "trio":
        from hypercorn.trio import serve
    else:
        from hypercorn.asyncio import serve
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]
    config.graceful_timeout = 2
    config.loglevel = "WARNING"
    stop = anyio.Event()
    base = f"http://127.0.0.1:{port}"
    async with anyio.create_task_group() as group:
        group.start_soon(partial(serve, app, config, shutdown_trigger=stop.wait))
        async with httpx.AsyncClient(base_url=base, timeout=5) as probe:
            for _ in range(200):
                try:
                    if (await probe.get("/")).status_code in (401, 405):
                        break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
            else:
                raise AssertionError("hypercorn did not answer within 200 tries")
        try:
            yield base
        finally:
            stop.set()
