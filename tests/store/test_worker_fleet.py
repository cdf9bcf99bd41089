"""Store-only fleet: worker processes lease ready sessions; one is SIGKILLed inside its tool.

No LoopDriver here (``examples/workers.py``, run by ``test_workers_example.py``,
is the same fleet with real drivers): each worker does by hand what a driver
does (acquire_ready, load, claim, run the side effect, save with version and
token, release). Every session
finishes, every side effect ran at most once, and the killed worker's call is
answered in doubt by the worker that took its session over after the lease
expired.
"""

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import anyio
import pytest

import agentloop as al
import agentloop.store
from agentloop.store import (
    PostgresSessionStore,
    RedisSessionStore,
    SessionStore,
    SqliteSessionStore,
)

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).resolve().parent / "fleet_worker.py"
SESSIONS = [f"job-{n}" for n in range(6)]


def ready_document(session_id: str) -> dict[str, object]:
    call = al.Item(
        al.ItemKind.ASSISTANT,
        [al.ToolCallPart(f"call-{session_id}", "effect", {"session": session_id})],
        finish_reason=al.FinishReason.TOOL_CALL,
    )
    return {
        "format": al.store.CHECKPOINT_FORMAT,
        "version": 1,
        "session_id": session_id,
        "state": "AFTER_TOOL_RESULT",
        "transcript": [al.unstructure(al.Item.text(al.ItemKind.USER, "go")), al.unstructure(call)],
    }


def _start(target: str, owner: str, effects: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), target, owner, str(effects), *SESSIONS, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


async def _run_fleet(store: SessionStore, target: str, effects: Path) -> None:
    for session_id in SESSIONS:
        await store.save_checkpoint(session_id, ready_document(session_id), expected_version=0)
    doomed = _start(target, "worker-doomed", effects, "--die-in-tool")
    workers: list[subprocess.Popen[str]] = []
    try:
        with anyio.fail_after(60):
            while not (effects / "entered").exists():
                assert doomed.poll() is None, doomed.communicate()
                await anyio.sleep(0.02)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        workers = [_start(target, f"worker-{n}", effects) for n in range(3)]
        for worker in workers:
            code = await anyio.to_thread.run_sync(partial(worker.wait, 90))
            assert code == 0, worker.communicate()
    finally:
        for process in [doomed, *workers]:
            if process.poll() is None:
                process.kill()
                process.wait()
    killed_call = (effects / "entered").read_text()
    for session_id in SESSIONS:
        call_id = f"call-{session_id}"
        runs = (effects / call_id).read_text().splitlines()
        assert len(runs) == 1, (call_id, runs)  # at most once (and here exactly once)
        loaded = await store.load(session_id)
        assert loaded is not None
        assert loaded.status is al.store.SessionStatus.AWAITING_INPUT
        assert loaded.started_calls == frozenset()
        last = loaded.checkpoint["transcript"][-1]["parts"][0]
        assert last["call_id"] == call_id
        if call_id == killed_call:
            assert runs[0].startswith("worker-doomed ")
            assert last["output"] == "in doubt: the call was claimed by a worker that stopped"
        else:
            assert last["output"] == f"done by {runs[0].split()[0]}"


async def test_a_postgres_fleet_survives_a_killed_worker(postgres_uri: str, tmp_path: Path) -> None:
    async with PostgresSessionStore(postgres_uri) as store:
        await _run_fleet(store, postgres_uri, tmp_path)


async def test_a_sqlite_fleet_survives_a_killed_worker(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    effects = tmp_path / "effects"
    effects.mkdir()
    async with SqliteSessionStore(path) as store:
        await _run_fleet(store, str(path), effects)


async def test_a_redis_fleet_survives_a_killed_worker(
    redis_server: str, redis_prefix: str, tmp_path: Path
) -> None:
    async with RedisSessionStore(redis_server, prefix=redis_prefix) as store:
        await _run_fleet(store, f"{redis_server}#{redis_prefix}", tmp_path)
