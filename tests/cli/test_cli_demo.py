"""`agentloop demo` and `agentloop replay` through main(), plus one real subprocess."""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from cli_support import Answers, console, lines

import agentloop as al
import agentloop.transcript
from agentloop.cli import main
from agentloop.cli._demo import QUESTION, serve_command
from agentloop.store import SqliteSessionStore, export_jsonl

TOUR_START = [
    "agentloop demo --scripted",
    "The model is a ScriptedModel (agentloop.testing), not an LLM: no network.",
    "you> What is 2 + 40, and what's on my grocery note?",
    '-> add({"a": 2, "b": 40}) [call-1]',
    "   <tool> finished in N ms",
    "<- call-1: 42",
    '-> read_note({"name": "groceries"}) [call-2]',
    "?  read_note needs approval: Read /notes/groceries.txt (outside the allowed roots) "
    "(sensitive_path)",
]
TOUR_END = [
    "you> Now write me a long poem about flour.",
    "Flour, soft and white,",
    "== turn cancelled (usage not reported)",
    "(the demo pressed Ctrl-C at the first token: controller.interrupt())",
    "second turn: cancelled at stage model",
    "transcript: 9 items, every tool call answered",
    "usage: input 470 tokens, output 48 tokens",
]
ANSWER = "2 + 40 = 42, and your grocery note says: eggs, flour, milk."
ROOT = Path(__file__).resolve().parents[2]


def inbox_hint(path: Path, session_id: str = "demo-scripted") -> list[str]:
    """The demo's closing lines: where the session is and how to open the inbox on it."""
    return [
        f"session {session_id!r} saved in {path}",
        "Open it in the approval inbox (needs the serve extra: "
        "pip install 'agentloop-runtime[serve]'):",
        f"  {serve_command(path)}",
        f"then open the URL it prints; this session is at /sessions/{session_id} "
        "(Ctrl-C stops the server)",
    ]


def test_scripted_demo_with_yes(demo_store: Path) -> None:
    target, buffer = console()
    assert main(["demo", "--scripted", "--yes"], console=target) == 0
    assert lines(buffer) == [
        *TOUR_START,
        "approve? [y/n/e(dit)] y  (--yes)",
        "   approved",
        "   <tool> finished in N ms",
        "<- call-2: eggs, flour, milk",
        ANSWER,
        "== turn completed (input 470 tokens, output 48 tokens)",
        f"answer: {ANSWER}",
        *TOUR_END,
        *inbox_hint(demo_store),
    ]


def test_scripted_demo_asks_and_takes_an_edited_input() -> None:
    target, buffer = console()
    answers = Answers(target, ["maybe", "e", "{bad", "e", '{"name": "todo"}'])
    assert main(["demo", "--scripted"], console=target, read_line=answers) == 0
    out = lines(buffer)
    assert out[len(TOUR_START) : len(TOUR_START) + 10] == [
        "approve? [y/n/e(dit)] maybe",
        "please answer y, n or e (got 'maybe')",
        "approve? [y/n/e(dit)] e",
        'new input as JSON (blank keeps {"name": "groceries"}): {bad',
        "cannot use that input: not JSON (Expecting property name enclosed in double quotes "
        "at column 2); try again",
        "approve? [y/n/e(dit)] e",
        'new input as JSON (blank keeps {"name": "groceries"}): {"name": "todo"}',
        "   approved with edited input",
        "   <tool> finished in N ms",
        "<- call-2: no note called 'todo'",
    ]


def test_scripted_demo_denial_with_a_reason() -> None:
    target, buffer = console()
    answers = Answers(target, ["n", "private"])
    assert main(["demo", "--scripted"], console=target, read_line=answers) == 0
    out = lines(buffer)
    assert out[len(TOUR_START) : len(TOUR_START) + 4] == [
        "approve? [y/n/e(dit)] n",
        "reason (optional): private",
        "   denied",
        "<- call-2 (error): private",
    ]


def test_the_console_script_runs_the_scripted_demo() -> None:
    script = Path(sys.executable).parent / "agentloop"
    done = subprocess.run(
        [str(script), "demo", "--scripted", "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "agentloop demo --scripted"
    assert "approve? [y/n/e(dit)] y  (--yes)" in out
    assert f"answer: {ANSWER}" in out
    assert out[-7:-4] == TOUR_END[-3:]
    assert out[-4].startswith("session 'demo-scripted' saved in ")
    assert out[-2].startswith("  ")
    assert " serve --store sqlite:///" in out[-2]


def test_replay_renders_a_jsonl_transcript(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    export_jsonl(
        [
            al.Item.text(al.ItemKind.USER, "add 1 and 2"),
            al.Item(al.ItemKind.ASSISTANT, (al.ToolCallPart("c1", "add", {"a": 1, "b": 2}),)),
            al.Item(al.ItemKind.TOOL, (al.ToolResultPart("c1", "3"),)),
            al.Item.text(al.ItemKind.ASSISTANT, "1 + 2 = 3"),
        ],
        path,
    )
    target, buffer = console()
    assert main(["replay", str(path)], console=target) == 0
    assert lines(buffer) == [
        f"replaying {path} (4 items)",
        "[user] add 1 and 2",
        '[assistant] -> add({"a": 1, "b": 2}) [c1]',
        "[tool] <- c1: 3",
        "[assistant] 1 + 2 = 3",
    ]


@pytest.mark.parametrize(
    ("content", "status", "message"),
    [
        (
            None,
            2,
            "agentloop replay: no file '{path}'; expected a JSONL transcript or a session store",
        ),
        (
            "not json\n",
            2,
            "agentloop replay: '{path}' is not a JSONL transcript: cannot import JSONL "
            "transcript from '{path}': line 1 is not JSON",
        ),
        (
            b"\x89PNG\r\n\x1a\n\xff\xfe binary",
            2,
            "agentloop replay: '{path}' is neither a JSONL transcript nor a session store "
            "(it is not UTF-8 text)",
        ),
        (
            b"SQLite format 3\x00 but the rest is garbage" + bytes(200),
            2,
            "agentloop replay: cannot read the session store '{path}': ",
        ),
    ],
)
def test_replay_refuses_what_it_cannot_read_in_one_line(
    tmp_path: Path, content: str | bytes | None, status: int, message: str
) -> None:
    path = tmp_path / "session.jsonl"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)
    target, buffer = console()
    assert main(["replay", str(path)], console=target) == status
    (line,) = lines(buffer)
    assert line.startswith(message.format(path=path))


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--scripted"], []])
def test_without_rich_the_command_says_what_to_install_in_one_line(argv: list[str]) -> None:
    # structlog imports rich when it can, so block it rather than look for it.
    code = (
        "import sys; sys.modules['rich'] = None; "
        "import agentloop, agentloop.host, agentloop.store, agentloop.testing; "
        "import runpy; sys.argv = ['agentloop', *sys.argv[1:]]; "
        "runpy.run_module('agentloop', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "agentloop: the command needs the cli extra: pip install 'agentloop-runtime[cli]' "
        "(in a clone: pip install '.[cli]')\n"
    )


def test_the_local_demo_builds_the_server_on_its_first_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentloop.cli._demo as demo
    import agentloop.local

    # the build runs as a child process; this one prints a step and fails like pip would
    script = (
        "import sys; print('[local-server] compiling 1% [2/193], 1s so far', flush=True); "
        "print('[local-server] pip failed: no compiler', file=sys.stderr); sys.exit(1)"
    )
    monkeypatch.setattr(demo, "BUILD_COMMAND", (sys.executable, "-c", script))
    monkeypatch.setattr(agentloop.local, "local_server_available", lambda: False)
    target, buffer = console()
    status = main(["demo", "--yes"], console=target, read_line=Answers(target, []))
    out = lines(buffer)
    assert status == 2
    assert out[2].startswith("first run: building the local model server")
    assert out[3:] == [
        "[local-server] compiling 1% [2/193], 1s so far",
        "[local-server] pip failed: no compiler",
        "agentloop demo: the build failed with exit code 1 (its output is above); fix the "
        "cause, then run `python -m agentloop.local` or this demo again",
        "Or try the offline tour now: agentloop demo --scripted",
    ]


# -- the session store and the inbox -----------------------------------------------------------


def saved_transcript(path: Path, session_id: str) -> list[al.Item] | None:
    async def read() -> list[al.Item] | None:
        async with SqliteSessionStore(path) as store:
            return await store.transcript(session_id)

    return anyio.run(read)


def test_the_demo_saves_its_session_and_a_second_run_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "my demo.db"
    for _ in range(2):
        target, buffer = console()
        assert main(["demo", "--scripted", "--yes", "--store", str(path)], console=target) == 0
        assert lines(buffer)[-4:] == inbox_hint(path)
    items = saved_transcript(path, "demo-scripted")
    assert items is not None
    assert len(items) == 9  # one run's transcript, not two: the second replaced the first
    assert items[1].text_content == QUESTION
    assert al.transcript.find_violation(items) is None
    # the path has a space: the printed command quotes the store URL
    assert f"--store 'sqlite:///{path}'" in serve_command(path)


def test_a_denial_is_saved_in_the_demo_store(demo_store: Path) -> None:
    target, _buffer = console()
    answers = Answers(target, ["n", "private"])
    assert main(["demo", "--scripted"], console=target, read_line=answers) == 0
    items = saved_transcript(demo_store, "demo-scripted")
    assert items is not None
    results = [p for item in items for p in item.parts if isinstance(p, al.ToolResultPart)]
    assert [(r.call_id, r.output, r.is_error) for r in results] == [
        ("call-1", "42", False),
        ("call-2", "private", True),
    ]


def test_the_printed_serve_command_opens_the_demo_session(demo_store: Path) -> None:
    target, buffer = console()
    assert main(["demo", "--scripted", "--yes"], console=target) == 0
    command = lines(buffer)[-2].strip()
    token = "demo-test-token-0123456789"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [*shlex.split(command), "--port", "0", "--token", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        cwd=demo_store.parent.parent,
    )
    output: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [output.put(line) for line in process.stdout or ()], daemon=True
    ).start()
    try:
        seen: list[str] = []
        base = None
        deadline = time.monotonic() + 60
        while base is None and time.monotonic() < deadline:
            try:
                line = output.get(timeout=1)
            except queue.Empty:
                assert process.poll() is None, f"the server exited: {seen}"
                continue
            seen.append(line.strip())
            found = re.match(r"open (http://127\.0\.0\.1:\d+)/\?token=(\S+)$", line.strip())
            if found:
                base = found.group(1)
                assert found.group(2) == token
        assert base is not None, f"no URL printed within 60 s: {seen}"
        assert seen[-2] == f"agentloop inbox on sqlite:///{demo_store}"
        headers = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, timeout=10, headers=headers) as client:
            session = client.get("/sessions/demo-scripted")
            assert session.status_code == 200
            assert "demo-scripted" in session.text
            assert QUESTION.replace("'", "&#39;") in session.text
            assert "eggs, flour, milk" in session.text
            inbox = client.get("/")
            assert inbox.status_code == 200
            assert "Inbox" in inbox.text
            missing = client.get("/sessions/demo")
            assert missing.status_code == 404  # only the scripted tour ran
    finally:
        process.send_signal(signal.SIGINT)
        try:
            status = process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise
    assert status == 130
