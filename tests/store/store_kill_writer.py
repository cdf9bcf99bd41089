"""Child process of the kill test: saves growing checkpoints until it is killed.

Usage: python store_kill_writer.py DATABASE. Continues from the counter of
the session already in DATABASE; prints each counter once its save and its
started-call record have returned.
"""

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_support import KILLED_SESSION, counted_document

from agentloop.store import SqliteSessionStore


async def main(path: str) -> None:
    async with SqliteSessionStore(path) as store:
        loaded = await store.load(KILLED_SESSION)
        counter = 0 if loaded is None else int(loaded.checkpoint["counter"])
        while True:
            counter += 1
            await store.save_checkpoint(KILLED_SESSION, counted_document(counter))
            await store.record_call_started(KILLED_SESSION, f"call-{counter}", "write_file")
            print(counter, flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
