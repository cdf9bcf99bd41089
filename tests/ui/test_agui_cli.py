"""``agentloop serve --agui`` as a real process, driven by the official AG-UI client
(node): the command prints the endpoint, a run parks on an approval that the inbox
lists, and the client's resume runs the call."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def test_serve_with_agui_answers_the_official_client(tmp_path: Path) -> None:
    database = tmp_path / "sessions.db"
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"}
    environment.pop("AGENTLOOP_SERVE_TOKEN", None)
    command = [sys.executable, "-m", "agentloop.cli", "serve", "--store", f"sqlite:///{database}"]
    command += ["--port", "0", "--agent", "python:agui_support:build_agent", "--agui"]
    process = subprocess.Popen(
        command,
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
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("AG-UI endpoint") for line in seen):
            assert time.monotonic() < deadline, f"no AG-UI line within 60 s: {seen}"
            try:
                seen.append(lines.get(timeout=1).strip())
            except queue.Empty:
                assert process.poll() is None, f"the server exited: {seen}"
        opened = next(
            re.match(r"open (http://\S+)/\?token=(\S+)$", s) for s in seen if s.startswith("open ")
        )
        assert opened is not None
        base, token = opened.group(1), opened.group(2)
        assert seen[-1] == f"AG-UI endpoint: POST {base}/agui (Authorization: Bearer TOKEN)"
        node = shutil.which("node")
        assert node is not None, "node is not installed (apt-get install -y nodejs npm)"
        done = subprocess.run(
            [node, "agui_client.mjs", f"{base}/agui", token, "approve"],
            cwd=HERE / "node",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["interrupts"] == [
            {"id": "approval:call-1", "reason": "tool_call", "toolCallId": "call-1"}
        ]
        assert result["messages"][-1]["content"] == "Result: deployed api"
        with httpx.Client(base_url=base, timeout=10) as client:
            inbox = client.get("/", headers={"authorization": f"Bearer {token}"})
            audit = client.get("/audit", headers={"authorization": f"Bearer {token}"})
        assert "Nothing waits for an approval." in inbox.text
        assert "thread-approve" in audit.text  # the AG-UI decision is in the inbox's audit log
    finally:
        process.terminate()
        process.wait(20)
