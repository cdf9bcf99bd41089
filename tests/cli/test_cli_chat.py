"""`agentloop chat` through main() and ChatSession; the local tour against a fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from cli_support import Answers, console, lines

import agentloop as al
import agentloop.local
import agentloop.model
import agentloop.permissions
import agentloop.store
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.cli import main
from agentloop.cli._chat import COMMANDS, ChatSession, build_chat_agent
from agentloop.cli._demo import ToolChoicePerCall, serve_command
from agentloop.cli._render import Renderer
from agentloop.testing import call, chunked, hang, tool_calls

MODEL = "python:cli_support:make_model"


def chat(answers: list[str], *extra: str) -> tuple[int, list[str]]:
    target, buffer = console()
    argv = ["chat", "--model", MODEL, "--tools", "cli_support:TOOLS", *extra]
    status = main(argv, console=target, read_line=Answers(target, answers))
    return status, lines(buffer)


def test_chat_streams_shows_tools_asks_and_answers_commands() -> None:
    status, out = chat(
        ["hello", "add 2 3", "touch", "n", "no writes", "/usage", "/history", "/nope", "/quit"]
    )
    assert status == 0
    assert out == [
        f"commands: {COMMANDS}; Ctrl-C cancels a running turn",
        "you> hello",
        "you said 'hello' (message 1)",
        "== turn completed (input 7 tokens, output 4 tokens)",
        "you> add 2 3",
        '-> add({"a": 2, "b": 3}) [call-1]',
        "   <tool> finished in N ms",
        "<- call-1: 5",
        "the sum is 5",
        "== turn completed (input 9 tokens, output 5 tokens)",
        "you> touch",
        '-> touch({"path": "/etc/motd"}) [call-2]',
        "?  touch needs approval: Write /etc/motd (outside the allowed roots) (sensitive_path)",
        "approve? [y/n/e(dit)] n",
        "reason (optional): no writes",
        "   denied",
        "<- call-2 (error): no writes",
        "the sum is no writes",
        "== turn completed (input 5 tokens, output 3 tokens)",
        "you> /usage",
        "usage: input 21 tokens, output 12 tokens",
        "you> /history",
        "[system] You are a helpful assistant.",
        "[user] hello",
        "[assistant] you said 'hello' (message 1)",
        "[user] add 2 3",
        '[assistant] -> add({"a": 2, "b": 3}) [call-1]',
        "[tool] <- call-1: 5",
        "[assistant] the sum is 5",
        "[user] touch",
        '[assistant] -> touch({"path": "/etc/motd"}) [call-2]',
        "[tool] <- call-2 (error): no writes",
        "[assistant] the sum is no writes",
        "(11 items)",
        "you> /nope",
        "unknown command '/nope'; commands: /quit  /history  /export FILE.jsonl  /usage  /help",
        "you> /quit",
        "bye",
    ]


def test_chat_sessions_persist_and_resume_in_the_store(tmp_path: Path) -> None:
    store = str(tmp_path / "chat.db")
    status, first = chat(["hello", "/quit"], "--store", store, "--session", "s1")
    assert status == 0
    assert first[0] == f"new session 's1' in {store}"

    status, second = chat(["again", "/history"], "--store", store, "--session", "s1")
    assert status == 0
    assert second[0] == "resumed session 's1': 3 items"
    assert second[3:] == [
        "you said 'again' (message 2)",
        "== turn completed (input 7 tokens, output 4 tokens)",
        "you> /history",
        "[system] You are a helpful assistant.",
        "[user] hello",
        "[assistant] you said 'hello' (message 1)",
        "[user] again",
        "[assistant] you said 'again' (message 2)",
        "(5 items)",
        "you> <EOF>",
        "bye",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["chat", "--model", MODEL, "--tools", "nocolon"],
            "agentloop chat: --tools 'nocolon': expected MODULE:ATTR (e.g. mytools:registry); "
            "the ':ATTR' is missing",
        ),
        (
            ["chat", "--model", "nowhere:model"],
            "agentloop chat: --model 'nowhere:model': from_string: unknown provider 'nowhere' "
            "in 'nowhere:model'; expected 'openai:MODEL', 'openai-responses:MODEL', "
            "'anthropic:MODEL', 'gemini:MODEL', 'openai-compatible:BASE_URL#MODEL' (e.g. "
            "'openai-compatible:http://127.0.0.1:8080/v1#qwen') or "
            "'openai-responses:BASE_URL#MODEL'; or 'local' (the embedded toy model), or "
            "python:MODULE:ATTR (your own ModelAdapter)",
        ),
    ],
)
def test_chat_reports_bad_arguments(argv: list[str], message: str) -> None:
    target, buffer = console()
    assert main(argv, console=target, read_line=Answers(target, [])) == 2
    assert lines(buffer) == [message]


@pytest.mark.anyio
async def test_ctrl_c_cancels_the_turn_not_the_chat() -> None:
    target, buffer = console()
    controller = al.CancellationController()
    model = al.testing.ScriptedModel(
        [hang(al.BeginPart("text-0", al.PartKind.TEXT), al.AppendText("text-0", "Once")), "ok"]
    )
    session = ChatSession(
        build_chat_agent(model, None, controller),
        Renderer(target),
        Answers(target, []),
        controller,
    )
    session.interrupt()  # between turns: only a hint
    results: list[al.TurnResult] = []
    async with anyio.create_task_group() as group:

        async def ask() -> None:
            result = await session.ask("a long poem")
            assert result is not None
            results.extend(result.turns)

        group.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        session.interrupt()
    after = await session.ask("still there?")

    assert [turn.finish_reason for turn in results] == [al.FinishReason.CANCELLED]
    assert after is not None
    assert after.final_text == "ok"
    assert lines(buffer) == [
        "(Ctrl-C cancels a running turn; type /quit to leave)",
        "Once",
        "(Ctrl-C: cancelling the current turn)",
        "== turn cancelled (usage not reported)",
        "ok",
        "== turn completed (usage not reported)",
    ]


class FakeServer:
    """Stands in for agentloop.local.LocalServer: scripted models keyed by tool_choice."""

    base_url = "http://127.0.0.1:9/v1"

    def __init__(self) -> None:
        self.entered = False

    async def __aenter__(self) -> FakeServer:
        self.entered = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.entered = False

    def model(self, **options: Any) -> al.testing.ScriptedModel:
        choice = options.get("tool_choice")
        if choice == "add":
            return al.testing.ScriptedModel([tool_calls(call("add", {"a": 1, "b": 2}))])
        if choice == "read_note":
            reply = tool_calls(call("read_note", {"name": "groceries"}))
            return al.testing.ScriptedModel([reply], call_id_prefix="note-")
        # The last turn's answer is typed (a scripted model has no native mode: the tool).
        answer = tool_calls(call("final_answer", {"items": ["eggs", "flour", "milk"]}))
        return al.testing.ScriptedModel(
            [chunked("It is ", "3."), chunked("eggs, flour, milk"), answer]
        )


def test_local_demo_forces_the_tool_on_the_first_call(
    monkeypatch: pytest.MonkeyPatch, demo_store: Path
) -> None:
    monkeypatch.setattr(agentloop.local, "LocalServer", FakeServer)
    monkeypatch.setattr(agentloop.local, "local_server_available", lambda: True)
    target, buffer = console()
    assert main(["demo", "--yes"], console=target) == 0
    out = lines(buffer)
    assert out[0] == "agentloop demo"
    assert out[1].startswith("The model is SmolLM2-135M-Instruct, a 135M-parameter toy")
    assert out[2:] == [
        "starting the local model server on http://127.0.0.1:9/v1 ...",
        "server ready",
        "you> What is 17 + 25?",
        '-> add({"a": 1, "b": 2}) [call-1]',
        "   <tool> finished in N ms",
        "<- call-1: 3",
        "It is 3.",
        "== turn completed (usage not reported)",
        "answer: It is 3.",
        "you> What is on my grocery note?",
        '-> read_note({"name": "groceries"}) [note-1]',
        out[13],  # the approval line names a temporary directory
        "approve? [y/n/e(dit)] y  (--yes)",
        "   approved",
        "   <tool> finished in N ms",
        "<- note-1: eggs, flour, milk",
        "eggs, flour, milk",
        "== turn completed (usage not reported)",
        "answer: eggs, flour, milk",
        "you> List the items on my grocery note.",
        '-> final_answer({"items": ["eggs", "flour", "milk"]}) [call-1]',
        "== turn completed (usage not reported)",
        "typed answer: GroceryList(items=['eggs', 'flour', 'milk'])",
        "transcript: 12 items, every tool call answered",
        "usage: not reported",
        f"session 'demo' saved in {demo_store}",
        "Open it in the approval inbox (needs the serve extra: "
        "pip install 'agentloop-runtime[serve]'):",
        f"  {serve_command(demo_store)}",
        "then open the URL it prints; this session is at /sessions/demo (Ctrl-C stops the server)",
    ]
    assert out[13].startswith("?  read_note needs approval: Read /")
    assert out[13].endswith("/groceries.txt (outside the allowed roots) (sensitive_path)")

    async def saved() -> list[al.Item] | None:
        async with al.store.SqliteSessionStore(demo_store) as store:
            return await store.transcript("demo")

    items = anyio.run(saved)
    assert items is not None
    assert [item.text_content for item in items if item.kind is al.ItemKind.USER] == [
        "What is 17 + 25?",
        "What is on my grocery note?",
        "List the items on my grocery note.",
    ]


@pytest.mark.anyio
async def test_tool_choice_per_call_routes_by_the_transcript_tail() -> None:
    forced = al.testing.ScriptedModel([tool_calls(call("add", {"a": 1, "b": 1}))])
    free = al.testing.ScriptedModel(["two"])
    session = await ToolChoicePerCall(forced, free).start_session(al.SessionConfig("s"))
    user = al.Item.text(al.ItemKind.USER, "1 + 1?")
    tool = al.Item(al.ItemKind.TOOL, (al.ToolResultPart("call-1", "2"),))
    await session.begin_turn(al.model.TurnRequest("s", "turn-1", [user]), None)
    await session.begin_turn(al.model.TurnRequest("s", "turn-1", [user, tool]), None)
    assert (len(forced.requests), len(free.requests)) == (1, 1)


def test_chat_finishes_a_turn_that_stopped_at_an_approval(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.db")

    async def stop_at_the_approval() -> None:
        from cli_support import TOOLS, make_model

        registry = al.ToolRegistry()
        for tool in TOOLS:
            registry.add(tool)  # type: ignore[arg-type]
        agent = build_chat_agent(make_model(), registry, al.CancellationController())
        async with al.store.SqliteSessionStore(path) as store:
            agent = attrs.evolve(agent, store=store)
            driver = await agent.start("s1")
            driver.submit_input([al.Item.text(al.ItemKind.USER, "touch")])
            assert isinstance(await driver.next(), al.ApprovalRequest)  # then the process "dies"

    anyio.run(stop_at_the_approval)
    status, out = chat(["y", "/history"], "--store", path, "--session", "s1")
    assert status == 0
    assert out[:5] == [
        "session 's1' stopped inside a turn; finishing it first",
        'approval pending from the last run: touch({"path": "/etc/motd"})',
        "approve? [y/n/e(dit)] y",
        "assistant> the sum is touched /etc/motd",
        "resumed session 's1': 5 items",
    ]
    assert out[-4:] == [
        "[assistant] the sum is touched /etc/motd",
        "(5 items)",
        "you> <EOF>",
        "bye",
    ]


def test_chat_compacts_to_max_context_tokens() -> None:
    long = {
        name: f"{name} " + letter * 200 for name, letter in [("a", "x"), ("b", "y"), ("c", "z")]
    }
    status, out = chat(
        [long["a"], long["b"], long["c"], "/history", "/quit"], "--max-context-tokens", "120"
    )
    assert status == 0
    start = out.index("you> /history")
    assert out[start + 1 : start + 7] == [
        "[system] You are a helpful assistant.",
        "[context] [Compaction removed 4 earlier items to fit the context window.]",
        f"[user] {long['c']}",
        f"[assistant] you said '{long['c']}' (message 1)",
        "(4 items)",
        "you> /quit",
    ]


def test_chat_without_a_budget_keeps_everything() -> None:
    status, out = chat(["one", "two", "/history", "/quit"])
    assert status == 0
    assert "(5 items)" in out
    assert not any(line.startswith("[context]") for line in out)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "expected a number > 0, got 0"),
        ("-3", "expected a number > 0, got -3"),
        ("abc", "expected a whole number, got 'abc'"),
        ("1.5", "expected a whole number, got '1.5'"),
    ],
)
def test_chat_refuses_a_bad_context_budget(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target, _buffer = console()
    argv = ["chat", "--model", MODEL, "--max-context-tokens", value]
    assert main(argv, console=target, read_line=Answers(target, [])) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"agentloop chat: error: argument --max-context-tokens: {message}"
    )


async def _park_on_the_question(path: str, session_id: str) -> None:
    """Another host (with a task manager) runs ``session_id`` to ``book``'s question, then
    its process "dies"."""
    from cli_support import TOOLS, make_model

    registry = al.ToolRegistry()
    for tool in TOOLS:
        registry.add(tool)  # type: ignore[arg-type]
    agent = build_chat_agent(make_model(), registry, al.CancellationController())
    async with (
        al.store.SqliteSessionStore(path) as store,
        al.tasks.AsyncTaskManager() as manager,
    ):
        agent = attrs.evolve(agent, store=store, task_manager=manager)
        driver = await agent.start(session_id)
        driver.submit_input([al.Item.text(al.ItemKind.USER, "book")])
        assert isinstance(await driver.next(), al.CallQuestion)
        await driver.release()


def test_chat_refuses_a_session_resting_on_a_question_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "chat.db")
    anyio.run(_park_on_the_question, path, "s1")

    async def stored() -> Any:
        async with al.store.SqliteSessionStore(path) as store:
            [waiting] = await store.sessions_awaiting_answer()
            loaded = await store.load("s1")
            return loaded.status, loaded.answers, waiting.unanswered_questions

    before = anyio.run(stored)
    status, out = chat(["/quit"], "--store", path, "--session", "s1")
    assert (status, out) == (
        2,
        [
            "session 's1' stopped inside a turn; finishing it first",
            "session 's1' waits for an answer: book asks 'Which seat?' (question "
            "question:call-1:1, kind seat); the chat cannot answer questions: answer it in the "
            f"inbox (agentloop serve --store {path}) or from your host, then chat again; the "
            "session is left as it was",
        ],
    )
    after = anyio.run(stored)
    assert after == before  # still waiting on the same question, no answer recorded
    assert before[0] is al.store.SessionStatus.AWAITING_ANSWER


class WriteThenAsk:
    """``book``, which writes (so the chat asks for approval first), then asks a question."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    def __init__(self) -> None:
        self.ended: list[str] = []

    def proposed_requests(self, request: al.ToolRequest) -> list[Any]:
        return [al.permissions.FileSystemWrite("/etc/seats")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        try:
            await ctx.ask(al.tools.Question("seat", "Which seat?", None, resume={"n": 1}))
        except anyio.get_cancelled_exc_class():
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return "booked"


@pytest.mark.anyio
async def test_finishing_a_turn_that_ends_on_a_live_question_leaves_no_call_running(
    tmp_path: Path,
) -> None:
    """The stored turn waits for an approval; approved at the prompt, the call runs and asks
    a question in its task: finishing the turn releases the driver, so that task ends
    (cancelled) instead of waiting in ``ctx.ask`` for the rest of the process."""
    from cli_support import make_model

    from agentloop.cli._main import _load_session

    book = WriteThenAsk()
    registry = al.ToolRegistry().with_tool(book)
    async with (
        al.store.SqliteSessionStore(tmp_path / "chat.db") as store,
        al.tasks.AsyncTaskManager() as manager,
    ):
        handle = manager.handle()
        agent = build_chat_agent(make_model(), registry, al.CancellationController())
        agent = attrs.evolve(agent, store=store, task_manager=manager)
        driver = await agent.start("s2")
        driver.submit_input([al.Item.text(al.ItemKind.USER, "book")])
        assert isinstance(await driver.next(), al.ApprovalRequest)
        await driver.release()  # the process "dies" at the approval
        target, buffer = console()
        session = ChatSession(
            agent,
            Renderer(target),
            Answers(target, ["y"]),
            al.CancellationController(),
            session="s2",
        )
        assert await _load_session(store, "chat.db", session, Renderer(target)) is False
        assert await handle.list_running() == []
        assert book.ended == ["cancelled"]
        assert lines(buffer) == [
            "session 's2' stopped inside a turn; finishing it first",
            "approval pending from the last run: book({})",
            "approve? [y/n/e(dit)] y",
            "session 's2' waits for an answer: book asks 'Which seat?' (question "
            "question:call-1:1, kind seat); the chat cannot answer questions: answer it in the "
            "inbox (agentloop serve --store chat.db) or from your host, then chat again; the "
            "session is left as it was",
        ]
        stored = await store.load("s2")
        assert stored is not None
        assert stored.status is al.store.SessionStatus.AWAITING_ANSWER
