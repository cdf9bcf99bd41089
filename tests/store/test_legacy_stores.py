"""Stores written before the SQL stores moved onto the storage protocol open and lose nothing.

``legacy/`` holds a SQLite file of schema 5 and a PostgreSQL schema at
migration 3, written by the stores of that time, and what those stores
loaded from them. Today's stores move them onto the backend's tables when
they open them, and must load every session, transcript, claim, decision and
lease equal, and go on numbering versions and fencing tokens past them.
"""

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from store_support import LEGACY, rows_of, write_legacy_postgres, write_legacy_sqlite

from agentloop import CheckpointError, unstructure
from agentloop.store import (
    ClaimError,
    Lease,
    LeaseHeldError,
    LeaseLostError,
    PostgresSessionStore,
    SessionStore,
    SqliteSessionStore,
)

pytestmark = pytest.mark.anyio

Opener = Callable[[], AbstractAsyncContextManager[SessionStore]]


async def _observed(store: SessionStore) -> dict[str, Any]:
    """What the store loads, in the shape ``legacy/make_legacy.py.txt`` recorded."""
    out: dict[str, Any] = {"sessions": {}}
    for session_id in ["plain", "turn", "approval", "leased", "unsaved", "gone"]:
        loaded = await store.load(session_id)
        if loaded is None:
            out["sessions"][session_id] = None
            continue
        transcript = await store.transcript(session_id)
        assert transcript is not None
        out["sessions"][session_id] = {
            "checkpoint": loaded.checkpoint,
            "started_calls": sorted(loaded.started_calls),
            "version": loaded.version,
            "status": loaded.status.value,
            "updated_at": loaded.updated_at.isoformat(),
            "approvals": {
                call_id: {
                    "input_digest": approval.input_digest,
                    "approved": approval.approved,
                    "reason": approval.reason,
                    "edited_input": approval.edited_input,
                    "decided_at": approval.decided_at.isoformat(),
                }
                for call_id, approval in sorted(loaded.approvals.items())
            },
            "transcript": [unstructure(item) for item in transcript],
        }
    out["list_sessions"] = [[i.session_id, i.item_count] for i in await store.list_sessions()]
    out["awaiting_approval"] = [
        [s.session_id, list(s.pending_approvals), list(s.undecided)]
        for s in await store.sessions_awaiting_approval()
    ]
    out["ready"] = [s.session_id for s in await store.sessions_ready()]
    return out


async def _check_moved(open_store: Opener, expected_file: str) -> None:
    expected = json.loads((LEGACY / expected_file).read_text())
    tokens = expected.pop("tokens")
    for _reopen in range(2):  # the second open finds the moved tables: nothing to do
        async with open_store() as store:
            assert await _observed(store) == expected
    async with open_store() as store:
        # Leases: still held (a stranger is refused, fenced writes too), renewable by token.
        with pytest.raises(LeaseHeldError):
            await store.acquire("leased", "intruder", 30)
        with pytest.raises(LeaseLostError):
            await store.record_call_started("unsaved", "u2", "pay")
        held = Lease(
            session_id="leased", owner="worker-a", token=tokens["leased"], expires_at=_far()
        )
        renewed = await store.renew(held, 60)
        assert renewed.token == tokens["leased"]
        # Claims: one answered and one in doubt stay claimed; versions go on past the old.
        for call_id in ("c9", "c0"):
            with pytest.raises(ClaimError):
                await store.claim("approval", call_id, tool_name="w", input_digest="sha256:x")
        document = expected["sessions"]["leased"]["checkpoint"]
        version = await store.save_checkpoint(
            "leased", document, expected_version=6, fencing_token=renewed.token
        )
        assert version == 7
        await store.release(renewed)
        lease = await store.acquire("leased", "worker-c", 30)
        assert lease.token == max(tokens.values()) + 1


def _far() -> Any:
    from datetime import UTC, datetime

    return datetime(2100, 1, 1, tzinfo=UTC)


async def test_a_schema_5_sqlite_file_opens_and_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    write_legacy_sqlite(path)
    await _check_moved(lambda: SqliteSessionStore(path), "sqlite_schema5.json")
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    assert rows_of(path, tables) == [("counters",), ("heads",), ("keyed",), ("lists",), ("meta",)]
    assert rows_of(path, "SELECT key, value FROM meta") == [("schema_version", "8")]


async def test_a_migration_3_postgres_schema_opens_and_keeps_everything(
    postgres_uri: str,
) -> None:
    write_legacy_postgres(postgres_uri)
    await _check_moved(
        lambda: PostgresSessionStore(postgres_uri), "postgres_migration3_expected.json"
    )
    with psycopg.connect(postgres_uri, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        ).fetchall()
        versions = connection.execute("SELECT version FROM agentloop_schema ORDER BY 1")
        assert [row[0] for row in versions.fetchall()] == [1, 2, 3, 4, 5, 6]
    assert [row[0] for row in tables] == [
        "agentloop_heads",
        "agentloop_keyed",
        "agentloop_lists",
        "agentloop_schema",
    ]


async def test_a_damaged_old_row_refuses_the_move_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    write_legacy_sqlite(path)
    before = rows_of(path, "SELECT * FROM started_calls ORDER BY call_id")
    rows_of(path, "UPDATE started_calls SET started_at = 'yesterday' WHERE call_id = 'c0'")
    store = SqliteSessionStore(path)
    with pytest.raises(CheckpointError) as raised:
        await store.open()
    await store.aclose()
    assert str(raised.value) == (
        f"cannot open session store {str(path)!r}: moving its rows onto the storage protocol's "
        "tables failed at claims row ('approval', 'c0'): Invalid isoformat string: 'yesterday'; "
        "nothing was changed: repair or delete that row, then open the store again"
    )
    assert rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("5",)]
    assert len(rows_of(path, "SELECT * FROM started_calls")) == len(before)


async def test_a_move_interrupted_by_the_database_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    write_legacy_sqlite(path)
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE keyed (body TEXT)")  # in the way of the new tables
    connection.close()
    store = SqliteSessionStore(path)
    with pytest.raises(
        CheckpointError, match="SQLite reported OperationalError: table keyed already exists"
    ):
        await store.open()
    await store.aclose()
    assert rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("5",)]
    assert len(rows_of(path, "SELECT * FROM sessions")) == 4
    assert rows_of(path, "SELECT name FROM sqlite_master WHERE name = 'heads'") == []
