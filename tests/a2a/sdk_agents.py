"""Remote agents written with a2a-sdk's own server classes (no agentloop code), in their
own process, for the A2A tool source's tests.

Usage: python sdk_agents.py PORT
Serves two agents on 127.0.0.1:PORT, one whose card says it streams (``/stream``)
and one that does not (``/plain``), and a few broken "agents" (``/garbage``: a card
that is not JSON; ``/huge``: a JSON-RPC answer of 20 MB; ``/elsewhere``: a card that
sends calls to another origin). The agents act on the message's first word:

- ``echo TEXT``: completes with the artifact TEXT (streamed as two chunks);
- ``ask``: waits in input-required ("Which colour?"), then completes with
  ``colour: ANSWER`` (and the answer's data, if any, as a data part);
- ``approve``: waits in input-required with an approvals data part (the shape an
  agentloop server sends), then completes with the decisions it got as data;
- ``fail`` / ``reject`` / ``auth``: ends failed / rejected / in auth-required;
- ``files``: completes with a PNG (bytes) and a URL part;
- ``slow``: works and never finishes (until cancelled).
"""

from __future__ import annotations

import asyncio
import json
import sys

import uvicorn
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

APPROVALS = {
    "approvals": [
        {"callId": "call-7", "toolName": "drop_table", "input": {"table": "users"},
         "reason": "destructive"},
        {"callId": "call-8", "toolName": "email", "input": {"to": "all"}, "reason": "mass mail"},
    ]
}  # fmt: skip


class Behaviours(AgentExecutor):
    """Acts on the first word of the task's first message (see the module docstring)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        message = context.message
        assert message is not None
        current = context.current_task
        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id or "",
                    context_id=context.context_id or "",
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
            )
            await updater.start_work()
            await self._start(updater, " ".join(get_text_parts(message.parts)))
            return
        first = " ".join(get_text_parts(current.history[0].parts))
        text = " ".join(get_text_parts(message.parts))
        data = get_data_parts(message.parts)
        if first.startswith("approve"):
            await updater.add_artifact([new_data_part({"decisions": data})], name="decisions")
        else:
            parts: list[Part] = [new_text_part(f"colour: {text}")]
            parts.extend(new_data_part(d) for d in data)
            await updater.add_artifact(parts, name="answer")
        await updater.complete()

    async def _start(self, updater: TaskUpdater, text: str) -> None:
        word, _, rest = text.partition(" ")
        say = updater.new_agent_message
        if word == "echo":
            half = len(rest) // 2
            await updater.add_artifact([new_text_part(rest[:half])], artifact_id="out")
            await updater.add_artifact(
                [new_text_part(rest[half:])], artifact_id="out", append=True, last_chunk=True
            )
            await updater.complete()
        elif word == "ask":
            await updater.requires_input(say([new_text_part("Which colour?")]))
        elif word == "approve":
            parts = [new_text_part("waiting for approval"), new_data_part(APPROVALS)]
            await updater.requires_input(say(parts))
        elif word == "fail":
            await updater.failed(say([new_text_part("it broke")]))
        elif word == "reject":
            await updater.reject(say([new_text_part("not for me")]))
        elif word == "auth":
            await updater.requires_auth(say([new_text_part("log in first")]))
        elif word == "files":
            png = Part(raw=b"\x89PNG-bytes", media_type="image/png", filename="dot.png")
            link = Part(url="https://example.test/report.pdf", media_type="application/pdf",
                        filename="report.pdf")  # fmt: skip
            await updater.add_artifact([png, link], name="files")
            await updater.complete()
        elif word == "slow":
            await asyncio.sleep(3600)
        else:
            await updater.reject(say([new_text_part(f"unknown behaviour {word!r}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def card(base: str, path: str, *, streaming: bool) -> AgentCard:
    return AgentCard(
        name=f"SDK agent ({path})",
        description="An agent written with a2a-sdk alone.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=base + path)
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Says it back.", tags=["test"]),
            AgentSkill(id="ask", name="Ask", description="Asks a question.", tags=["test"]),
        ],
    )


def agent_routes(base: str, path: str, *, streaming: bool) -> list[Route]:
    the_card = card(base, path, streaming=streaming)
    handler = DefaultRequestHandler(
        agent_executor=Behaviours(), task_store=InMemoryTaskStore(), agent_card=the_card
    )
    return [
        *create_agent_card_routes(the_card, card_url=f"{path}.well-known/agent-card.json"),
        *create_jsonrpc_routes(handler, rpc_url=path),
    ]


def broken_routes(base: str) -> list[Route]:
    async def garbage(request: Request) -> Response:
        return Response(b"{not json", media_type="application/json")

    async def huge(request: Request) -> Response:
        async def body():  # type: ignore[no-untyped-def]
            yield b'{"jsonrpc": "2.0", "id": "1", "result": {"task": {"id": "'
            for _ in range(20 * 1024):
                yield b"x" * 1024
            yield b'"}}}'

        return StreamingResponse(body(), media_type="application/json")

    def card_of(path: str, url: str) -> Route:
        data = json.loads(
            json.dumps(
                {
                    "name": "broken",
                    "description": "broken",
                    "version": "1",
                    "supportedInterfaces": [
                        {"protocolBinding": "JSONRPC", "protocolVersion": "1.0", "url": url}
                    ],
                    "capabilities": {"streaming": False},
                    "defaultInputModes": ["text/plain"],
                    "defaultOutputModes": ["text/plain"],
                    "skills": [],
                }
            )
        )

        async def serve(request: Request) -> Response:
            return JSONResponse(data)

        return Route(f"{path}.well-known/agent-card.json", serve)

    return [
        Route("/garbage/.well-known/agent-card.json", garbage),
        card_of("/huge/", base + "/huge/"),
        Route("/huge/", huge, methods=["POST"]),
        card_of("/elsewhere/", "http://192.0.2.1:9/"),
    ]


async def main(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    app = Starlette(
        routes=[
            *agent_routes(base, "/stream/", streaming=True),
            *agent_routes(base, "/plain/", streaming=False),
            *broken_routes(base),
        ]
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    await server.serve()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
