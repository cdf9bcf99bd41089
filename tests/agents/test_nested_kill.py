"""A tree of nested agents SIGKILLed at store writes resumes without a side effect twice.

The runner (``nested_kill_runner.py``, a real process on SQLite) drives a fixed tree:
depth 3, parallel children, a grandchild whose approval waits while a call of its round
runs, a child asking twice in a row. It kills itself at store write k (at once, or once
every other task ran as far as it could). This process then resumes the session from
the database and finishes it. Every side effect ran at most once, a denied call never,
every transcript of the tree is valid with every call answered once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest
from nested_crash_kit import World, check_tree, run_process, shape
from nested_kill_runner import TREE, TREE_SESSION, approve, recorder

import agentloop as al
import agentloop.tasks
from agentloop.store import SqliteSessionStore

pytestmark = pytest.mark.anyio

RUNNER = Path(__file__).resolve().parent / "nested_kill_runner.py"


async def run_killed(database: Path, side_effects: Path, backend: str, kill_at: int) -> int:
    command = [sys.executable, str(RUNNER), str(database), str(side_effects), backend, str(kill_at)]
    with anyio.fail_after(60):
        result = await anyio.run_process(command, check=False, stderr=subprocess.STDOUT)
    return result.returncode


async def finish(database: Path, side_effects: Path) -> tuple[tuple[al.Item, ...], World]:
    world = World(approve)
    world.on_run = recorder(side_effects, world)
    async with SqliteSessionStore(database) as store, agentloop.tasks.AsyncTaskManager() as manager:
        transcript = await run_process(TREE, world, store, TREE_SESSION, manager)
    return transcript, world


def ran_before(side_effects: Path) -> tuple[Counter[str], dict[str, str]]:
    lines = side_effects.read_text(encoding="utf-8").split("\n") if side_effects.exists() else []
    pairs = [line.partition(" ") for line in lines if line]
    return Counter(call_id for call_id, _, _ in pairs), {
        call_id: name for call_id, _, name in pairs
    }


@pytest.mark.parametrize("kill_at", [2, 6, 7, 9, 15, 17])
async def test_a_tree_killed_at_a_store_write_resumes_without_a_side_effect_twice(
    tmp_path: Path, anyio_backend: str, kill_at: int
) -> None:
    clean_db, clean_effects = tmp_path / "clean.db", tmp_path / "clean.txt"
    expected, _ = await finish(clean_db, clean_effects)
    database, side_effects = tmp_path / "tree.db", tmp_path / "effects.txt"
    assert await run_killed(database, side_effects, anyio_backend, kill_at) == -signal.SIGKILL
    before, names = ran_before(side_effects)
    found, world = await finish(database, side_effects)
    where = f"killed at write {kill_at}, ran before: {dict(before)}"
    world.runs.update(before)  # the killed process's side effects count too
    world.names.update(names)
    world.decided.update({call_id: approve(call_id) for call_id in names})
    check_tree(found, world, where)
    assert shape(found) == shape(expected), where
