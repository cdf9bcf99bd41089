"""``agentloop serve``: the subcommand's errors, and a real server process end to end."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from serve_support import load, park, transcript_text

from agentloop.cli import main
from agentloop.store import input_digest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def run_cli(arguments: list[str]) -> tuple[int, str]:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    status = main(arguments, console=Console(file=buffer, width=200, highlight=False))
    return status, buffer.getvalue()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--store", "mysql://x"],
            "agentloop serve: --store 'mysql://x': unknown scheme 'mysql'; expected a file "
            "path (sessions.db), sqlite:///PATH.db or postgresql://USER@HOST/DB",
        ),
        (
            ["--store", "sqlite:///x.db", "--agent", "serve_support"],
            "agentloop serve: --agent 'serve_support': expected python:MODULE:ATTR",
        ),
        (
            ["--store", "sqlite:///x.db", "--agent", "python:no_such_module_17:build"],
            "agentloop serve: --agent 'python:no_such_module_17:build': "
            "No module named 'no_such_module_17'; MODULE is imported as `python -m` would: "
            "from the current directory (TMP), then sys.path; run agentloop from the "
            "directory that holds no_such_module_17.py (or the package no_such_module_17/), "
            "or add that directory to PYTHONPATH",
        ),
        (
            ["--store", "sqlite:///x.db", "--token", "short"],
            "agentloop serve: --token must be at least 16 characters",
        ),
        (
            ["--store", "sqlite:///x.db", "--approval-ttl", "0"],
            "agentloop serve: --approval-ttl must be > 0 seconds, got 0.0",
        ),
        (
            ["--store", "sqlite:///x.db", "--allowed-host", "a b"],
            "agentloop serve: --allowed-host: allowed_hosts: expected names like "
            "'inbox.example.com' or 'inbox.example.com:8443', got 'a b'",
        ),
    ],
)
def test_bad_arguments_are_refused(
    arguments: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, output = run_cli(["serve", *arguments])
    assert status == 2  # bad arguments (docs/cli.md)
    assert output.strip() == message.replace("TMP", str(tmp_path))
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("module", ["starlette", "uvicorn", "sse_starlette", "jinja2"])
def test_without_the_serve_extra_the_command_names_it(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
    status, output = run_cli(["serve", "--store", "sqlite:///never.db"])
    assert status == 2
    assert output.strip() == (
        f"agentloop serve needs the serve extra ({module} is missing): "
        "pip install 'agentloop-runtime[serve]' (in a clone: pip install '.[serve]')"
    )


def test_a_server_process_records_a_decision_and_resumes_the_session(tmp_path: Path) -> None:
    database = tmp_path / "sessions.db"
    park(database, "s1")
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"}
    environment.pop("AGENTLOOP_SERVE_TOKEN", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentloop.cli",
            "serve",
            "--store",
            f"sqlite:///{database}",
            "--port",
            "0",
            "--agent",
            "python:serve_support:build_agent",
            "--identity",
            "carol",
            "--allowed-host",
            "inbox.test",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True
    ).start()
    try:
        url = None
        seen = []
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert process.poll() is None, f"the server exited: {seen}"
                continue
            seen.append(line)
            found = re.match(
                r"open (http://127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_\-]{43})$", line.strip()
            )
            if found:
                url = found
        assert url is not None, f"no URL printed within 60 s: {seen}"
        assert seen[0].strip() == f"agentloop inbox on sqlite:///{database}"
        base, token = url.group(1), url.group(2)
        port = base.rsplit(":", 1)[1]
        with httpx.Client(base_url=base, timeout=10) as client:
            assert client.get("/").status_code == 401
            bearer = {"authorization": f"Bearer {token}"}
            foreign = client.get("/", headers={**bearer, "host": "evil.example"})
            assert foreign.status_code == 421
            assert "not for Host 'evil.example'" in foreign.text
            assert client.get("/", headers={**bearer, "host": "inbox.test"}).status_code == 200
            assert client.get(f"/?token={token}").status_code == 303
            assert list(client.cookies) == [f"agentloop_session_{port}"]
            assert token not in str(client.cookies.get(f"agentloop_session_{port}"))
            page = client.get("/")
            assert page.status_code == 200
            assert "signed in as carol" in page.text
            csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
            assert csrf is not None
            digest = input_digest("publish_report", {"path": "/reports/q3.txt"})
            response = client.post(
                "/api/decide",
                json={
                    "session_id": "s1",
                    "call_id": "call-1",
                    "digest": digest,
                    "action": "approve",
                },
                headers={"x-csrf-token": csrf.group(1)},
            )
            assert response.json()["message"] == "Approved by carol; a worker resumes the session."
        deadline = time.monotonic() + 30
        while load(database, "s1").status.value != "awaiting_input":
            assert time.monotonic() < deadline, "the session was not resumed within 30 s"
            time.sleep(0.1)
        assert transcript_text(database, "s1")[-1] == "Done: published /reports/q3.txt"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            status = process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise
    # Ctrl-C: uvicorn shuts down gracefully, then the CLI reports the interrupt (as chat does).
    assert status == 130
    rest = "".join(iter_queue(lines))
    assert "Traceback" not in rest
    assert rest.strip().endswith("interrupted")


def iter_queue(lines: queue.Queue[str]) -> list[str]:
    out = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            out.append(lines.get(timeout=0.5))
        except queue.Empty:
            break
    return out
