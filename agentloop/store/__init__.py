"""Durable sessions: the ``SessionStore`` protocol, SQLite and in-memory stores, JSONL.

A store keeps each session's last checkpoint document (``driver.checkpoint()``)
and the tool calls recorded as started, so a restarted host can resume a
session and answer calls that may have run as in doubt. See ``docs/store.md``.
"""

from ._documents import CHECKPOINT_FORMAT
from ._jsonl import export_jsonl, import_jsonl
from ._memory import MemorySessionStore
from ._protocol import SessionInfo, SessionStore, StoredSession
from ._sqlite import SqliteSessionStore

__all__ = [
    "CHECKPOINT_FORMAT",
    "MemorySessionStore",
    "SessionInfo",
    "SessionStore",
    "SqliteSessionStore",
    "StoredSession",
    "export_jsonl",
    "import_jsonl",
]
