"""A worker of the store-only fleet test: lease a ready session, claim its call, run, save.

Usage: ``fleet_worker.py STORE OWNER SIDE_EFFECTS SESSION_ID... [--die-in-tool]``.
STORE is a ``postgresql://`` URI, a ``redis://`` URL with ``#PREFIX`` or a SQLite
path. The "tool" appends a line to ``SIDE_EFFECTS/<call id>`` (the side effect that must
happen at most once). With ``--die-in-tool`` the worker takes 1 s leases, writes
``SIDE_EFFECTS/entered`` after its side effect and then waits to be SIGKILLed. It exits once every
given session has its call answered.
"""

import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

import agentloop as al
from agentloop.store import (
    ClaimError,
    LeaseLostError,
    SessionStatus,
    SessionStore,
    SqliteSessionStore,
    StaleSessionError,
    input_digest,
)

TTL = 30.0
"""A live worker's lease outlives any step here, however busy the machine."""
DOOMED_TTL = 1.0
"""The worker that will be killed: its session is taken over a second later."""


def open_store(target: str) -> SessionStore:
    if target.startswith("postgresql://"):
        from agentloop.store import PostgresSessionStore

        return PostgresSessionStore(target, pool_size=1)
    if target.startswith("redis://"):  # redis://HOST:PORT/DB#PREFIX
        from agentloop.store import RedisSessionStore

        url, _, prefix = target.partition("#")
        return RedisSessionStore(url, prefix=prefix)
    return SqliteSessionStore(target)


def answered(document: dict[str, Any], call_id: str, text: str) -> dict[str, Any]:
    result = al.Item(al.ItemKind.TOOL, [al.ToolResultPart(call_id, text)])
    return {
        **document,
        "state": "IDLE",
        "transcript": [*document["transcript"], al.unstructure(result)],
    }


def run_tool(path: Path, owner: str) -> None:
    """The side effect: one line per run."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(f"{owner} {uuid.uuid4().hex}\n")


def announce(effects: Path, call_id: str) -> None:
    """Write ``entered`` atomically: the test kills us as soon as it appears."""
    (effects / "entered.tmp").write_text(call_id)
    (effects / "entered.tmp").rename(effects / "entered")


async def main(target: str, owner: str, effects: Path, sessions: list[str], die: bool) -> None:
    async with open_store(target) as store:  # type: ignore[attr-defined]
        while True:
            loaded = [await store.load(session_id) for session_id in sessions]
            if all(s is not None and s.status is SessionStatus.AWAITING_INPUT for s in loaded):
                return
            lease = await store.acquire_ready(owner, DOOMED_TTL if die else TTL)
            if lease is None:
                await anyio.sleep(0.05)
                continue
            stored = await store.load(lease.session_id)
            assert stored is not None
            call_id = f"call-{lease.session_id}"
            digest = input_digest("effect", {"session": lease.session_id})
            try:
                await store.claim(
                    lease.session_id,
                    call_id,
                    tool_name="effect",
                    input_digest=digest,
                    fencing_token=lease.token,
                )
            except ClaimError:
                text = "in doubt: the call was claimed by a worker that stopped"
            else:
                run_tool(effects / call_id, owner)
                if die:
                    announce(effects, call_id)
                    await anyio.sleep(3600)
                text = f"done by {owner}"
            try:
                await store.save_checkpoint(
                    lease.session_id,
                    answered(stored.checkpoint, call_id, text),
                    expected_version=stored.version,
                    fencing_token=lease.token,
                )
            except (LeaseLostError, StaleSessionError):
                continue  # another worker owns the session now
            await store.release(lease)


if __name__ == "__main__":
    arguments = [argument for argument in sys.argv[1:] if argument != "--die-in-tool"]
    target, owner, effects, *ids = arguments
    anyio.run(main, target, owner, Path(effects), ids, "--die-in-tool" in sys.argv)
