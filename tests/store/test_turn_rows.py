"""The turn's growing lists as rows (issue 22): a save within a long turn writes what the
turn added, old heads with the lists inline still load, damaged turn rows fail closed.

Run against real SQLite files and a real PostgreSQL, on both anyio backends.
"""

import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from store_support import LEGACY, write_legacy_sqlite

from agentloop import CheckpointError, Item, ItemKind, unstructure
from agentloop.store import (
    PostgresSessionStore,
    SessionStore,
    SqliteSessionStore,
    StaleSessionError,
)
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio

SESSION = "long"
FIX = "the store is damaged: restore it from a backup or delete the session"
KINDS = ["sqlite", "postgres"]
TURN = "WHERE substr(list, 1, 5) = 'turn.'"
"""The turn's lists among the backend's lists (``turn.items``, ``turn.tool_calls``, ...)."""


def _turn_document(rounds: int, *, session_id: str = SESSION) -> dict[str, Any]:
    """A document in a turn of ``rounds`` tool rounds (each list grows per round)."""
    items = [
        unstructure(Item.text(ItemKind.USER, f"round {n} " + "x" * 200)) for n in range(rounds)
    ]
    turn = {
        "items": items,
        "tool_calls": [{"call_id": f"c{n}", "result": "y" * 300} for n in range(rounds)],
        "model_calls_made": [{"round": n} for n in range(rounds)],
        "state": "running",
    }
    document = sample_checkpoint(session_id, [], turn=turn)
    document["transcript"] = list(items)
    return document


class Raw:
    """Direct SQL on the store's storage, to look at and damage its rows."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind = kind
        self.where = where
        self.prefix = "" if kind == "sqlite" else "agentloop_"

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("{t}", self.prefix)
        if self.kind == "sqlite":
            connection = sqlite3.connect(self.where)
            try:
                with connection:
                    return connection.execute(sql, params).fetchall()
            finally:
                connection.close()
        with psycopg.connect(self.where, autocommit=True) as pg:
            cursor = pg.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def set_turn_counts(self, counts: str | None) -> None:
        """Store ``counts`` as the head's turn counts (a field of its meta text)."""
        ((text,),) = self.query("SELECT meta FROM {t}heads")
        meta = json.loads(text)
        meta["turn_counts"] = counts
        self.query("UPDATE {t}heads SET meta = ?", (json.dumps(meta),))

    def open(self) -> SessionStore:
        if self.kind == "sqlite":
            return SqliteSessionStore(self.where)
        return PostgresSessionStore(self.where)


@pytest.fixture(params=KINDS)
def raw(request: pytest.FixtureRequest, tmp_path: Path) -> Raw:
    if request.param == "sqlite":
        return Raw("sqlite", str(tmp_path / "sessions.db"))
    new_schema: Callable[[], str] = request.getfixturevalue("new_postgres_schema")
    return Raw("postgres", new_schema())


@asynccontextmanager
async def opened(raw: Raw) -> AsyncIterator[SessionStore]:
    store = raw.open()
    async with store:  # type: ignore[attr-defined]
        yield store


# -- a long turn's saves write what the turn added ---------------------------------------


async def test_a_long_turns_head_row_stays_small_and_its_rows_are_the_lists(raw: Raw) -> None:
    heads: list[int] = []
    async with opened(raw) as store:
        for rounds in range(1, 61):
            await store.save_checkpoint(SESSION, _turn_document(rounds))
            (length,) = raw.query("SELECT length(document) FROM {t}heads")[0]
            heads.append(int(length))
        loaded = await store.load(SESSION)
    assert loaded is not None
    assert loaded.checkpoint == _turn_document(60)
    assert heads == [heads[0]] * 60  # the head holds [] for the three lists, whatever their size
    counts = raw.query(f"SELECT list, count(*) FROM {{t}}lists {TURN} GROUP BY list ORDER BY list")
    assert counts == [("turn.items", 60), ("turn.model_calls_made", 60), ("turn.tool_calls", 60)]
    (meta,) = raw.query("SELECT meta FROM {t}heads")[0]
    stored = json.loads(meta)["turn_counts"]
    assert json.loads(stored) == {"items": 60, "model_calls_made": 60, "tool_calls": 60}


async def test_rows_written_per_save_do_not_grow_with_the_turn(tmp_path: Path) -> None:
    """SQLite: the statements a save runs (traced on the store's connection)."""
    store = SqliteSessionStore(tmp_path / "traced.db")
    written: list[str] = []
    async with store:
        await store.save_checkpoint(SESSION, _turn_document(1))
        (worker,) = store._dialect.pool._idle  # the store's own connection: its statements
        connection = worker.connection
        connection.set_trace_callback(written.append)
        per_save: list[int] = []
        for rounds in range(2, 80):
            written.clear()
            await store.save_checkpoint(SESSION, _turn_document(rounds))
            per_save.append(
                sum("INSERT INTO lists" in text and "'turn." in text for text in written)
            )
        connection.set_trace_callback(None)
    assert per_save == [3] * 78  # one row per list per round, at round 2 as at round 79


async def test_rows_written_per_save_do_not_grow_with_the_turn_on_postgres(
    postgres_uri: str,
) -> None:
    """PostgreSQL: rows the last save's transaction wrote carry its transaction id (xmin)."""
    raw = Raw("postgres", postgres_uri)
    per_save: list[tuple[int, int]] = []
    async with PostgresSessionStore(postgres_uri) as store:
        for rounds in range(1, 50):
            await store.save_checkpoint(SESSION, _turn_document(rounds))
            per_save.append(
                raw.query(
                    f"SELECT count(*), (SELECT count(*) FROM agentloop_lists {TURN}) "
                    f"FROM agentloop_lists {TURN} AND xmin::text = "
                    "(SELECT xmin::text FROM agentloop_heads WHERE session_id = ?)",
                    (SESSION,),
                )[0]
            )
    assert per_save == [(3, 3 * rounds) for rounds in range(1, 50)]


async def test_a_new_turn_and_no_turn_replace_the_rows(raw: Raw) -> None:
    async with opened(raw) as store:
        await store.save_checkpoint(SESSION, _turn_document(5))
        short = _turn_document(2)
        await store.save_checkpoint(SESSION, short)
        assert (await store.load(SESSION)).checkpoint == short  # type: ignore[union-attr]
        assert raw.query(f"SELECT count(*) FROM {{t}}lists {TURN}") == [(6,)]
        none = {**short, "turn": None}
        await store.save_checkpoint(SESSION, none)
        assert (await store.load(SESSION)).checkpoint == none  # type: ignore[union-attr]
        assert raw.query(f"SELECT count(*) FROM {{t}}lists {TURN}") == [(0,)]
        assert json.loads(raw.query("SELECT meta FROM {t}heads")[0][0])["turn_counts"] is None
        await store.save_checkpoint(SESSION, _turn_document(3))
        assert await store.delete(SESSION)
    assert raw.query("SELECT count(*) FROM {t}lists") == [(0,)]


async def test_a_store_that_did_not_write_the_rows_rewrites_them_whole(raw: Raw) -> None:
    async with opened(raw) as first:
        await first.save_checkpoint(SESSION, _turn_document(4))
    raw.query("DELETE FROM {t}lists WHERE list = 'turn.items' AND position = 1")
    raw.query("INSERT INTO {t}lists VALUES (?, 'turn.stray', 0, '1')", (SESSION,))
    async with opened(raw) as second:  # no cached copy: reads the rows, rewrites the damage
        await second.save_checkpoint(SESSION, _turn_document(5))
        assert (await second.load(SESSION)).checkpoint == _turn_document(5)  # type: ignore[union-attr]
    async with opened(raw) as third:
        assert (await third.load(SESSION)).checkpoint == _turn_document(5)  # type: ignore[union-attr]


# -- damaged or missing turn rows fail closed --------------------------------------------

DAMAGE = [
    (
        "DELETE FROM {t}lists WHERE list = 'turn.tool_calls' AND position = 1",
        "turn row 'tool_calls'[1] is missing (its head row counts 3 'tool_calls' rows, 1 exist)",
    ),
    (
        "DELETE FROM {t}lists WHERE list = 'turn.items' AND position = 2",
        "turn row 'items'[2] is missing (its head row counts 3 'items' rows, 2 exist)",
    ),
    (
        "DELETE FROM {t}lists WHERE list = 'turn.model_calls_made'",
        "turn row 'model_calls_made'[0] is missing (its head row counts 3 "
        "'model_calls_made' rows, 0 exist)",
    ),
    (
        "UPDATE {t}lists SET body = '{\"round\": 1' WHERE list = 'turn.model_calls_made' "
        "AND position = 1",
        "turn row 'model_calls_made'[1] is not JSON (Expecting ',' delimiter at column 12)",
    ),
    (
        "UPDATE {t}lists SET body = 'NaN' WHERE list = 'turn.items' AND position = 0",
        "turn row 'items'[0] is not JSON (NaN is not JSON)",
    ),
    (
        "INSERT INTO {t}lists VALUES ('long', 'turn.tool_calls', 3, '{}')",
        "turn row 'tool_calls'[3] is extra (its head row counts 3 'tool_calls' rows, 4 exist)",
    ),
    (
        None,
        "turn row 'items'[0] is extra (its head row counts no 'items' rows)",
    ),
    (
        '{"items": -1}',
        "its head row's turn counts are {'items': -1}, expected an object of row counts > 0 "
        "for items, model_calls_made, tool_calls",
    ),
    (
        "nope",
        "its head row's turn counts is not JSON (Expecting value at column 1)",
    ),
    (
        "UPDATE {t}heads SET document = "
        "replace(document, '\"tool_calls\":[]', '\"tool_calls\":[1]')",
        "its head row holds no empty turn['tool_calls'] list for its 3 turn rows",
    ),
]


@pytest.mark.parametrize(("damage", "reason"), DAMAGE)
async def test_a_damaged_turn_row_is_a_checkpoint_error_naming_it(
    raw: Raw, damage: str | None, reason: str
) -> None:
    """Damage is a statement, or (not SQL) the turn counts to put in the head's meta."""
    document = _turn_document(3)
    async with opened(raw) as store:
        await store.save_checkpoint(SESSION, document)
    if damage is not None and damage.startswith(("DELETE", "UPDATE", "INSERT")):
        raw.query(damage)
    else:
        raw.set_turn_counts(damage)
    async with opened(raw) as store:  # no cached copy: reads the damaged rows
        for read in (store.load, store.transcript):
            with pytest.raises(CheckpointError) as raised:
                await read(SESSION)
            assert str(raised.value) == f"cannot load session {SESSION!r}: {reason}; {FIX}"
        await store.save_checkpoint(SESSION, document)  # saving the document again repairs it
        assert (await store.load(SESSION)).checkpoint == document  # type: ignore[union-attr]


# -- heads written before turn rows existed ----------------------------------------------


def _inline_head(document: dict[str, Any]) -> str:
    return json.dumps({key: value for key, value in document.items() if key != "transcript"})


async def test_a_version_4_sqlite_file_is_moved_and_its_inline_heads_load(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.db"
    old = _turn_document(3)
    write_legacy_sqlite(path)  # schema 5, made the schema version 4 wrote below
    connection = sqlite3.connect(path)
    with connection:  # and a session saved by it: its head holds the turn's lists inline
        for table in ("sessions", "items", "started_calls", "leases", "approvals"):
            connection.execute(f"DELETE FROM {table}")
        connection.execute("DROP TABLE turn_rows")
        connection.execute("ALTER TABLE sessions DROP COLUMN turn_counts")
        connection.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
        connection.execute(
            "INSERT INTO sessions (session_id, head, item_count, sequence, updated_at) "
            "VALUES (?, ?, 3, 1, '2026-01-01T00:00:00+00:00')",
            (SESSION, _inline_head(old)),
        )
        connection.executemany(
            "INSERT INTO items VALUES (?, ?, ?)",
            [(SESSION, n, json.dumps(item)) for n, item in enumerate(old["transcript"])],
        )
    connection.close()
    raw = Raw("sqlite", str(path))
    async with SqliteSessionStore(path) as store:
        loaded = await store.load(SESSION)
        assert loaded is not None
        assert (loaded.checkpoint, loaded.version) == (old, 1)
        assert await store.save_checkpoint(SESSION, _turn_document(4), expected_version=1) == 2
    assert raw.query("SELECT value FROM meta WHERE key = 'schema_version'") == [("8",)]
    assert raw.query(f"SELECT count(*) FROM lists {TURN}") == [(12,)]
    async with SqliteSessionStore(path) as reopened:
        assert (await reopened.load(SESSION)).checkpoint == _turn_document(4)  # type: ignore[union-attr]


async def test_a_version_2_postgres_schema_is_moved_and_its_inline_heads_load(
    postgres_uri: str,
) -> None:
    old = _turn_document(3)
    migrations = json.loads((LEGACY / "postgres_migration3.json").read_text())["migrations"]
    with psycopg.connect(postgres_uri) as connection:  # the schema version 2 wrote
        connection.execute(
            "CREATE TABLE agentloop_schema "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in migrations[:2]:
            for statement in migration.split(";"):
                if statement.strip():
                    connection.execute(statement)
        connection.execute("INSERT INTO agentloop_schema (version) VALUES (1), (2)")
        connection.execute(
            "INSERT INTO agentloop_sessions VALUES (%s, %s, 3, nextval('agentloop_versions'), "
            "now(), 'awaiting_input', '[]')",
            (SESSION, _inline_head(old)),
        )
        for position, item in enumerate(old["transcript"]):
            connection.execute(
                "INSERT INTO agentloop_items VALUES (%s, %s, %s)",
                (SESSION, position, json.dumps(item)),
            )
    raw = Raw("postgres", postgres_uri)
    async with PostgresSessionStore(postgres_uri) as store:
        assert await store.schema_version() == 6
        loaded = await store.load(SESSION)
        assert loaded is not None
        assert loaded.checkpoint == old
        await store.save_checkpoint(SESSION, _turn_document(4), expected_version=loaded.version)
        assert (await store.load(SESSION)).checkpoint == _turn_document(4)  # type: ignore[union-attr]
    assert raw.query(f"SELECT count(*) FROM agentloop_lists {TURN}") == [(12,)]


async def test_the_very_same_document_saved_again_keeps_its_turn_rows(raw: Raw) -> None:
    """The turn object kept whole (the same object as the last save) keeps its rows."""
    document = _turn_document(4)
    async with opened(raw) as store:
        await store.save_checkpoint(SESSION, document)
        await store.save_checkpoint(SESSION, document)
        assert (await store.load(SESSION)).checkpoint == document  # type: ignore[union-attr]
        again = {**document, "note": "the turn object is the last save's"}
        await store.save_checkpoint(SESSION, again)
        assert (await store.load(SESSION)).checkpoint == again  # type: ignore[union-attr]
    assert raw.query(f"SELECT count(*) FROM {{t}}lists {TURN}") == [(12,)]


async def test_a_refused_save_changes_no_turn_row(raw: Raw) -> None:
    async with opened(raw) as store:
        version = await store.save_checkpoint(SESSION, _turn_document(3))
        before = raw.query("SELECT list, position, body FROM {t}lists ORDER BY 1, 2")
        for rounds in (4, 1):  # an appending save and a rewriting one, both stale
            with pytest.raises(StaleSessionError) as raised:
                await store.save_checkpoint(
                    SESSION, _turn_document(rounds), expected_version=version + 100
                )
            assert str(raised.value) == (
                f"cannot save checkpoint for session {SESSION!r}: the save was based on "
                f"version {version + 100}, but the store holds version {version}; another "
                "writer saved it since: load the session again and redo the step"
            )
        assert raw.query("SELECT list, position, body FROM {t}lists ORDER BY 1, 2") == (before)
        assert (await store.load(SESSION)).checkpoint == _turn_document(3)  # type: ignore[union-attr]
        await store.save_checkpoint(SESSION, _turn_document(4), expected_version=version)
        assert (await store.load(SESSION)).checkpoint == _turn_document(4)  # type: ignore[union-attr]
