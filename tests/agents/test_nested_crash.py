"""The fault model over trees of nested agents: a process killed between any two store
writes never runs a claimed call twice.

Hypothesis draws trees (``nested_crash_kit``: depth up to 3, parallel children,
approvals anywhere, a grandchild's included). Each tree runs once uninterrupted,
counting the top session's store writes; then, for every write k, it runs again and
the process dies at write k, one of two ways:

- ``raise``: the write raises (a ``BaseException``) and so does every later store
  call: the process stops where it stands;
- ``hang``: the write never returns; every other task runs on until all are blocked
  (a child agent runs its approved calls, say), then the process is cancelled and
  every later store call raises. The worst moment for a process to die.

A new process resumes the session from the store (answering approvals as the host
decided before) and finishes it. Then: every transcript in the tree is valid with
every call answered once, no side effect ran twice, a denied call never ran, a
result that is not "in doubt" is the run's own, only the top's claimed calls are
in doubt, and the top's transcript has the uninterrupted run's shape. On the memory
store and SQLite, on both anyio backends.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nested_crash_kit import Node, World, check_tree, nodes, run_process, shape

import agentloop as al
import agentloop.tasks
from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore

pytestmark = pytest.mark.anyio

WRITES = frozenset(
    {"save_checkpoint", "record_call_started", "claim", "record_approval", "record_answer"}
)
SESSIONS = itertools.count()


class Killed(BaseException):
    """The process died (a ``BaseException``: nothing in the library may swallow it)."""


@attrs.define
class Death:
    """Where the process dies: at write ``at`` (``None``: never), ``how`` it dies."""

    at: int | None
    how: str = "raise"
    writes: int = 0
    hung: anyio.Event | None = None


class DyingStore:
    """A store of a process that dies at write ``death.at``: see the module docstring."""

    def __init__(self, inner: SessionStore, death: Death) -> None:
        self._inner = inner
        self._death = death
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        async def forward(*args: Any, **kwargs: Any) -> Any:
            death = self._death
            if not self.dead and name in WRITES:
                if death.writes == death.at:
                    self.dead, death.at = True, None
                    if death.how == "hang":
                        assert death.hung is not None
                        death.hung.set()
                        await anyio.sleep_forever()
                else:
                    death.writes += 1
            if self.dead:
                raise Killed(name)
            return await target(*args, **kwargs)

        return forward


async def one_process(
    node: Node, world: World, store: DyingStore, session_id: str, children_stored: bool
) -> Any:
    """Run one process; its top transcript, or ``None`` when it died."""
    death = store._death
    death.hung = anyio.Event()
    transcript: Any = None
    try:
        async with al.tasks.AsyncTaskManager() as manager, anyio.create_task_group() as group:

            async def drive() -> None:
                nonlocal transcript
                transcript = await run_process(
                    node, world, store, session_id, manager, children_stored=children_stored
                )
                group.cancel_scope.cancel()

            async def kill_when_hung() -> None:
                assert death.hung is not None
                await death.hung.wait()
                await anyio.wait_all_tasks_blocked()  # everything else ran as far as it could
                group.cancel_scope.cancel()

            group.start_soon(drive)
            group.start_soon(kill_when_hung)
    except BaseException as error:
        if not store.dead or not _only_killed(error):
            raise
    return transcript


def _only_killed(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return all(_only_killed(inner) for inner in error.exceptions)
    return isinstance(error, Killed) or isinstance(error.__context__, Killed)


async def run_to_end(
    inner: SessionStore,
    node: Node,
    world: World,
    session_id: str,
    death: Death,
    children_stored: bool,
) -> tuple[al.Item, ...]:
    for _ in range(10):
        store = DyingStore(inner, death)
        transcript = await one_process(node, world, store, session_id, children_stored)
        if transcript is not None:
            return tuple(transcript)
    raise AssertionError(f"session {session_id} did not end after 10 processes")


@pytest.fixture(params=["memory", "sqlite"])
async def inner_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield MemorySessionStore()
        return
    async with SqliteSessionStore(tmp_path / "tree.db") as store:
        yield store


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=nodes(),
    denials=st.frozensets(st.integers(0, 7)),
    hangs=st.integers(0, 2**16 - 1),
    children_stored=st.booleans(),
)
async def test_a_tree_killed_at_any_write_runs_no_claimed_call_twice(
    inner_store: SessionStore,
    tree: Node,
    denials: frozenset[int],
    hangs: int,
    children_stored: bool,
) -> None:
    def approve(call_id: str) -> bool:
        return sum(map(ord, call_id)) % 8 not in denials

    base = f"tree-{next(SESSIONS)}"
    clean_death = Death(None)
    clean_world = World(approve)
    expected = await run_to_end(
        inner_store, tree, clean_world, f"{base}-clean", clean_death, children_stored
    )
    check_tree(expected, clean_world, "uninterrupted")
    for at in range(clean_death.writes):
        how = "hang" if hangs >> (at % 16) & 1 else "raise"
        where = f"{tree!r} (children stored: {children_stored}): died ({how}) at write {at}"
        world = World(approve)
        session_id, death = f"{base}-{at}-{how}", Death(at, how)
        found = await run_to_end(inner_store, tree, world, session_id, death, children_stored)
        check_tree(found, world, where)
        assert shape(found) == shape(expected), where
