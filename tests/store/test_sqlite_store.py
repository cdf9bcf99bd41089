"""SQLite specifics: schema and WAL, incremental item writes, two stores on one file, errors."""

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_support import rows_of

from agentloop import CheckpointError, InvalidStateError, Item, ItemKind
from agentloop.store import SqliteSessionStore
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio


def _users(count: int, label: str = "item") -> list[Item]:
    return [Item.text(ItemKind.USER, f"{label} {n}") for n in range(count)]


async def test_a_new_file_gets_the_versioned_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        assert store.path == str(path)
        assert repr(store) == f"SqliteSessionStore({str(path)!r}, open)"
    assert rows_of(path, "SELECT key, value FROM meta ORDER BY key") == [("schema_version", "8")]
    assert rows_of(path, "SELECT name, value FROM counters ORDER BY name") == [
        ("tokens", 0),
        ("versions", 0),
    ]
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    assert rows_of(path, tables) == [("counters",), ("heads",), ("keyed",), ("lists",), ("meta",)]
    assert rows_of(path, "PRAGMA journal_mode") == [("wal",)]
    assert repr(store) == f"SqliteSessionStore({str(path)!r}, closed)"


async def test_a_save_writes_only_the_items_that_changed(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await store.save_checkpoint("s", sample_checkpoint("s", _users(100)))
        connection = sqlite3.connect(path)
        connection.executescript(
            "CREATE TABLE written (position INTEGER);"
            "CREATE TRIGGER record_write AFTER INSERT ON lists WHEN new.list = 'items' "
            "BEGIN INSERT INTO written VALUES (new.position); END;"
        )
        connection.close()

        async def save_and_collect(items: list[Item]) -> list[int]:
            await store.save_checkpoint("s", sample_checkpoint("s", items))
            written = [int(str(row[0])) for row in rows_of(path, "SELECT position FROM written")]
            rows_of(path, "DELETE FROM written")
            return written

        assert await save_and_collect([*_users(100), *_users(2, "new")]) == [100, 101]
        assert await save_and_collect([*_users(100), *_users(2, "new")]) == []
        compacted = [Item.text(ItemKind.USER, "summary"), *_users(100)[40:]]
        assert await save_and_collect(compacted) == list(range(61))
        assert await save_and_collect(compacted[:10]) == []
        loaded = await store.load("s")
    assert loaded is not None
    assert loaded.checkpoint == sample_checkpoint("s", compacted[:10])


async def test_a_row_written_behind_the_stores_back_is_replaced_by_the_next_save(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        first = await store.save_checkpoint("s", sample_checkpoint("s", _users(3)))
        # Another program writes a row past the end: a save replaces the list from its
        # first change on (rows past the stored ones included).
        rows_of(path, "INSERT INTO lists VALUES ('s', 'items', 3, 'stray')")
        rows_of(path, "INSERT INTO lists VALUES ('s', 'items', 4, 'stray')")
        grown = sample_checkpoint("s", _users(4))
        second = await store.save_checkpoint("s", grown, expected_version=first)
        loaded = await store.load("s")
    assert loaded is not None
    assert (loaded.version, loaded.checkpoint) == (second, grown)
    assert rows_of(path, "SELECT position, body FROM lists WHERE position >= 3") == [
        (3, json.dumps(grown["transcript"][3], ensure_ascii=False, separators=(",", ":")))
    ]


async def test_two_stores_on_one_file_never_diff_against_a_stale_copy(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as first, SqliteSessionStore(path) as second:
        await first.save_checkpoint("s", sample_checkpoint("s", _users(10)))
        await second.save_checkpoint("s", sample_checkpoint("s", _users(5, "other")))
        await first.save_checkpoint("s", sample_checkpoint("s", _users(11)))
        assert await second.transcript("s") == _users(11)
        assert await second.delete("s") is True
        await second.save_checkpoint("s", sample_checkpoint("s", _users(3, "reborn")))
        await first.save_checkpoint("s", sample_checkpoint("s", _users(12)))
        loaded = await second.load("s")
    assert loaded is not None
    assert loaded.checkpoint == sample_checkpoint("s", _users(12))


async def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path):
        pass
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    connection.close()
    store = SqliteSessionStore(path)
    with pytest.raises(CheckpointError) as raised:
        await store.open()
    assert str(raised.value) == (
        f"cannot open session store {str(path)!r}: expected schema version 8, found 9; "
        "it was written by a newer agentloop, upgrade agentloop to read it"
    )
    assert rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("9",)]
    await store.aclose()


async def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (body TEXT)")
    connection.close()
    with pytest.raises(CheckpointError) as raised:
        async with SqliteSessionStore(path):
            pass
    assert str(raised.value) == (
        f"cannot open session store {str(path)!r}: expected schema version 8, found none; "
        "the file is not an agentloop session store, open another path"
    )
    assert rows_of(path, "SELECT name FROM sqlite_master") == [("notes",)]


async def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, just some text that is long enough " * 40)
    store = SqliteSessionStore(path)
    with pytest.raises(CheckpointError) as raised:
        await store.list_sessions()
    assert str(raised.value) == (
        f"cannot list sessions in session store {str(path)!r}: SQLite reported "
        "DatabaseError: file is not a database; check that the path is a writable "
        "agentloop session store"
    )
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    await store.aclose()


async def test_a_closed_store_refuses_every_call(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = SqliteSessionStore(path)
    await store.save_checkpoint("s", sample_checkpoint("s", _users(1)))
    await store.aclose()
    await store.aclose()
    with pytest.raises(InvalidStateError) as raised:
        await store.load("s")
    assert str(raised.value) == (
        f"cannot read session 's': SqliteSessionStore({str(path)!r}) is closed; "
        "open a new SqliteSessionStore"
    )
    async with SqliteSessionStore(path) as reopened:
        assert await reopened.transcript("s") == _users(1)


_VERSION_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE sessions (session_id TEXT PRIMARY KEY, head TEXT NOT NULL,
    item_count INTEGER NOT NULL, sequence INTEGER NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX sessions_by_sequence ON sessions (sequence);
CREATE TABLE items (session_id TEXT NOT NULL, position INTEGER NOT NULL, item TEXT NOT NULL,
    PRIMARY KEY (session_id, position)) WITHOUT ROWID;
CREATE TABLE started_calls (session_id TEXT NOT NULL, call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL, started_at TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)) WITHOUT ROWID;
INSERT INTO meta VALUES ('schema_version', '1'), ('last_sequence', '2');
"""


_MIGRATION_TO_2 = """
ALTER TABLE sessions ADD COLUMN status TEXT NOT NULL DEFAULT 'awaiting_input';
ALTER TABLE sessions ADD COLUMN pending_approvals TEXT NOT NULL DEFAULT '[]';
CREATE INDEX sessions_by_status ON sessions (status, sequence);
ALTER TABLE started_calls ADD COLUMN input_digest TEXT;
ALTER TABLE started_calls ADD COLUMN answered INTEGER NOT NULL DEFAULT 0;
CREATE TABLE leases (session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL,
    expires_at REAL NOT NULL, released INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE approvals (session_id TEXT NOT NULL, call_id TEXT NOT NULL,
    input_digest TEXT NOT NULL, approved INTEGER NOT NULL, decided_at TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('last_token', '0');
"""
"""What schema 2 added (agentloop before the SQL stores moved onto the storage protocol)."""


async def test_a_version_1_file_is_migrated_in_place(tmp_path: Path) -> None:
    from agentloop.store import SessionStatus

    path = tmp_path / "old.db"
    waiting = sample_checkpoint(
        "waiting",
        _users(1),
        state="AWAITING_APPROVAL",
        turn={"round": {"calls": [{"call": {"id": "c1"}, "status": "awaiting_approval"}]}},
    )
    plain = sample_checkpoint("plain", _users(2))
    connection = sqlite3.connect(path)
    connection.executescript(_VERSION_1)
    with connection:
        for sequence, document in enumerate((waiting, plain), start=1):
            head = {key: value for key, value in document.items() if key != "transcript"}
            session_id = str(document["session_id"])
            connection.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, '2026-01-01T00:00:00+00:00')",
                (session_id, json.dumps(head), len(document["transcript"]), sequence),
            )
            connection.executemany(
                "INSERT INTO items VALUES (?, ?, ?)",
                [
                    (session_id, position, json.dumps(item))
                    for position, item in enumerate(document["transcript"])
                ],
            )
        connection.execute(
            "INSERT INTO started_calls VALUES ('plain', 'c9', 'pay', '2026-01-01T00:00:00+00:00')"
        )
    connection.close()
    async with SqliteSessionStore(path) as store:
        loaded = await store.load("waiting")
        assert loaded is not None
        assert (loaded.checkpoint, loaded.version, loaded.status) == (
            waiting,
            1,
            SessionStatus.AWAITING_APPROVAL,
        )
        inbox = await store.sessions_awaiting_approval()
        assert [(s.session_id, s.undecided) for s in inbox] == [("waiting", ("c1",))]
        plain_loaded = await store.load("plain")
        assert plain_loaded is not None
        assert plain_loaded.started_calls == frozenset({"c9"})
        assert await store.save_checkpoint("plain", plain, expected_version=2) == 3
    assert rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("8",)]


async def test_a_version_2_file_keeps_its_decisions_and_takes_reasons_and_edits(
    tmp_path: Path,
) -> None:
    from agentloop.store import RecordedApproval, input_digest

    path = tmp_path / "v2.db"
    waiting = sample_checkpoint(
        "waiting",
        _users(1),
        state="AWAITING_APPROVAL",
        turn={
            "round": {
                "calls": [
                    {"call": {"id": "c1"}, "status": "awaiting_approval"},
                    {"call": {"id": "c2"}, "status": "awaiting_approval"},
                ]
            }
        },
    )
    connection = sqlite3.connect(path)
    connection.executescript(_VERSION_1)
    connection.executescript(_MIGRATION_TO_2)
    with connection:
        connection.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        head = {key: value for key, value in waiting.items() if key != "transcript"}
        connection.execute(
            "INSERT INTO sessions VALUES ('waiting', ?, 1, 1, '2026-01-01T00:00:00+00:00', "
            "'awaiting_approval', '[\"c1\", \"c2\"]')",
            (json.dumps(head),),
        )
        connection.execute(
            "INSERT INTO items VALUES ('waiting', 0, ?)", (json.dumps(waiting["transcript"][0]),)
        )
        connection.execute(
            "INSERT INTO approvals VALUES ('waiting', 'c1', 'sha256:old', 0, "
            "'2026-01-01T00:00:01+00:00')"
        )
    connection.close()
    async with SqliteSessionStore(path) as store:
        loaded = await store.load("waiting")
        assert loaded is not None
        assert loaded.checkpoint == waiting
        assert dict(loaded.approvals) == {
            "c1": RecordedApproval(
                session_id="waiting",
                call_id="c1",
                input_digest="sha256:old",
                approved=False,
                decided_at=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
            )
        }
        edited = {"path": "/b", "options": ["x", 1.5, None]}
        digest = input_digest("write", edited)
        recorded = await store.record_approval(
            "waiting", "c2", input_digest=digest, approved=True, reason="ok", edited_input=edited
        )
        assert (recorded.reason, recorded.edited_input) == ("ok", edited)
    async with SqliteSessionStore(path) as reopened:
        again = await reopened.load("waiting")
        assert again is not None
        assert again.approvals["c2"] == recorded
        assert again.approvals["c1"].reason is None
    assert rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("8",)]
