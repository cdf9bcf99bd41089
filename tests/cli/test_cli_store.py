"""One ``--store`` argument in every command (a path or a URL), bad ones refused at once;
a missing extra is one line naming the install command; ``python:MODULE:ATTR`` from the
current directory."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Answers, console, lines
from rich.console import Console

from agentloop.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("agentloop")
EXPECTED = "a file path (sessions.db), sqlite:///PATH.db or postgresql://USER@HOST/DB"
MODEL = "python:cli_support:make_model"


@pytest.fixture(autouse=True)
def _sys_path_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() puts the current directory on sys.path (a python:MODULE spec): undo it."""
    monkeypatch.setattr(sys, "path", list(sys.path))


def run(argv: list[str], answers: list[str] | None = None) -> tuple[int, list[str]]:
    buffer = io.StringIO()
    target = Console(file=buffer, force_terminal=False, width=300, highlight=False)
    status = main(argv, console=target, read_line=Answers(target, answers or []))
    return status, lines(buffer)


def test_chat_store_takes_a_url_or_a_path_for_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, first = run(["chat", "--model", MODEL, "--store", "sqlite:///chat.db"], ["hello"])
    assert status == 0
    assert first[0] == "new session 'chat' in sqlite:///chat.db"
    status, second = run(["chat", "--model", MODEL, "--store", "chat.db"], ["again"])
    assert status == 0
    assert second[0] == "resumed session 'chat': 3 items"
    status, third = run(["chat", "--model", MODEL, "--store", f"sqlite:///{tmp_path}/chat.db"])
    assert status == 0
    assert third[0] == "resumed session 'chat': 5 items"
    assert sorted(name for name in os.listdir(tmp_path) if not name.startswith("chat.db-")) == [
        "chat.db"
    ]


def test_replay_takes_the_same_store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["chat", "--model", MODEL, "--store", "chat.db"], ["hello"])[0] == 0
    by_path = run(["replay", "chat.db"])
    by_url = run(["replay", "sqlite:///chat.db"])
    assert by_path[0] == by_url[0] == 0
    assert by_url[1][1:] == by_path[1][1:]  # the same transcript; the first line names the source
    assert by_url[1][0] == "replaying session 'chat' from sqlite:///chat.db (3 items)"
    assert run(["replay", "sqlite:///nothing.db"]) == (
        2,
        ["agentloop replay: no file 'nothing.db' (from 'sqlite:///nothing.db')"],
    )
    assert not (tmp_path / "nothing.db").exists()


BAD_STORES = [
    (
        "missing/s.db",
        "--store 'missing/s.db': the directory 'missing' does not exist; create it first "
        "(mkdir -p 'missing') or choose another path",
    ),
    (
        "sqlite://s.db",
        "--store 'sqlite://s.db': expected sqlite:///PATH.db (three slashes, relative to the "
        "current directory) or sqlite:////ABSOLUTE/PATH.db",
    ),
    ("mysql://db/x", f"--store 'mysql://db/x': unknown scheme 'mysql'; expected {EXPECTED}"),
    ("sub", "--store 'sub': 'sub' is a directory; name a file in it, e.g. 'sub/sessions.db'"),
    ("", f"--store: the store is an empty string; expected {EXPECTED}"),
]


@pytest.mark.parametrize(("value", "message"), BAD_STORES)
@pytest.mark.parametrize(
    "command",
    [
        ["chat", "--model", "python:no_such_module_99:model"],  # refused before the model loads
        ["serve"],
    ],
)
def test_a_bad_store_is_refused_at_once_in_one_line(
    command: list[str], value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    status, out = run([*command, "--store", value])
    assert (status, out) == (2, [f"agentloop {command[0]}: {message}"])
    assert sorted(os.listdir(tmp_path)) == ["sub"]


def test_demo_store_takes_a_url_and_refuses_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, out = run(["demo", "--scripted", "--yes", "--store", "sqlite:///new/demo.db"])
    assert status == 0
    assert f"session 'demo-scripted' saved in {Path('new/demo.db')}" in out
    assert (tmp_path / "new" / "demo.db").is_file()
    assert run(["demo", "--scripted", "--store", "postgresql://me@db/x"]) == (
        2,
        [
            "agentloop demo: --store 'postgresql://me@db/x': agentloop demo saves to a SQLite "
            "file; expected PATH.db or sqlite:///PATH.db"
        ],
    )


POSTGRES_MISSING = (
    "agentloop {command} needs the postgres extra (psycopg is not installed): "
    "pip install 'agentloop-runtime[postgres]' (in a clone: pip install '.[postgres]')"
)


@pytest.mark.parametrize(
    "command", [["serve"], ["chat", "--model", MODEL], ["replay"]], ids=["serve", "chat", "replay"]
)
def test_a_postgres_store_without_psycopg_is_one_line(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import raises ModuleNotFoundError
    url = "postgresql://me@127.0.0.1:1/sessions"
    argv = [*command, url] if command == ["replay"] else [*command, "--store", url]
    assert run(argv) == (2, [POSTGRES_MISSING.format(command=command[0])])


def test_a_missing_extra_is_one_line_in_a_user_install_too() -> None:
    """Without psycopg installed at all (a subprocess that cannot import it): one line."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from agentloop.cli import main\n"
        "raise SystemExit(main(['serve', '--store', 'postgresql://me@127.0.0.1:1/db']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (2, "")
    assert done.stdout.splitlines() == [POSTGRES_MISSING.format(command="serve")]


MYBOT = """
import agentloop as al


import agentloop.testing
def make_model():
    return al.testing.ScriptedModel(["hi from mybot"])
"""


def test_python_module_resolves_from_the_current_directory_with_the_console_script(
    tmp_path: Path,
) -> None:
    (tmp_path / "mybot.py").write_text(MYBOT)
    assert SCRIPT.is_file(), SCRIPT
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(SCRIPT), "chat", "--model", "python:mybot:make_model", "--yes"],
        input="hello\n",
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "you> hi from mybot",  # the prompt, then the answer (stdin is not a terminal)
        "== turn completed (usage not reported)",
        "you> bye",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "python:mybot",
            "--model 'python:mybot': expected python:MODULE:ATTR (e.g. python:mybot:model); "
            "the ':ATTR' is missing",
        ),
        (
            "python::model",
            "--model 'python::model': expected python:MODULE:ATTR (e.g. python:mybot:model); "
            "MODULE is empty",
        ),
        (
            "python:mybot:",
            "--model 'python:mybot:': expected python:MODULE:ATTR (e.g. python:mybot:model); "
            "ATTR is empty",
        ),
        (
            "python:my-bot:model",
            "--model 'python:my-bot:model': 'my-bot' is not a module name (a file my_bot.py is "
            "the module my_bot; a package directory's module is pkg.module)",
        ),
        (
            "python:mybot:make model",
            "--model 'python:mybot:make model': 'make model' is not an attribute name (a Python "
            "name, or names joined by dots)",
        ),
        (
            "python:nobot_77:model",
            "--model 'python:nobot_77:model': no module named 'nobot_77'; MODULE is imported as "
            "`python -m` would: from the current directory (TMP), then sys.path; run agentloop "
            "from the directory that holds nobot_77.py (or the package nobot_77/), or add that "
            "directory to PYTHONPATH",
        ),
        (
            "python:brokenbot:model",
            "--model 'python:brokenbot:model': importing 'brokenbot' failed: No module named "
            "'not_installed_anywhere'",
        ),
        (
            "python:raisingbot:model",
            "--model 'python:raisingbot:model': importing 'raisingbot' raised RuntimeError: no key",
        ),
        (
            "python:mybot:nothing",
            "--model 'python:mybot:nothing': 'mybot' (TMP/mybot.py) has no attribute 'nothing'",
        ),
    ],
)
def test_bad_python_specs_say_what_is_wrong(
    spec: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mybot.py").write_text(MYBOT)
    (tmp_path / "brokenbot.py").write_text("import not_installed_anywhere\n")
    (tmp_path / "raisingbot.py").write_text("raise RuntimeError('no key')\n")
    monkeypatch.chdir(tmp_path)
    for name in ("mybot", "brokenbot", "raisingbot"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    target, buffer = console()
    assert main(["chat", "--model", spec], console=target, read_line=Answers(target, [])) == 2
    assert lines(buffer) == [f"agentloop chat: {message.replace('TMP', str(tmp_path))}"]


def test_serve_agent_module_resolves_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "myinbox.py").write_text("AGENTS = {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    monkeypatch.delitem(sys.modules, "myinbox", raising=False)
    status, out = run(["serve", "--store", "s.db", "--agent", "python:myinbox:build"])
    assert (status, out) == (
        2,
        [
            "agentloop serve: --agent 'python:myinbox:build': module 'myinbox' has no attribute "
            "'build'"  # found in the current directory, imported, then ATTR looked up
        ],
    )
    assert str(tmp_path) == sys.path[0]
