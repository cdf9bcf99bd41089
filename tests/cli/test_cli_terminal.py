"""The command in a real pseudo-terminal, with real Ctrl-C keystrokes (pexpect).

``sendintr()`` types the terminal's interrupt character, so the kernel's line
discipline sends SIGINT to the foreground process group, exactly as a person
pressing Ctrl-C does. The scripted-model tests always run; the local-model
tests run when the local server is installed (``make local-server``) and are
skipped otherwise (they never build it).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from cli_support import as_in_a_terminal

from agentloop.local import local_server_available

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = Path(__file__).resolve().parent
TIMEOUT = 60  # seconds for each expected output; generous for a loaded machine
LOCAL_TIMEOUT = 240
APPROVE = re.escape("approve? [y/n/e(dit)]")
PROMPT = "you> "
CHAT = ["chat", "--model", "python:cli_support:make_model", "--tools", "cli_support:TOOLS"]


def spawn(*argv: str, timeout: float = TIMEOUT, term: str = "dumb") -> pexpect.spawn:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT)]),
        "NO_COLOR": "1",
        "TERM": term,
        "COLUMNS": "200",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentloop", *argv],
        cwd=str(ROOT),
        env=env,
        encoding="utf-8",
        timeout=timeout,
        dimensions=(40, 200),
        preexec_fn=as_in_a_terminal,
    )
    return child


@pytest.fixture
def terminal() -> Iterator[list[pexpect.spawn]]:
    children: list[pexpect.spawn] = []
    yield children
    for child in children:
        if child.isalive():
            child.terminate(force=True)


def finished(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    status: int = child.exitstatus
    return status


# -- the scripted model: always --------------------------------------------------------------


def test_ctrl_c_at_the_demo_approval_cancels_the_turn_at_once(
    terminal: list[pexpect.spawn],
) -> None:
    child = spawn("demo", "--scripted")
    terminal.append(child)
    child.expect(APPROVE)
    child.sendintr()
    child.expect(re.escape("(Ctrl-C: cancelling the current turn; press it again to exit)"))
    child.expect(re.escape("== turn cancelled"))
    child.expect(re.escape("the turn was cancelled with Ctrl-C; the tour stops here"))
    assert finished(child) == 130  # no Enter needed


def test_a_second_ctrl_c_at_the_chat_prompt_exits(terminal: list[pexpect.spawn]) -> None:
    child = spawn(*CHAT)
    terminal.append(child)
    child.expect(PROMPT)
    child.sendintr()
    child.expect(re.escape("(Ctrl-C: press it again to exit, or type /quit)"))
    child.sendintr()
    child.expect("interrupted")
    assert finished(child) == 130


def test_ctrl_c_at_the_chat_approval_cancels_and_the_next_line_is_not_lost(
    terminal: list[pexpect.spawn],
) -> None:
    child = spawn(*CHAT)
    terminal.append(child)
    child.expect(PROMPT)
    child.sendline("touch")
    child.expect(APPROVE)
    child.sendintr()
    child.expect(re.escape("== turn cancelled"))
    child.expect(PROMPT)
    child.sendline("hello")  # answered by the chat, not swallowed by the abandoned prompt
    child.expect(re.escape("you said 'hello'"))
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect("bye")
    assert finished(child) == 0


def test_ctrl_c_during_a_turn_keeps_the_partial_text_in_history(
    terminal: list[pexpect.spawn],
) -> None:
    child = spawn(*CHAT)
    terminal.append(child)
    child.expect(PROMPT)
    child.sendline("wait for it")
    child.expect("partial answer")
    child.sendintr()
    child.expect(re.escape("== turn cancelled"))
    child.expect(PROMPT)
    child.sendline("/history")
    child.expect(re.escape("[assistant] partial answer"))
    child.expect(re.escape("[assistant] Previous assistant response was interrupted"))
    child.expect(PROMPT)
    child.sendline("/quit")
    assert finished(child) == 0


def test_a_raising_tool_is_one_line_and_a_traceback_with_verbose(
    terminal: list[pexpect.spawn],
) -> None:
    quiet = spawn(*CHAT, "--yes")
    terminal.append(quiet)
    quiet.expect(PROMPT)
    quiet.sendline("boom")
    quiet.expect(PROMPT)
    shown = quiet.before
    quiet.sendline("/quit")
    assert finished(quiet) == 0
    assert "<- call-1 (error): tool 'boom' failed: ValueError: the boom tool always fails" in shown
    assert "Traceback" not in shown

    verbose = spawn(*CHAT, "--yes", "--verbose")
    terminal.append(verbose)
    verbose.expect(PROMPT)
    verbose.sendline("boom")
    verbose.expect(PROMPT)
    shown = verbose.before
    verbose.sendline("/quit")
    assert finished(verbose) == 0
    assert "Traceback (most recent call last):" in shown
    assert "ValueError: the boom tool always fails" in shown


# -- the local model: when it is installed ----------------------------------------------------

local = pytest.mark.skipif(
    not local_server_available(),
    reason="the local model server is not installed; `make local-server` builds it",
)


@local
def test_ctrl_c_in_a_local_chat_leaves_the_model_server_running(
    terminal: list[pexpect.spawn],
) -> None:
    child = spawn("chat", timeout=LOCAL_TIMEOUT, term="xterm")
    terminal.append(child)
    child.expect(PROMPT)
    child.sendline("Write a very long story about a dragon.")
    child.expect(re.escape("dragon.\r\n"))  # the terminal's echo of the line
    child.expect(r"thinking… \d+s")  # a sign of life until the first token
    child.expect(r"[A-Za-z]{2,}")  # the first streamed words
    child.sendintr()
    child.expect(re.escape("== turn cancelled"))
    child.expect(PROMPT)
    child.sendline("Say hello.")
    child.expect(r"== turn (completed|max_tokens)")  # the server survived the Ctrl-C
    child.expect(PROMPT)
    child.sendline("/quit")
    assert finished(child) == 0


@local
def test_ctrl_c_at_the_local_demo_approval_stops_the_tour_and_the_server(
    terminal: list[pexpect.spawn],
) -> None:
    child = spawn("demo", timeout=LOCAL_TIMEOUT)
    terminal.append(child)
    child.expect(r"starting the local model server on http://127\.0\.0\.1:(\d+)/v1")
    port = int(child.match.group(1))
    child.expect(APPROVE)
    child.sendintr()
    child.expect(re.escape("the tour stops here"))
    assert finished(child) == 130
    import socket

    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # stopped on exit
