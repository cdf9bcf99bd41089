"""What keeping a step history costs a save (issue 41), per store, as a ratio.

Run with ``python benchmarks/history_save.py [--saves N] [--rounds R]``. For
``MemorySessionStore`` and ``SqliteSessionStore`` (a file in a fresh temporary
folder), one session is saved ``N`` times (default 1,000), each save appending
one ~240-byte item, as a driver's saves grow a transcript; once with the
default ``history_limit`` (100) and once with ``history_limit=0`` (no
history), interleaved ``R`` times (default 3) so a loaded machine slows both
alike. Printed: the best time of each and their ratio (history / none).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore


def _items(count: int) -> list[Any]:
    return [
        al.unstructure(al.Item.text(al.ItemKind.USER, f"message {n} " + "x" * 200))
        for n in range(count)
    ]


async def _saves(store: SessionStore, session_id: str, items: list[Any]) -> float:
    transcript: list[Any] = []
    started = time.perf_counter()
    for item in items:
        transcript = [*transcript, item]
        document = {
            "format": "agentloop.checkpoint",
            "version": 1,
            "session_id": session_id,
            "transcript": transcript,
        }
        await store.save_checkpoint(session_id, document)
    return time.perf_counter() - started


async def _measure(saves: int, rounds: int) -> None:
    items = _items(saves)
    with tempfile.TemporaryDirectory(prefix="history-bench-") as folder:
        for kind in ("memory", "sqlite"):
            best: dict[int, float] = {}
            for round_number in range(rounds):
                for limit in (100, 0):
                    session_id = f"s-{round_number}-{limit}"
                    if kind == "memory":
                        taken = await _saves(
                            MemorySessionStore(history_limit=limit), session_id, items
                        )
                    else:
                        path = Path(folder) / f"{session_id}.db"
                        async with SqliteSessionStore(path, history_limit=limit) as store:
                            taken = await _saves(store, session_id, items)
                    best[limit] = min(best.get(limit, taken), taken)
            print(
                f"{kind:6}  {saves} saves  history_limit=100: {best[100]:.3f} s  "
                f"history_limit=0: {best[0]:.3f} s  ratio {best[100] / best[0]:.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    anyio.run(_measure, arguments.saves, arguments.rounds)


if __name__ == "__main__":
    main()
