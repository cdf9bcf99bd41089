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
