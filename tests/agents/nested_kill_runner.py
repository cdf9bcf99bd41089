"""A tree of nested agents the SIGKILL test (``test_nested_kill.py``) kills at a store write.

Usage: python nested_kill_runner.py DATABASE SIDE_EFFECTS BACKEND KILL_AT. Starts (or
resumes) the session ``TREE_SESSION`` in the SQLite DATABASE and drives it, answering
approvals as ``approve`` decides; every side effect appends ``<call id> <tool>`` to
SIDE_EFFECTS before it returns. At store write KILL_AT the process SIGKILLs itself:
at once for an even KILL_AT; for an odd one, once every other task ran as far as it
could (the write "hangs" first).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
from nested_crash_kit import Node, World, run_process

import agentloop.tasks
from agentloop.store import SqliteSessionStore

TREE_SESSION = "killed-tree"
WRITES = frozenset({"save_checkpoint", "record_call_started", "claim", "record_approval"})

# top: pay, a child (asked + a grandchild whose round runs pay beside an approval), read;
# then a second round with a child asking twice in a row.
GRANDCHILD = Node(((("pay", None), ("asked", None)), (("asked", None),)))
CHILD = Node(((("asked", None), ("child", GRANDCHILD)),))
SECOND = Node(((("asked", None),), (("asked", None), ("pay", None))))
TREE = Node(
    (
        (("pay", None), ("child", CHILD), ("read", None)),
        (("child", SECOND),),
    )
)


def approve(call_id: str) -> bool:
    """The host denies one call: the second child's second ``asked``."""
    return call_id != "top-1-0-1-0"


def recorder(side_effects: Path, world: World) -> Any:
    def record(call_id: str) -> None:
        with side_effects.open("a", encoding="utf-8") as file:
            file.write(f"{call_id} {world.names[call_id]}\n")

    return record


class KillingStore:
    """Forwards to ``inner``; SIGKILLs the process at write ``kill_at`` (see above)."""

    def __init__(self, inner: Any, kill_at: int | None) -> None:
        self._inner, self._kill_at, self.writes = inner, kill_at, 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target) or name not in WRITES:
            return target

        async def forward(*args: Any, **kwargs: Any) -> Any:
            if self.writes == self._kill_at:
                if self._kill_at % 2:
                    await anyio.wait_all_tasks_blocked()
                os.kill(os.getpid(), signal.SIGKILL)
            self.writes += 1
            return await target(*args, **kwargs)

        return forward


async def main(database: str, side_effects: str, kill_at: int) -> None:
    world = World(approve)
    world.on_run = recorder(Path(side_effects), world)
    async with SqliteSessionStore(database) as inner, agentloop.tasks.AsyncTaskManager() as manager:
        store = KillingStore(inner, kill_at)
        await run_process(TREE, world, store, TREE_SESSION, manager)
        print(f"complete after {store.writes} writes", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[4]), backend=sys.argv[3])
