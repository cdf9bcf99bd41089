"""Submit input and die while the model is called: the test SIGKILLs this process.

Usage: ``input_kill_runner.py STORE MARKER``. STORE is a ``postgresql://`` URI or a
SQLite path. The model writes MARKER when it is called, then hangs.
"""

import os
import sys
from pathlib import Path

import anyio

import agentloop as al
import agentloop.model
import agentloop.testing
from agentloop.store import SessionStore, SqliteSessionStore


def open_store(target: str) -> SessionStore:
    if target.startswith("postgresql://"):
        from agentloop.store import PostgresSessionStore

        return PostgresSessionStore(target, pool_size=1)
    return SqliteSessionStore(target)


def note(marker: Path, text: str) -> None:
    # Atomically: the test reads MARKER as soon as it exists, then kills this process.
    partial = marker.with_suffix(".partial")
    partial.write_text(text)
    os.replace(partial, marker)


async def main(target: str, marker: Path) -> None:
    async def hang(request: al.model.TurnRequest) -> str:
        note(marker, request.transcript[-1].text_content)
        await anyio.sleep(3600)
        raise AssertionError("killed before this")

    async with open_store(target) as store:  # type: ignore[attr-defined]
        agent = al.Agent.builder().model(al.testing.ScriptedModel(hang)).store(store).build()
        driver = await agent.start("durable-input")
        driver.submit_input([al.Item.text(al.ItemKind.USER, "keep this message")])
        await driver.next()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], Path(sys.argv[2]))
