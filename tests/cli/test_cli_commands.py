"""Exit statuses, replay of stores and exports, logging, --verbose, --version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import Answers, console, lines

import agentloop
import agentloop.local
from agentloop.cli import main

ROOT = Path(__file__).resolve().parents[2]
MODEL = "python:cli_support:make_model"


def run(argv: list[str], answers: list[str] | None = None) -> tuple[int, list[str]]:
    target, buffer = console()
    status = main(argv, console=target, read_line=Answers(target, answers or []))
    return status, lines(buffer)


def chat(answers: list[str], *extra: str) -> tuple[int, list[str]]:
    return run(["chat", "--model", MODEL, "--tools", "cli_support:TOOLS", *extra], answers)


# -- exit statuses, as docs/cli.md gives them --------------------------------------------------


class MissingServer:
    def __init__(self) -> None:
        raise agentloop.local.LocalServerNotInstalledError(
            "local model server: not installed; run `python -m agentloop.local`"
        )


class BrokenServer:
    base_url = "http://127.0.0.1:9/v1"

    async def __aenter__(self) -> Any:
        raise agentloop.local.LocalServerError("local model server: the process exited")

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def test_status_0_when_the_command_did_its_work() -> None:
    assert run(["demo", "--scripted", "--yes"])[0] == 0
    assert chat(["/quit"])[0] == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["nope"],
        ["demo", "--no-such-option"],
        ["chat", "--max-tokens", "many"],
        ["chat", "--model", MODEL, "--max-tokens", "0"],
        ["chat", "--model", "nowhere:model"],
        ["chat", "--model", "python:no_such_module:x"],
        ["chat", "--model", MODEL, "--tools", "no_such_module:TOOLS"],
        ["replay", "/nonexistent/session.jsonl"],
        ["replay"],
    ],
)
def test_status_2_when_the_command_cannot_start(argv: list[str]) -> None:
    assert run(argv)[0] == 2


NOT_A_MODEL = 42


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "python:agentloop.testing:ScriptedModel",
            "calling it without arguments failed: TypeError: ",
        ),
        (
            "python:test_cli_commands:NOT_A_MODEL",
            "a int is not a ModelAdapter (it has no start_session method)",
        ),
        ("python:json:dumps", "calling it without arguments failed: TypeError: "),
    ],
)
def test_a_python_model_that_is_not_an_adapter_is_refused_in_one_line(
    spec: str, message: str
) -> None:
    status, out = run(["chat", "--model", spec])
    assert status == 2
    assert len(out) == 1
    assert out[0].startswith(f"agentloop chat: --model {spec!r}: {message}")


def test_status_2_without_the_local_model_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agentloop.local, "LocalServer", MissingServer)
    status, out = run(["chat"])
    assert status == 2
    assert out == [
        "agentloop chat: local model server: not installed; run `python -m agentloop.local`"
    ]


def test_status_1_when_the_model_server_fails_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agentloop.local, "LocalServer", BrokenServer)
    status, out = run(["chat"])
    assert status == 1
    assert out[-1] == "agentloop chat: local model server: the process exited"


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"agentloop {agentloop.__version__}\n"
    assert main(["--help"]) == 0
    assert "replay" in capsys.readouterr().out


def test_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    assert agentloop.__version__ == version("agentloop-runtime")


def test_python_dash_m_agentloop_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"agentloop {agentloop.__version__}\n",
        "",
    )


# -- replay: JSONL and session stores, /export -------------------------------------------------


def test_replay_reads_the_store_chat_wrote(tmp_path: Path) -> None:
    store = str(tmp_path / "chat.db")
    assert chat(["add 2 3", "/quit"], "--store", store, "--session", "s1")[0] == 0
    status, out = run(["replay", store])
    assert status == 0
    assert out == [
        f"replaying session 's1' from {store} (5 items)",
        "[system] You are a helpful assistant.",
        "[user] add 2 3",
        '[assistant] -> add({"a": 2, "b": 3}) [call-1]',
        "[tool] <- call-1: 5",
        "[assistant] the sum is 5",
    ]


def test_replay_of_a_store_with_several_sessions_needs_session(tmp_path: Path) -> None:
    store = str(tmp_path / "chat.db")
    chat(["hello", "/quit"], "--store", store, "--session", "a")
    chat(["again", "/quit"], "--store", store, "--session", "b")
    assert run(["replay", store]) == (
        2,
        [f"agentloop replay: '{store}' holds 2 sessions ('a', 'b'); choose one with --session ID"],
    )
    assert run(["replay", store, "--session", "nope"]) == (
        2,
        [f"agentloop replay: no session 'nope' in '{store}'; its sessions: 'a', 'b'"],
    )
    status, out = run(["replay", store, "--session", "b"])
    assert status == 0
    assert out[0] == f"replaying session 'b' from {store} (3 items)"
    assert out[-1] == "[assistant] you said 'again' (message 1)"


def test_session_is_refused_for_a_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    chat([f"/export {path}", "/quit"])
    assert run(["replay", str(path), "--session", "x"]) == (
        2,
        [
            f"agentloop replay: --session 'x' is for a session store; '{path}' is not one "
            "(a JSONL transcript holds one session)"
        ],
    )


def test_export_writes_what_replay_reads(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    status, out = chat(["add 1 2", f"/export {path}", "/quit"])
    assert status == 0
    assert f"wrote 5 items to {path}; agentloop replay {path} shows them" in out
    status, replayed = run(["replay", str(path)])
    assert status == 0
    assert replayed[1:] == [
        "[system] You are a helpful assistant.",
        "[user] add 1 2",
        '[assistant] -> add({"a": 1, "b": 2}) [call-1]',
        "[tool] <- call-1: 3",
        "[assistant] the sum is 3",
    ]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("/export", "usage: /export FILE.jsonl"),
        ("/export /nonexistent/dir/x.jsonl", "cannot export to '/nonexistent/dir/x.jsonl': "),
    ],
)
def test_export_errors_are_one_line(command: str, message: str) -> None:
    status, out = chat([command, "/quit"])
    assert status == 0
    (error,) = [line for line in out if line.startswith(("usage:", "cannot export"))]
    assert error.startswith(message)


# -- logs and --verbose ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_is_accepted_before_or_after_the_command(
    where: str, capfd: pytest.CaptureFixture[str]
) -> None:
    argv = ["chat", "--model", MODEL, "--tools", "cli_support:TOOLS", "--yes"]
    argv = ["--verbose", *argv] if where == "before" else [*argv, "--verbose"]
    assert run(argv, ["boom", "/quit"])[0] == 0
    captured = capfd.readouterr()
    assert captured.out == ""  # library logs never go to stdout
    assert "tool raised" in captured.err
    assert "ValueError: the boom tool always fails" in captured.err


def test_library_logs_are_quiet_by_default(capfd: pytest.CaptureFixture[str]) -> None:
    status, out = chat(["boom", "/quit"], "--yes")
    assert status == 0
    assert "<- call-1 (error): tool 'boom' failed: ValueError: the boom tool always fails" in out
    assert capfd.readouterr() == ("", "")
