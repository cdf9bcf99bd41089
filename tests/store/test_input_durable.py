"""Input the host submitted is durable before the model is called (issue 13).

A real process submits input and is SIGKILLed while the model call hangs;
resuming the session from the store finds the input and answers it.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agentloop as al
import agentloop.testing
from agentloop.store import PostgresSessionStore, SessionStore, SqliteSessionStore

pytestmark = pytest.mark.anyio

RUNNER = Path(__file__).resolve().parent / "input_kill_runner.py"


def kill_during_the_model_call(target: str, marker: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, str(RUNNER), target, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(RUNNER.parents[2])},
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the model was never called"
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert marker.read_text() == "keep this message"  # the model saw it, then we died


async def resume_and_answer(store: SessionStore) -> None:
    stored = await store.load("durable-input")
    assert stored is not None
    assert stored.checkpoint["state"] == "IDLE"
    assert stored.status is al.store.SessionStatus.READY  # a worker would pick it up
    agent = al.Agent.builder().model(al.testing.ScriptedModel(["got it"])).store(store).build()
    driver = await agent.resume(session_id="durable-input")
    assert driver.snapshot().pending_input == (al.Item.text(al.ItemKind.USER, "keep this message"),)
    assert isinstance(await driver.next(), al.Finished)
    assert [item.text_content for item in driver.snapshot().transcript] == [
        "keep this message",
        "got it",
    ]


async def test_input_survives_a_kill_during_the_model_call_sqlite(tmp_path: Path) -> None:
    database = tmp_path / "sessions.db"
    kill_during_the_model_call(str(database), tmp_path / "called")
    async with SqliteSessionStore(database) as store:
        await resume_and_answer(store)


async def test_input_survives_a_kill_during_the_model_call_postgres(
    postgres_uri: str, tmp_path: Path
) -> None:
    kill_during_the_model_call(postgres_uri, tmp_path / "called")
    async with PostgresSessionStore(postgres_uri) as store:
        await resume_and_answer(store)
