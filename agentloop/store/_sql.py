"""Every SQL statement of the SQLite session store: synchronous functions over a connection.

Schema (version :data:`SCHEMA_VERSION`, kept in ``meta``)::

    meta(key, value)                          schema_version, last_sequence, last_token
    sessions(session_id, head, item_count,    one row per saved session: the document
             sequence, updated_at, status,    without its transcript (and with [] for the
             pending_approvals, turn_counts)  turn's lists kept as rows; turn_counts: how
                                              many per list, JSON or NULL); sequence
                                              orders saves and is the session's version
    items(session_id, position, item)         the transcript, one JSON item per row
    turn_rows(session_id, list, position,     the turn's growing lists (its items, tool
              element)                        calls, model calls), one JSON value per row
    started_calls(session_id, call_id,        claims: calls claimed or recorded as started;
                  tool_name, started_at,      answered once a saved transcript held their
                  input_digest, answered)     result (kept, so a call is never claimed twice)
    leases(session_id, owner, token,          the last lease granted per session
           expires_at, released)
    approvals(session_id, call_id,            decisions recorded per call, with the
              input_digest, approved, decided_at, reason given and the edited input
              reason, edited_input)           (JSON text; NULL: the call's own input)

A save numbers the session's row one past every sequence ever given: past
the greatest ``sequence`` of the rows (read per status from the
``sessions_by_status`` index, the only index on ``sessions``) and past
``last_sequence``, which a delete raises to the deleted row's sequence. So
a save writes no ``meta`` row and one index entry, and a sequence is never
reused (not even after a delete or by a recreated session): it orders
``list_sessions``, tells a store whether its cached copy of the items is
current, and serves as the version optimistic saves compare. ``last_token``
is a counter bumped per lease: a fencing token is never reused either.
``status`` and ``pending_approvals`` (a JSON list of call ids) are derived
from the head at each save (``summarize``) so the inbox queries read no
documents. Older files are migrated in place when opened (version 3 added
the approvals' ``reason`` and ``edited_input``, NULL in older rows; version 4
dropped the index on ``sequence`` and maps any status outside
``SessionStatus`` to ``awaiting_input``, as reading it always did; version 5
added ``turn_rows`` and ``turn_counts``, NULL in older rows: their heads hold
the turn's lists inline and load as they are). The
callers hold the connection's lock; these functions never run concurrently
on one connection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from ..core._errors import CheckpointError
from ..loop._session_store import SessionStatus, summarize
from ._rules import LeaseRow

__all__ = [
    "SCHEMA_VERSION",
    "ApprovalRow",
    "SessionRow",
    "answer_calls",
    "connect",
    "delete_session",
    "insert_approval",
    "insert_claim",
    "insert_started_call",
    "list_session_rows",
    "next_token",
    "read_approvals",
    "read_claim",
    "read_items",
    "read_lease",
    "read_save_state",
    "read_session",
    "read_started_calls",
    "read_summaries",
    "read_turn_rows",
    "transaction",
    "write_checkpoint",
    "write_lease",
]

SCHEMA_VERSION = 5
"""The schema this module writes; a file with a newer one is refused, older ones migrated."""

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    head TEXT NOT NULL,
    item_count INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX sessions_by_sequence ON sessions (sequence);
CREATE TABLE items (
    session_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
) WITHOUT ROWID;
CREATE TABLE started_calls (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    started_at TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID;
"""

_MIGRATION_TO_2 = """
ALTER TABLE sessions ADD COLUMN status TEXT NOT NULL DEFAULT 'awaiting_input';
ALTER TABLE sessions ADD COLUMN pending_approvals TEXT NOT NULL DEFAULT '[]';
CREATE INDEX sessions_by_status ON sessions (status, sequence);
ALTER TABLE started_calls ADD COLUMN input_digest TEXT;
ALTER TABLE started_calls ADD COLUMN answered INTEGER NOT NULL DEFAULT 0;
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    released INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE approvals (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    input_digest TEXT NOT NULL,
    approved INTEGER NOT NULL,
    decided_at TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('last_token', '0');
"""

_MIGRATION_TO_3 = """
ALTER TABLE approvals ADD COLUMN reason TEXT;
ALTER TABLE approvals ADD COLUMN edited_input TEXT;
UPDATE meta SET value = '3' WHERE key = 'schema_version';
"""

_STATUSES = tuple(status.value for status in SessionStatus)
"""Every status a save writes: the greatest sequence is the greatest of each one's.

A new ``SessionStatus`` value needs a new schema version (and a migration):
an agentloop that does not know it would not look at its rows, and could
number a save below one of them.
"""

_MIGRATION_TO_4 = f"""
DROP INDEX sessions_by_sequence;
UPDATE sessions SET status = 'awaiting_input'
    WHERE status NOT IN ({", ".join(f"'{status}'" for status in _STATUSES)});
UPDATE meta SET value = '4' WHERE key = 'schema_version';
"""

_MIGRATION_TO_5 = """
ALTER TABLE sessions ADD COLUMN turn_counts TEXT;
CREATE TABLE turn_rows (
    session_id TEXT NOT NULL,
    list TEXT NOT NULL,
    position INTEGER NOT NULL,
    element TEXT NOT NULL,
    PRIMARY KEY (session_id, list, position)
) WITHOUT ROWID;
UPDATE meta SET value = '5' WHERE key = 'schema_version';
"""


@contextmanager
def transaction(connection: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    """One transaction: committed if the block returns, rolled back if it raises.

    A write transaction takes the write lock up front (``BEGIN IMMEDIATE``),
    so its reads and writes see one state of the file.
    """
    connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
    except BaseException:
        if connection.in_transaction:  # some errors (SQLITE_FULL, ...) already rolled back
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` in WAL mode with ``synchronous=FULL``, creating the schema if needed.

    Raises ``CheckpointError`` when the file's schema is newer than this
    module's. ``synchronous=FULL`` fsyncs the WAL at every commit, so a save
    that returned survives an OS crash too, not only a killed process.
    """
    connection = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        with transaction(connection, write=True):
            _ensure_schema(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _run_script(connection: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the open transaction: run the statements one by one.
    for statement in script.split(";"):
        if statement.strip():
            connection.execute(statement)


def _ensure_schema(connection: sqlite3.Connection, path: str) -> None:
    tables = {
        str(row[0])
        for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    if not tables:
        _run_script(connection, _SCHEMA)
        connection.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [("schema_version", "1"), ("last_sequence", "0")],
        )
        found: int | None = 1
    else:
        found = None
        if "meta" in tables:
            row = connection.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()
            found = int(row[0]) if row is not None and str(row[0]).isdigit() else None
    if found == 1:
        _migrate_to_2(connection)
        found = 2
    if found == 2:
        _run_script(connection, _MIGRATION_TO_3)
        found = 3
    if found == 3:
        _run_script(connection, _MIGRATION_TO_4)
        found = 4
    if found == 4:
        _run_script(connection, _MIGRATION_TO_5)
        found = 5
    if found != SCHEMA_VERSION:
        raise CheckpointError(
            f"cannot open session store {path!r}: expected schema version {SCHEMA_VERSION}, "
            f"found {found if found is not None else 'none'}; "
            + (
                "it was written by a newer agentloop, upgrade agentloop to read it"
                if found is not None and found > SCHEMA_VERSION
                else "the file is not an agentloop session store, open another path"
            )
        )


def _migrate_to_2(connection: sqlite3.Connection) -> None:
    """Add versions' status columns, claims' digests, leases and approvals; derive statuses."""
    _run_script(connection, _MIGRATION_TO_2)
    for session_id, head in connection.execute("SELECT session_id, head FROM sessions").fetchall():
        try:
            document = json.loads(head)
        except (TypeError, ValueError):
            continue  # a damaged head keeps the default status; load() reports it
        if isinstance(document, dict):
            status, pending = summarize(document)
            connection.execute(
                "UPDATE sessions SET status = ?, pending_approvals = ? WHERE session_id = ?",
                (status.value, json.dumps(list(pending)), session_id),
            )
    connection.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


_NEXT_SEQUENCE = (
    "max((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'last_sequence'), "
    + ", ".join(
        f"coalesce((SELECT max(sequence) FROM sessions WHERE status = '{status}'), 0)"
        for status in _STATUSES
    )
    + ") + 1"
)

_READ_SAVE_STATE = (
    "SELECT l.owner, l.token, l.expires_at, l.released, s.sequence, "
    + _NEXT_SEQUENCE
    + " FROM (SELECT ? AS id) AS k "
    "LEFT JOIN leases AS l ON l.session_id = k.id "
    "LEFT JOIN sessions AS s ON s.session_id = k.id"
)


def read_save_state(
    connection: sqlite3.Connection, session_id: str
) -> tuple[LeaseRow | None, int | None, int]:
    """The session's lease and ``sequence`` (``None`` each when absent), and the next sequence."""
    row = connection.execute(_READ_SAVE_STATE, (session_id,)).fetchone()
    lease = (
        None if row[1] is None else LeaseRow(str(row[0]), int(row[1]), float(row[2]), bool(row[3]))
    )
    return lease, None if row[4] is None else int(row[4]), int(row[5])


def read_items(
    connection: sqlite3.Connection, session_id: str
) -> tuple[tuple[object, object], ...]:
    """The session's ``(position, item)`` rows, in position order, as stored."""
    rows = connection.execute(
        "SELECT position, item FROM items WHERE session_id = ? ORDER BY position", (session_id,)
    ).fetchall()
    return tuple((row[0], row[1]) for row in rows)


def read_turn_rows(
    connection: sqlite3.Connection, session_id: str
) -> tuple[tuple[object, object, object], ...]:
    """The session's ``(list, position, element)`` turn rows, by list and position, as stored."""
    rows = connection.execute(
        "SELECT list, position, element FROM turn_rows WHERE session_id = ? "
        "ORDER BY list, position",
        (session_id,),
    ).fetchall()
    return tuple((row[0], row[1], row[2]) for row in rows)


class SessionRow(NamedTuple):
    """A ``sessions`` row, without its head."""

    session_id: str
    item_count: int
    sequence: int
    updated_at: str
    status: str
    pending_approvals: str


_ROW = "session_id, item_count, sequence, updated_at, status, pending_approvals"


def _session_row(row: tuple[object, ...]) -> SessionRow:
    return SessionRow(
        str(row[0]), int(str(row[1])), int(str(row[2])), str(row[3]), str(row[4]), str(row[5])
    )


def read_session(
    connection: sqlite3.Connection, session_id: str
) -> tuple[object, object, SessionRow] | None:
    """The session's head and turn counts (as stored) and row, or ``None`` if it has none."""
    row = connection.execute(
        f"SELECT head, turn_counts, {_ROW} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        return None
    return row[0], row[1], _session_row(row[2:])


def read_started_calls(connection: sqlite3.Connection, session_id: str) -> frozenset[str]:
    """Every call claimed or recorded as started whose result was never saved."""
    rows = connection.execute(
        "SELECT call_id FROM started_calls WHERE session_id = ? AND answered = 0", (session_id,)
    ).fetchall()
    return frozenset(str(row[0]) for row in rows)


def read_claim(connection: sqlite3.Connection, session_id: str, call_id: str) -> bool:
    """Whether the call was ever claimed or recorded as started."""
    row = connection.execute(
        "SELECT 1 FROM started_calls WHERE session_id = ? AND call_id = ?", (session_id, call_id)
    ).fetchone()
    return row is not None


class ApprovalRow(NamedTuple):
    """An ``approvals`` row: a decision, its reason and edited input (JSON text) or NULLs."""

    call_id: str
    input_digest: str
    approved: bool
    decided_at: str
    reason: str | None
    edited_input: str | None


def read_approvals(connection: sqlite3.Connection, session_id: str) -> list[ApprovalRow]:
    """The session's decisions."""
    rows = connection.execute(
        "SELECT call_id, input_digest, approved, decided_at, reason, edited_input "
        "FROM approvals WHERE session_id = ?",
        (session_id,),
    ).fetchall()
    return [
        ApprovalRow(
            str(row[0]),
            str(row[1]),
            bool(row[2]),
            str(row[3]),
            None if row[4] is None else str(row[4]),
            None if row[5] is None else str(row[5]),
        )
        for row in rows
    ]


def read_lease(connection: sqlite3.Connection, session_id: str) -> LeaseRow | None:
    """The last lease granted on the session, or ``None``."""
    row = connection.execute(
        "SELECT owner, token, expires_at, released FROM leases WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    return LeaseRow(str(row[0]), int(row[1]), float(row[2]), bool(row[3]))


def next_token(connection: sqlite3.Connection) -> int:
    """A fencing token greater than every one granted before."""
    connection.execute(
        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'last_token'"
    )
    return int(connection.execute("SELECT value FROM meta WHERE key = 'last_token'").fetchone()[0])


def write_lease(connection: sqlite3.Connection, session_id: str, lease: LeaseRow) -> None:
    """Store ``lease`` as the session's current lease."""
    connection.execute(
        "INSERT INTO leases (session_id, owner, token, expires_at, released) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, "
        "token = excluded.token, expires_at = excluded.expires_at, released = excluded.released",
        (session_id, lease.owner, lease.token, lease.expires_at, int(lease.released)),
    )


def read_summaries(
    connection: sqlite3.Connection,
) -> list[tuple[SessionRow, frozenset[str], LeaseRow | None]]:
    """Sessions that are ready or await approval, oldest save first, with decisions and lease."""
    rows = connection.execute(
        f"SELECT {_ROW} FROM sessions WHERE status IN ('ready', 'awaiting_approval') "
        "ORDER BY sequence"
    ).fetchall()
    summaries = []
    for row in rows:
        session = _session_row(row)
        decided = frozenset(
            str(found[0])
            for found in connection.execute(
                "SELECT call_id FROM approvals WHERE session_id = ?", (session.session_id,)
            )
        )
        summaries.append((session, decided, read_lease(connection, session.session_id)))
    return summaries


def write_checkpoint(
    connection: sqlite3.Connection,
    session_id: str,
    *,
    head: str,
    items: tuple[str, ...],
    start: int,
    answered: Iterable[str],
    updated_at: str,
    status: str,
    pending_approvals: str,
    sequence: int,
    stored_rows: int | None = None,
    turn: Mapping[str, tuple[str, ...]] | None = None,
    turn_starts: Mapping[str, int] | None = None,
    stored_turn: Mapping[str, int] | None = None,
    turn_counts: str | None = None,
) -> int:
    """Replace the session's document, rewriting items from ``start``; return its sequence.

    Items before ``start`` are the ones already stored; ``stored_rows``, when
    known, is how many item rows the session has (none past it): rows from
    ``start`` on are deleted only if some exist. The turn rows of each list in
    ``turn_starts`` are rewritten from its start the same way (``turn``: the
    element texts, ``stored_turn``: how many rows each list has, when known;
    unknown, rows of no known list go too). Claims of the ``answered`` call
    ids are marked answered. Run inside a write transaction.
    """
    _write_turn_rows(connection, session_id, turn or {}, turn_starts or {}, stored_turn)
    if stored_rows is None or start < stored_rows:
        connection.execute(
            "DELETE FROM items WHERE session_id = ? AND position >= ?", (session_id, start)
        )
    if start < len(items):
        connection.executemany(
            "INSERT INTO items (session_id, position, item) VALUES (?, ?, ?)",
            [(session_id, position, items[position]) for position in range(start, len(items))],
        )
    connection.execute(
        "INSERT INTO sessions (session_id, head, item_count, sequence, updated_at, status, "
        "pending_approvals, turn_counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id) DO UPDATE "
        "SET head = excluded.head, item_count = excluded.item_count, "
        "sequence = excluded.sequence, updated_at = excluded.updated_at, "
        "status = excluded.status, pending_approvals = excluded.pending_approvals, "
        "turn_counts = excluded.turn_counts",
        (
            session_id,
            head,
            len(items),
            sequence,
            updated_at,
            status,
            pending_approvals,
            turn_counts,
        ),
    )
    answer_calls(connection, session_id, answered)
    return sequence


def _write_turn_rows(
    connection: sqlite3.Connection,
    session_id: str,
    turn: Mapping[str, tuple[str, ...]],
    starts: Mapping[str, int],
    stored: Mapping[str, int] | None,
) -> None:
    """Rewrite each turn list's rows from its start (see :func:`write_checkpoint`)."""
    if stored is None and starts:
        names = ", ".join("?" * len(starts))
        connection.execute(
            f"DELETE FROM turn_rows WHERE session_id = ? AND list NOT IN ({names})",
            (session_id, *starts),
        )
    rows: list[tuple[str, str, int, str]] = []  # every list's new rows: one statement
    for name, start in starts.items():
        if stored is None or start < stored.get(name, 0):
            connection.execute(
                "DELETE FROM turn_rows WHERE session_id = ? AND list = ? AND position >= ?",
                (session_id, name, start),
            )
        texts = turn.get(name, ())
        rows += [
            (session_id, name, position, texts[position]) for position in range(start, len(texts))
        ]
    if rows:
        connection.executemany(
            "INSERT INTO turn_rows (session_id, list, position, element) VALUES (?, ?, ?, ?)", rows
        )


def answer_calls(connection: sqlite3.Connection, session_id: str, call_ids: Iterable[str]) -> None:
    """Mark the claims of ``call_ids`` answered: no longer in doubt, never claimable."""
    rows = [(session_id, call_id) for call_id in call_ids]
    if rows:
        connection.executemany(
            "UPDATE started_calls SET answered = 1 WHERE session_id = ? AND call_id = ?", rows
        )


def insert_started_call(
    connection: sqlite3.Connection, session_id: str, call_id: str, tool_name: str, started_at: str
) -> None:
    """Record ``call_id`` as started (again, if it already was)."""
    connection.execute(
        "INSERT INTO started_calls (session_id, call_id, tool_name, started_at, answered) "
        "VALUES (?, ?, ?, ?, 0) ON CONFLICT (session_id, call_id) DO UPDATE SET "
        "tool_name = excluded.tool_name, started_at = excluded.started_at, answered = 0",
        (session_id, call_id, tool_name, started_at),
    )


def insert_claim(
    connection: sqlite3.Connection,
    session_id: str,
    call_id: str,
    tool_name: str,
    input_digest: str,
    started_at: str,
) -> None:
    """Record a claim; the caller checked none exists (the primary key refuses a second)."""
    connection.execute(
        "INSERT INTO started_calls "
        "(session_id, call_id, tool_name, started_at, input_digest, answered) "
        "VALUES (?, ?, ?, ?, ?, 0)",
        (session_id, call_id, tool_name, started_at, input_digest),
    )


def insert_approval(
    connection: sqlite3.Connection,
    session_id: str,
    call_id: str,
    input_digest: str,
    approved: bool,
    decided_at: str,
    reason: str | None = None,
    edited_input: str | None = None,
) -> None:
    """Record a decision (``edited_input`` as JSON text); the caller checked none exists."""
    connection.execute(
        "INSERT INTO approvals "
        "(session_id, call_id, input_digest, approved, decided_at, reason, edited_input) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, call_id, input_digest, int(approved), decided_at, reason, edited_input),
    )


def list_session_rows(connection: sqlite3.Connection) -> list[SessionRow]:
    """Every session row, most recently saved first."""
    rows = connection.execute(f"SELECT {_ROW} FROM sessions ORDER BY sequence DESC").fetchall()
    return [_session_row(row) for row in rows]


def delete_session(connection: sqlite3.Connection, session_id: str) -> bool:
    """Delete the session's document, items, turn rows, claims, lease and approvals; ``True``
    if saved."""
    # Its sequence stays used: the next save of any session is numbered past it.
    connection.execute(
        "UPDATE meta SET value = max(CAST(value AS INTEGER), "
        "(SELECT sequence FROM sessions WHERE session_id = ?)) "
        "WHERE key = 'last_sequence' AND EXISTS (SELECT 1 FROM sessions WHERE session_id = ?)",
        (session_id, session_id),
    )
    for table in ("items", "turn_rows", "started_calls", "leases", "approvals"):
        connection.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    deleted = connection.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
    return deleted.rowcount > 0
