"""Documents the kill test's writer saves, and the check that one loaded whole."""

import sqlite3
from pathlib import Path
from typing import Any

from agentloop import Item, ItemKind, unstructure
from agentloop.store import CHECKPOINT_FORMAT

KILLED_SESSION = "killed-session"
PREFIX_LENGTH = 5


def counted_document(counter: int) -> dict[str, Any]:
    """Save number ``counter``: ``counter`` items; every 10th save rewrites the first five."""
    compaction = counter // 10
    items = [
        Item.text(ItemKind.USER, f"item {position} compaction {compaction}")
        if position < PREFIX_LENGTH
        else Item.text(ItemKind.USER, f"item {position}")
        for position in range(counter)
    ]
    return {
        "format": CHECKPOINT_FORMAT,
        "version": 1,
        "session_id": KILLED_SESSION,
        "counter": counter,
        "pending": {"approvals": [f"call-{counter}"], "padding": "x" * (counter % 7) * 100},
        "transcript": [unstructure(item) for item in items],
    }


def started_calls_between(first: int, last: int) -> frozenset[str]:
    """The calls the writer records as started after saves ``first``..``last``."""
    return frozenset(f"call-{number}" for number in range(first, last + 1))


def rows_of(path: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows ``sql`` reads from the SQLite file at ``path`` (its own connection)."""
    connection = sqlite3.connect(path)
    try:
        with connection:  # commits
            return connection.execute(sql).fetchall()
    finally:
        connection.close()


LEGACY = Path(__file__).parent / "legacy"


def write_legacy_sqlite(path: Path) -> None:
    """A SQLite file of schema 5 as agentloop wrote it before the SQL backend (see legacy/)."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript((LEGACY / "sqlite_schema5.sql").read_text())
    finally:
        connection.close()


def write_legacy_postgres(uri: str) -> None:
    """A PostgreSQL schema at migration 3 as agentloop wrote it before the SQL backend."""
    import json

    import psycopg

    dump = json.loads((LEGACY / "postgres_migration3.json").read_text())
    with psycopg.connect(uri) as connection:  # one transaction
        connection.execute(
            "CREATE TABLE agentloop_schema "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in dump["migrations"]:
            for statement in migration.split(";"):
                if statement.strip():
                    connection.execute(statement)
        for table, found in dump["tables"].items():
            columns = ", ".join(found["columns"])
            marks = ", ".join(["%s"] * len(found["columns"]))
            for row in found["rows"]:
                connection.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", row)
        for sequence, value in dump["sequences"].items():
            connection.execute("SELECT setval(%s::regclass, %s)", (sequence, value))
