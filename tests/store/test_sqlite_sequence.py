"""SQLite versions: one past every version ever given, from a counter that survives deletes."""

import shutil
import sqlite3
import tempfile
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import rows_of, write_legacy_sqlite

from agentloop import Item, ItemKind
from agentloop.store import SessionStatus, SqliteSessionStore
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio


def _document(session_id: str, count: int = 1, **fields: object) -> dict[str, object]:
    items = [Item.text(ItemKind.USER, f"item {n}") for n in range(count)]
    return sample_checkpoint(session_id, items, **fields)


def _waiting(session_id: str) -> dict[str, object]:
    return _document(
        session_id,
        state="AWAITING_APPROVAL",
        turn={"round": {"calls": [{"call": {"id": "c1"}, "status": "awaiting_approval"}]}},
    )


async def test_a_recreated_session_is_numbered_past_its_deleted_versions(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        assert await store.save_checkpoint("old", _document("old")) == 1
        assert await store.save_checkpoint("s", _document("s")) == 2
        assert await store.save_checkpoint("s", _document("s", 2)) == 3
        assert await store.delete("s") is True
        # The deleted row held the greatest sequence: the next save of any session passes it.
        assert await store.save_checkpoint("s", _document("s")) == 4
        assert await store.delete("s") is True
        assert await store.delete("old") is True
        assert await store.save_checkpoint("s", _document("s")) == 5
        assert await store.delete("missing") is False
        assert await store.save_checkpoint("t", _document("t")) == 6
        loaded = await store.load("s")
        assert loaded is not None
        assert loaded.version == 5
    async with SqliteSessionStore(path) as reopened:
        assert await reopened.save_checkpoint("s", _document("s", 3), expected_version=5) == 7


async def test_the_counters_hold_the_last_version_and_token_given(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        versions = [
            await store.save_checkpoint("a", _document("a")),
            await store.save_checkpoint("w", _waiting("w")),
            await store.save_checkpoint("a", _document("a", 2)),
        ]
        assert versions == [1, 2, 3]
        assert await store.delete("a") is True  # its version stays given
        lease = await store.acquire("w", "worker", 30)
        assert rows_of(path, "SELECT name, value FROM counters ORDER BY name") == [
            ("incarnations", 2),  # a new head's revisions start a range of their own
            ("tokens", lease.token),
            ("versions", 3),
        ]
        assert await store.save_checkpoint("a", _document("a")) == 4


@st.composite
def _operations(draw: st.DrawFn) -> list[tuple[str, str]]:
    names = st.sampled_from(["a", "b", "c"])
    kinds = st.sampled_from(["save", "save", "save-approval", "delete", "reopen"])
    return draw(st.lists(st.tuples(kinds, names), min_size=1, max_size=25))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=_operations())
def test_every_save_is_numbered_past_every_version_given_before(
    backend: str, operations: list[tuple[str, str]]
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="agentloop-sequence-"))
    try:
        anyio.run(_check_versions, folder / "sessions.db", operations, backend=backend)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _check_versions(path: Path, operations: list[tuple[str, str]]) -> None:
    given_versions: list[int] = []
    versions: dict[str, int] = {}
    store = SqliteSessionStore(path)
    try:
        for kind, session_id in operations:
            if kind == "reopen":
                await store.aclose()
                store = SqliteSessionStore(path)
            elif kind == "delete":
                assert await store.delete(session_id) is (session_id in versions)
                versions.pop(session_id, None)
            else:
                document = (
                    _waiting(session_id) if kind == "save-approval" else _document(session_id)
                )
                version = await store.save_checkpoint(
                    session_id, document, expected_version=versions.get(session_id)
                )
                assert version == max(given_versions, default=0) + 1
                given_versions.append(version)
                versions[session_id] = version
        listed = await store.list_sessions()
        assert [info.session_id for info in listed] == sorted(
            versions, key=versions.__getitem__, reverse=True
        )
        for session_id, version in versions.items():
            loaded = await store.load(session_id)
            assert loaded is not None
            assert loaded.version == version
    finally:
        await store.aclose()


async def test_a_version_3_file_is_moved_keeping_its_counter(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    write_legacy_sqlite(path)  # schema 5, made schema 3 below
    # As version 3 left it: no turn rows, an index on sequence, the counter bumped per
    # save (here past the rows: saves of deleted sessions), a status never written.
    connection = sqlite3.connect(path)
    with connection:
        for table in ("sessions", "items", "started_calls", "leases", "approvals"):
            connection.execute(f"DELETE FROM {table} WHERE session_id NOT IN ('plain', 'leased')")
        connection.execute("DROP TABLE turn_rows")  # what version 5 added
        connection.execute("ALTER TABLE sessions DROP COLUMN turn_counts")
        connection.execute("CREATE INDEX sessions_by_sequence ON sessions (sequence)")
        connection.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        connection.execute("UPDATE meta SET value = '9' WHERE key = 'last_sequence'")
        connection.execute("UPDATE sessions SET status = 'thinking' WHERE session_id = 'plain'")
    connection.close()
    async with SqliteSessionStore(path) as store:
        loaded = await store.load("plain")
        assert loaded is not None
        assert (loaded.version, loaded.status) == (3, SessionStatus.AWAITING_INPUT)
        assert await store.save_checkpoint("plain", loaded.checkpoint, expected_version=3) == 10
        assert await store.save_checkpoint("c", _document("c")) == 11
        assert [info.session_id for info in await store.list_sessions()] == [
            "c",
            "plain",
            "leased",
        ]
    assert rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("8",)]
    assert rows_of(path, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name") == [
        ("sqlite_autoindex_heads_1",),
    ]


async def test_two_stores_on_one_file_never_give_one_version_twice(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as first, SqliteSessionStore(path) as second:
        assert await first.save_checkpoint("a", _document("a")) == 1
        assert await second.save_checkpoint("b", _document("b")) == 2
        assert await first.delete("b") is True
        assert await second.save_checkpoint("b", _document("b")) == 3
        assert await first.save_checkpoint("a", _document("a", 2), expected_version=1) == 4
