"""A writer killed with SIGKILL at a random moment leaves its last complete save loadable."""

import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
from store_support import KILLED_SESSION, counted_document, started_calls_between

from agentloop.store import SqliteSessionStore, StoredSession

WRITER = Path(__file__).resolve().parent / "store_kill_writer.py"


async def _load(path: Path) -> StoredSession | None:
    async with SqliteSessionStore(path) as store:
        return await store.load(KILLED_SESSION)


def _run_and_kill(path: Path, delay: float) -> list[int]:
    """Start the writer, let it save for ``delay`` seconds after its first save, SIGKILL it."""
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, child.kill)  # never hang the suite if the writer stalls
    watchdog.start()
    try:
        assert child.stdout is not None
        first = child.stdout.readline()  # the writer has completed one save
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        output = first + child.stdout.read()
        child.wait()
        stderr = child.stderr.read() if child.stderr is not None else ""
    finally:
        watchdog.cancel()
        child.kill()
    assert child.returncode == -signal.SIGKILL, stderr
    return [int(line) for line in output.split()]


def test_killed_writer_leaves_the_last_complete_save_loadable(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    previous, recorded = 0, frozenset[str]()
    for round_number in range(2):
        printed = _run_and_kill(path, rng.uniform(0.0, 0.3))
        context = f"seed {seed}, round {round_number}, printed {printed[:3]}..{printed[-3:]}"
        assert printed == list(range(previous + 1, printed[-1] + 1)), context
        loaded = anyio.run(_load, path)
        assert loaded is not None, context
        counter = loaded.checkpoint["counter"]
        # Every printed save returned, so it is durable; the kill may follow one more commit.
        assert counter in (printed[-1], printed[-1] + 1), context
        assert loaded.checkpoint == counted_document(counter), context
        # Each run records a call after each save; the kill may land between the two.
        assert loaded.started_calls >= recorded, context
        assert loaded.started_calls - recorded in (
            started_calls_between(previous + 1, counter - 1),
            started_calls_between(previous + 1, counter),
        ), context
        previous, recorded = counter, loaded.started_calls
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
