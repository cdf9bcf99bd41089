"""A real agent that parks on an approval, and a real inbox server on 127.0.0.1:0 in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.store
import agentloop.testing
import agentloop.tools
from agentloop.serve import ServeConfig, SqliteAuditLog, create_app
from agentloop.store import SqliteSessionStore

T = TypeVar("T")
TOKEN = "test-token-0123456789abcdef"
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "minLength": 1}},
    "required": ["path"],
    "additionalProperties": False,
}


class PublishReport:
    """A side effect the permission policy asks about."""

    spec = al.ToolSpec("publish_report", "Publish a report.", SCHEMA)

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(str(request.input["path"]))]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"published {request.input['path']}"


class AskBeforeWriting:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.write":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def answer(request: al.model.TurnRequest) -> Any:
    """Publish the path the user names; then report the tool's result."""
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        path = last.text_content
        return al.testing.tool_calls(
            al.testing.call("publish_report", {"path": path}, id="call-1"),
            usage=al.Usage(input_tokens=120, output_tokens=30, cost=0.0015),
        )
    result = last.parts[0]
    assert isinstance(result, al.ToolResultPart)
    return al.testing.text(
        f"Done: {result.output}", usage=al.Usage(input_tokens=180, output_tokens=12, cost=0.002)
    )


def build_agent(store: al.store.SessionStore) -> al.Agent:
    """The agent both the test (to park sessions) and the server's worker use."""
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(PublishReport()))
        .permissions(AskBeforeWriting())
        .store(store)
        .build()
    )


async def park_async(
    store: al.store.SessionStore, session_id: str, path: str
) -> al.ApprovalRequest:
    """Run a session until it waits for approval of ``publish_report(path)``."""
    driver = await build_agent(store).start(session_id)
    driver.submit_input([al.Item.text(al.ItemKind.USER, path)])
    step = await driver.next()
    assert isinstance(step, al.ApprovalRequest), step
    return step


def run_in_thread(function: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(function)`` in a thread of its own (Playwright's sync API holds this one)."""
    results: list[T] = []
    failures: list[BaseException] = []

    def main() -> None:
        try:
            results.append(anyio.run(function))
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the store operation did not finish within 60 s"
    if failures:
        raise failures[0]
    return results[0]


def park(database: Path, session_id: str, path: str = "/reports/q3.txt") -> None:
    """``park_async`` from a synchronous test, on a store opening of its own."""

    async def run() -> None:
        async with SqliteSessionStore(database) as store:
            await park_async(store, session_id, path)

    run_in_thread(run)


def load(database: Path, session_id: str) -> Any:
    async def run() -> Any:
        async with SqliteSessionStore(database) as store:
            return await store.load(session_id)

    return run_in_thread(run)


def transcript_text(database: Path, session_id: str) -> list[str]:
    async def run() -> list[str]:
        async with SqliteSessionStore(database) as store:
            items = await store.transcript(session_id)
            assert items is not None
            return [item.text_content for item in items]

    return run_in_thread(run)


class ServerThread:
    """``agentloop serve``'s app with uvicorn on 127.0.0.1:0, in a thread with its own loop."""

    def __init__(
        self,
        database: Path,
        *,
        worker: bool = True,
        identity: str = "alice",
        agent: Callable[[Any], al.Agent] = build_agent,
    ) -> None:
        self.database = database
        self.agent = agent
        self.config = ServeConfig(token=TOKEN, identity=identity, worker=worker, poll_interval=0.2)
        self.base = ""
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._server: Any = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the inbox server did not start within 30 s")
        if self._failure is not None:
            raise RuntimeError("the inbox server failed to start") from self._failure
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(20)
        assert not self._thread.is_alive(), "the inbox server did not stop within 20 s"

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:
            self._failure = error
            self._ready.set()

    async def _serve(self) -> None:
        import uvicorn

        async with SqliteSessionStore(self.database) as store:
            app = create_app(
                store,
                config=self.config,
                audit=SqliteAuditLog(self.database),
                agent=self.agent(store),
            )
            config = uvicorn.Config(
                app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=2
            )
            self._server = uvicorn.Server(config)
            task = asyncio.create_task(self._server.serve())
            for _ in range(600):
                if self._server.started or task.done():
                    break
                await asyncio.sleep(0.05)
            if task.done():
                await task
            port = self._server.servers[0].sockets[0].getsockname()[1]
            self.base = f"http://127.0.0.1:{port}"
            self._ready.set()
            await task
