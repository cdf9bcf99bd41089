"""Every SQL statement of the PostgreSQL session store: schema, migrations, row access.

Schema (versions in ``agentloop_schema``, one row per applied migration)::

    agentloop_sessions(session_id, head, item_count,   one row per saved session; version
        version, updated_at, status, pending_approvals,  comes from agentloop_versions;
        turn_counts)                                     the head holds [] for the turn's
                                                         lists kept as rows, turn_counts
                                                         how many per list (JSON or NULL)
    agentloop_items(session_id, position, item)       the transcript, one JSON text per row
    agentloop_turn_rows(session_id, list, position,   the turn's growing lists (its items,
        element)                                      tool calls, model calls), one per row
    agentloop_claims(session_id, call_id, tool_name,  calls claimed or recorded as started;
        input_digest, claimed_at, answered)           kept after their result is saved
    agentloop_leases(session_id, owner, token,        the last lease granted per session;
        expires_at, released)                         token comes from agentloop_tokens
    agentloop_approvals(session_id, call_id,          decisions recorded per call, with
        input_digest, approved, decided_at,           the reason given and the edited input
        reason, edited_input)                         (JSON text; NULL: the call's own input)

Heads and items are ``text``, not ``jsonb``: jsonb reorders keys and drops
duplicates, and a loaded document must be deep-equal to the saved one.
Every write on one session first takes a transaction-level advisory lock on
the session id, so writes of one session are serialized across processes;
``acquire_ready`` picks candidates with ``FOR UPDATE SKIP LOCKED``, so
workers polling at once never wait on each other's rows. Synchronous
functions over a psycopg connection; the store runs them in worker threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from ..core._errors import CheckpointError
from ._rules import LeaseRow

__all__ = [
    "MIGRATIONS",
    "NO_TURN",
    "ApprovalRow",
    "SaveState",
    "SessionRow",
    "SummaryRow",
    "TurnWrite",
    "delete_session",
    "ensure_schema",
    "insert_approval",
    "insert_claim",
    "insert_started_call",
    "list_session_rows",
    "lock_ready_candidates",
    "lock_session",
    "next_token",
    "now",
    "read_approvals",
    "read_claimed",
    "read_for_save",
    "read_items",
    "read_lease",
    "read_session",
    "read_started_calls",
    "read_summaries",
    "read_turn_rows",
    "try_lock_session",
    "write_checkpoint",
    "write_lease",
]

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE SEQUENCE agentloop_versions;
    CREATE SEQUENCE agentloop_tokens;
    CREATE TABLE agentloop_sessions (
        session_id text PRIMARY KEY,
        head text NOT NULL,
        item_count integer NOT NULL,
        version bigint NOT NULL,
        updated_at timestamptz NOT NULL,
        status text NOT NULL,
        pending_approvals jsonb NOT NULL
    );
    CREATE INDEX agentloop_sessions_by_version ON agentloop_sessions (version);
    CREATE INDEX agentloop_sessions_by_status ON agentloop_sessions (status, version);
    CREATE TABLE agentloop_items (
        session_id text NOT NULL,
        position integer NOT NULL,
        item text NOT NULL,
        PRIMARY KEY (session_id, position)
    );
    CREATE TABLE agentloop_claims (
        session_id text NOT NULL,
        call_id text NOT NULL,
        tool_name text NOT NULL,
        input_digest text,
        claimed_at timestamptz NOT NULL,
        answered boolean NOT NULL DEFAULT false,
        PRIMARY KEY (session_id, call_id)
    );
    CREATE TABLE agentloop_leases (
        session_id text PRIMARY KEY,
        owner text NOT NULL,
        token bigint NOT NULL,
        expires_at timestamptz NOT NULL,
        released boolean NOT NULL
    );
    CREATE TABLE agentloop_approvals (
        session_id text NOT NULL,
        call_id text NOT NULL,
        input_digest text NOT NULL,
        approved boolean NOT NULL,
        decided_at timestamptz NOT NULL,
        PRIMARY KEY (session_id, call_id)
    );
    """,
    """
    ALTER TABLE agentloop_approvals ADD COLUMN reason text;
    ALTER TABLE agentloop_approvals ADD COLUMN edited_input text;
    """,
    """
    ALTER TABLE agentloop_sessions ADD COLUMN turn_counts text;
    CREATE TABLE agentloop_turn_rows (
        session_id text NOT NULL,
        list text NOT NULL,
        position integer NOT NULL,
        element text NOT NULL,
        PRIMARY KEY (session_id, list, position)
    );
    """,
)
"""Migration ``n`` (1-based) brings the schema from version ``n - 1`` to ``n`` (version 3:
the turn's lists as rows; older heads hold them inline, with ``turn_counts`` NULL)."""

_MIGRATION_LOCK = 0x6167_6C6F_6F70  # "agloop": serializes concurrent migrators


def ensure_schema(connection: Any, where: str) -> int:
    """Create or migrate the schema to ``len(MIGRATIONS)``; return the version found before.

    Run inside a transaction; concurrent callers wait on an advisory lock.
    ``CheckpointError`` when the database holds a newer schema.
    """
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    connection.execute(
        "CREATE TABLE IF NOT EXISTS agentloop_schema "
        "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    row = connection.execute("SELECT coalesce(max(version), 0) FROM agentloop_schema").fetchone()
    found = int(row[0])
    if found > len(MIGRATIONS):
        raise CheckpointError(
            f"cannot open session store {where}: expected schema version {len(MIGRATIONS)}, "
            f"found {found}; it was written by a newer agentloop, upgrade agentloop to read it"
        )
    for version in range(found + 1, len(MIGRATIONS) + 1):
        for statement in MIGRATIONS[version - 1].split(";"):
            if statement.strip():
                connection.execute(statement)
        connection.execute("INSERT INTO agentloop_schema (version) VALUES (%s)", (version,))
    return found


def now(connection: Any) -> float:
    """The database's clock, in seconds since the epoch (leases expire by it)."""
    return float(connection.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])


def lock_session(connection: Any, session_id: str) -> None:
    """Serialize this transaction's writes of ``session_id`` with every other process's."""
    connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("agentloop:" + session_id,))


def try_lock_session(connection: Any, session_id: str) -> bool:
    """:func:`lock_session` without waiting; ``False`` if another transaction holds it."""
    row = connection.execute(
        "SELECT pg_try_advisory_xact_lock(hashtext(%s))", ("agentloop:" + session_id,)
    ).fetchone()
    return bool(row[0])


class SessionRow(NamedTuple):
    """An ``agentloop_sessions`` row, without its head."""

    session_id: str
    item_count: int
    version: int
    updated_at: datetime
    status: str
    pending_approvals: Any


_ROW = "session_id, item_count, version, updated_at, status, pending_approvals"


def read_session(connection: Any, session_id: str) -> Any:
    """``(head, turn_counts, SessionRow)`` for the session, or ``None`` if it has no document."""
    row = connection.execute(
        f"SELECT head, turn_counts, {_ROW} FROM agentloop_sessions WHERE session_id = %s",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    return row[0], row[1], SessionRow(*row[2:])


def read_turn_rows(connection: Any, session_id: str) -> list[tuple[object, object, object]]:
    """The session's ``(list, position, element)`` turn rows, by list and position."""
    rows = connection.execute(
        "SELECT list, position, element FROM agentloop_turn_rows WHERE session_id = %s "
        'ORDER BY list COLLATE "C", position',
        (session_id,),
    ).fetchall()
    return [(row[0], row[1], row[2]) for row in rows]


def read_items(connection: Any, session_id: str) -> list[tuple[object, object]]:
    """The session's ``(position, item)`` rows in position order, as stored."""
    rows = connection.execute(
        "SELECT position, item FROM agentloop_items WHERE session_id = %s ORDER BY position",
        (session_id,),
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


class SaveState(NamedTuple):
    """What a save checks before it writes: the lease, the server's clock, the version."""

    lease: LeaseRow | None
    now: float
    version: int | None


_READ_FOR_SAVE = (
    "SELECT l.owner, l.token, extract(epoch FROM l.expires_at), l.released, s.version, "
    "extract(epoch FROM clock_timestamp()) FROM (VALUES (1)) AS one "
    "LEFT JOIN LATERAL (SELECT owner, token, expires_at, released FROM agentloop_leases "
    "WHERE session_id = %(id)s FOR UPDATE) AS l ON true "
    "LEFT JOIN LATERAL (SELECT version FROM agentloop_sessions "
    "WHERE session_id = %(id)s FOR UPDATE) AS s ON true"
)


def read_for_save(connection: Any, session_id: str) -> Callable[[], SaveState]:
    """Lock the session (:func:`lock_session`), then read its lease and version, both rows
    locked for update, and the clock; returns the function that waits for the rows.

    In pipeline mode the statements are on their way when this returns, and
    the server runs them while the caller works; the reads are a statement
    of their own, after the lock's, so the server starts them once the lock
    is granted and they see every write committed before it.
    """
    lock_session(connection, session_id)
    cursor = connection.execute(_READ_FOR_SAVE, {"id": session_id})

    def rows() -> SaveState:
        owner, token, expires_at, released, version, now = cursor.fetchone()
        lease = None if token is None else LeaseRow(owner, int(token), float(expires_at), released)
        return SaveState(lease, float(now), None if version is None else int(version))

    return rows


_WRITE_CHECKPOINT = (
    "WITH new_items AS (INSERT INTO agentloop_items (session_id, position, item) "
    "SELECT %(id)s, position, item FROM unnest(%(positions)s::integer[], %(items)s::text[]) "
    "AS new (position, item)), "
    "new_turn_rows AS (INSERT INTO agentloop_turn_rows (session_id, list, position, element) "
    "SELECT %(id)s, list, position, element FROM unnest(%(turn_lists)s::text[], "
    "%(turn_positions)s::integer[], %(turn_texts)s::text[]) AS new (list, position, element)), "
    "answered AS (UPDATE agentloop_claims SET answered = true "
    "WHERE session_id = %(id)s AND call_id = ANY(%(answered)s::text[])) "
    "INSERT INTO agentloop_sessions (session_id, head, item_count, version, updated_at, "
    "status, pending_approvals, turn_counts) VALUES (%(id)s, %(head)s, %(count)s, "
    "nextval('agentloop_versions'), clock_timestamp(), %(status)s, %(pending)s::jsonb, "
    "%(turn_counts)s) "
    "ON CONFLICT (session_id) DO UPDATE SET head = excluded.head, "
    "item_count = excluded.item_count, version = excluded.version, "
    "updated_at = excluded.updated_at, status = excluded.status, "
    "pending_approvals = excluded.pending_approvals, turn_counts = excluded.turn_counts "
    "RETURNING version, updated_at"
)


class TurnWrite(NamedTuple):
    """What a save writes of the turn's list rows: the element texts of each list, where
    each list's rows are rewritten from, and the counts stored beside the head."""

    texts: Mapping[str, tuple[str, ...]]
    starts: Mapping[str, int]
    counts: str | None


NO_TURN = TurnWrite({}, {}, None)


def write_checkpoint(
    connection: Any,
    session_id: str,
    *,
    head: str,
    items: tuple[str, ...],
    start: int,
    answered: Iterable[str],
    status: str,
    pending_approvals: str,
    stored_rows: int | None = None,
    turn: TurnWrite = NO_TURN,
    stored_turn: Mapping[str, int] | None = None,
) -> Any:
    """Replace the session's document from item ``start`` on, mark the claims of
    ``answered`` answered; one statement (more when old rows must go first).

    ``stored_rows``, when known, is how many item rows the session has (none
    past it): rows from ``start`` on are deleted only if some exist. The turn
    rows of each list are rewritten from ``turn.starts`` the same way
    (``stored_turn``: how many rows each list has, when known; unknown, rows
    of no known list go too). Returns the cursor whose row is the new
    ``(version, updated_at)``: in pipeline mode it is there once the pipeline
    syncs.
    """
    if stored_rows is None or start < stored_rows:
        connection.execute(
            "DELETE FROM agentloop_items WHERE session_id = %s AND position >= %s",
            (session_id, start),
        )
    if stored_turn is None:
        connection.execute(
            "DELETE FROM agentloop_turn_rows WHERE session_id = %s AND list <> ALL(%s::text[])",
            (session_id, _text_array(turn.starts)),
        )
    gone = [
        (name, start)
        for name, start in turn.starts.items()
        if stored_turn is None or start < stored_turn.get(name, 0)
    ]
    if gone:
        connection.execute(
            "DELETE FROM agentloop_turn_rows AS t USING unnest(%s::text[], %s::integer[]) "
            "AS gone (list, start) WHERE t.session_id = %s AND t.list = gone.list "
            "AND t.position >= gone.start",
            (
                _text_array(name for name, _ in gone),
                _integer_array(start for _, start in gone),
                session_id,
            ),
        )
    return connection.execute(
        _WRITE_CHECKPOINT,
        _written(session_id, head, items, start, answered, status, pending_approvals, turn),
    )


def _written(
    session_id: str,
    head: str,
    items: tuple[str, ...],
    start: int,
    answered: Iterable[str],
    status: str,
    pending_approvals: str,
    turn: TurnWrite,
) -> dict[str, Any]:
    """The parameters both checkpoint writes share: the rows from ``start`` on and the head."""
    names: list[str] = []
    positions: list[int] = []
    texts: list[str] = []
    for name, start_at in turn.starts.items():
        found = turn.texts.get(name, ())
        names += [name] * max(0, len(found) - start_at)
        positions += range(start_at, len(found))
        texts += found[start_at:]
    return {
        "turn_lists": _text_array(names),
        "turn_positions": _integer_array(positions),
        "turn_texts": _text_array(texts),
        "turn_counts": turn.counts,
        "id": session_id,
        "positions": _integer_array(range(start, len(items))),
        "items": _text_array(items[start:]),
        "answered": _text_array(answered),
        "head": head,
        "count": len(items),
        "status": status,
        "pending": pending_approvals,
    }


def _text_array(values: Iterable[str]) -> str:
    """A ``text[]`` literal of ``values`` (cheaper for psycopg to send than a list)."""
    quoted = ('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values)
    return "{" + ",".join(quoted) + "}"


def _integer_array(values: Iterable[int]) -> str:
    """An ``integer[]`` literal of ``values``."""
    return "{" + ",".join(map(str, values)) + "}"


_APPEND_GUARD = (
    "guard AS (SELECT coalesce(s.version = %(based_on)s, false) "
    "AND (%(expected)s::bigint IS NULL OR %(expected)s::bigint = s.version) "
    "AND CASE WHEN %(token)s::bigint IS NULL "
    "THEN l.token IS NULL OR l.released OR l.expires_at <= clock_timestamp() "
    "ELSE coalesce(l.token = %(token)s::bigint AND NOT l.released, false) END AS ok "
    "FROM (VALUES (1)) AS one "
    "LEFT JOIN LATERAL (SELECT token, expires_at, released FROM agentloop_leases "
    "WHERE session_id = %(id)s FOR UPDATE) AS l ON true "
    "LEFT JOIN LATERAL (SELECT version FROM agentloop_sessions "
    "WHERE session_id = %(id)s FOR UPDATE) AS s ON true)"
)
"""Whether an appending save may write: the session is at the version the caller knows
(``based_on``), the save's ``expected`` version matches, and the fence holds exactly as
:func:`~agentloop.store._rules.check_fence` decides (a lease not released, and for an
unfenced save not live either; the server's clock)."""

_APPEND_CHECKPOINT = (
    "WITH " + _APPEND_GUARD + ", "
    "new_items AS (INSERT INTO agentloop_items (session_id, position, item) "
    "SELECT %(id)s, position, item FROM unnest(%(positions)s::integer[], %(items)s::text[]) "
    "AS new (position, item) WHERE (SELECT ok FROM guard)), "
    "new_turn_rows AS (INSERT INTO agentloop_turn_rows (session_id, list, position, element) "
    "SELECT %(id)s, list, position, element FROM unnest(%(turn_lists)s::text[], "
    "%(turn_positions)s::integer[], %(turn_texts)s::text[]) AS new (list, position, element) "
    "WHERE (SELECT ok FROM guard)), "
    "answered AS (UPDATE agentloop_claims SET answered = true "
    "WHERE session_id = %(id)s AND call_id = ANY(%(answered)s::text[]) "
    "AND (SELECT ok FROM guard)) "
    "INSERT INTO agentloop_sessions (session_id, head, item_count, version, updated_at, "
    "status, pending_approvals, turn_counts) SELECT %(id)s, %(head)s, %(count)s, "
    "nextval('agentloop_versions'), clock_timestamp(), %(status)s, %(pending)s::jsonb, "
    "%(turn_counts)s WHERE (SELECT ok FROM guard) "
    "ON CONFLICT (session_id) DO UPDATE SET head = excluded.head, "
    "item_count = excluded.item_count, version = excluded.version, "
    "updated_at = excluded.updated_at, status = excluded.status, "
    "pending_approvals = excluded.pending_approvals, turn_counts = excluded.turn_counts "
    "RETURNING version, updated_at"
)


def append_checkpoint(
    connection: Any,
    session_id: str,
    *,
    based_on: int,
    expected_version: int | None,
    fencing_token: int | None,
    head: str,
    items: tuple[str, ...],
    start: int,
    answered: Iterable[str],
    status: str,
    pending_approvals: str,
    turn: TurnWrite = NO_TURN,
) -> Any:
    """Append ``items[start:]`` (and each turn list's texts from its start) and replace the
    head, in one statement, only if the session is at version ``based_on`` (holding
    exactly ``start`` item rows and each turn list's start rows, as the caller knows) and
    the version and fence checks pass; nothing is written otherwise.

    Returns the cursor whose row is the new ``(version, updated_at)``; no row when
    nothing was written (the caller then saves the long way, which says why).
    Run after :func:`lock_session`, in the same transaction.
    """
    return connection.execute(
        _APPEND_CHECKPOINT,
        {
            **_written(session_id, head, items, start, answered, status, pending_approvals, turn),
            "based_on": based_on,
            "expected": expected_version,
            "token": fencing_token,
        },
    )


def read_started_calls(connection: Any, session_id: str) -> frozenset[str]:
    """Calls claimed or recorded as started whose result was never saved."""
    rows = connection.execute(
        "SELECT call_id FROM agentloop_claims WHERE session_id = %s AND NOT answered",
        (session_id,),
    ).fetchall()
    return frozenset(str(row[0]) for row in rows)


def read_claimed(connection: Any, session_id: str, call_id: str) -> bool:
    """Whether the call was ever claimed or recorded as started."""
    row = connection.execute(
        "SELECT 1 FROM agentloop_claims WHERE session_id = %s AND call_id = %s",
        (session_id, call_id),
    ).fetchone()
    return row is not None


def insert_started_call(connection: Any, session_id: str, call_id: str, tool_name: str) -> None:
    """Record ``call_id`` as started (again, if it was)."""
    connection.execute(
        "INSERT INTO agentloop_claims (session_id, call_id, tool_name, claimed_at, answered) "
        "VALUES (%s, %s, %s, clock_timestamp(), false) ON CONFLICT (session_id, call_id) DO "
        "UPDATE SET tool_name = excluded.tool_name, claimed_at = excluded.claimed_at, "
        "answered = false",
        (session_id, call_id, tool_name),
    )


def insert_claim(
    connection: Any, session_id: str, call_id: str, tool_name: str, digest: str
) -> datetime | None:
    """Insert a claim; its time, or ``None`` if the call was claimed already."""
    row = connection.execute(
        "INSERT INTO agentloop_claims "
        "(session_id, call_id, tool_name, input_digest, claimed_at, answered) "
        "VALUES (%s, %s, %s, %s, clock_timestamp(), false) "
        "ON CONFLICT (session_id, call_id) DO NOTHING RETURNING claimed_at",
        (session_id, call_id, tool_name, digest),
    ).fetchone()
    return None if row is None else row[0]


class ApprovalRow(NamedTuple):
    """An ``agentloop_approvals`` row: a decision, its reason and edited input (JSON text)."""

    call_id: str
    input_digest: str
    approved: bool
    decided_at: datetime
    reason: str | None
    edited_input: str | None


def read_approvals(connection: Any, session_id: str) -> list[ApprovalRow]:
    """The session's decisions."""
    rows = connection.execute(
        "SELECT call_id, input_digest, approved, decided_at, reason, edited_input "
        "FROM agentloop_approvals WHERE session_id = %s",
        (session_id,),
    ).fetchall()
    return [ApprovalRow(str(r[0]), str(r[1]), bool(r[2]), r[3], r[4], r[5]) for r in rows]


def insert_approval(
    connection: Any,
    session_id: str,
    call_id: str,
    digest: str,
    approved: bool,
    reason: str | None = None,
    edited_input: str | None = None,
) -> datetime:
    """Record a decision (the caller checked none exists); return its time."""
    row = connection.execute(
        "INSERT INTO agentloop_approvals "
        "(session_id, call_id, input_digest, approved, decided_at, reason, edited_input) "
        "VALUES (%s, %s, %s, %s, clock_timestamp(), %s, %s) RETURNING decided_at",
        (session_id, call_id, digest, approved, reason, edited_input),
    ).fetchone()
    return row[0]  # type: ignore[no-any-return]


def read_lease(connection: Any, session_id: str) -> LeaseRow | None:
    """The last lease granted on the session (row locked for update), or ``None``."""
    row = connection.execute(
        "SELECT owner, token, extract(epoch FROM expires_at), released FROM agentloop_leases "
        "WHERE session_id = %s FOR UPDATE",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    return LeaseRow(str(row[0]), int(row[1]), float(row[2]), bool(row[3]))


def next_token(connection: Any) -> int:
    """A fencing token greater than every one granted before."""
    return int(connection.execute("SELECT nextval('agentloop_tokens')").fetchone()[0])


def write_lease(connection: Any, session_id: str, lease: LeaseRow) -> None:
    """Store ``lease`` as the session's current lease."""
    connection.execute(
        "INSERT INTO agentloop_leases (session_id, owner, token, expires_at, released) "
        "VALUES (%s, %s, %s, to_timestamp(%s), %s) ON CONFLICT (session_id) DO UPDATE SET "
        "owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at, "
        "released = excluded.released",
        (session_id, lease.owner, lease.token, lease.expires_at, lease.released),
    )


class SummaryRow(NamedTuple):
    """A session that is ready or awaits approval, with its decided calls and lease state."""

    session: SessionRow
    decided: frozenset[str]
    leased: bool


_SUMMARY = (
    f"SELECT {', '.join('s.' + c for c in _ROW.split(', '))}, "
    "ARRAY(SELECT a.call_id FROM agentloop_approvals a WHERE a.session_id = s.session_id), "
    "coalesce(NOT l.released AND l.expires_at > clock_timestamp(), false) "
    "FROM agentloop_sessions s LEFT JOIN agentloop_leases l USING (session_id) "
)


def read_summaries(connection: Any) -> list[SummaryRow]:
    """Sessions that are ready or await approval, oldest save first."""
    rows = connection.execute(
        _SUMMARY + "WHERE s.status IN ('ready', 'awaiting_approval') ORDER BY s.version"
    ).fetchall()
    return [SummaryRow(SessionRow(*row[:6]), frozenset(row[6]), bool(row[7])) for row in rows]


def lock_ready_candidates(connection: Any, limit: int) -> list[SummaryRow]:
    """Up to ``limit`` ready, unleased sessions, oldest first, locked ``FOR UPDATE SKIP LOCKED``.

    Ready: status ``ready``, or ``awaiting_approval`` with a decision recorded
    for every pending call. Rows another transaction holds are skipped, not
    waited for, so workers polling at once each get other sessions.
    """
    rows = connection.execute(
        _SUMMARY + "WHERE (s.status = 'ready' OR (s.status = 'awaiting_approval' "
        "AND jsonb_array_length(s.pending_approvals) > 0 AND NOT EXISTS ("
        "SELECT 1 FROM jsonb_array_elements_text(s.pending_approvals) AS p(call_id) "
        "WHERE NOT EXISTS (SELECT 1 FROM agentloop_approvals a "
        "WHERE a.session_id = s.session_id AND a.call_id = p.call_id)))) "
        "AND (l.session_id IS NULL OR l.released OR l.expires_at <= clock_timestamp()) "
        "ORDER BY s.version LIMIT %s FOR UPDATE OF s SKIP LOCKED",
        (limit,),
    ).fetchall()
    return [SummaryRow(SessionRow(*row[:6]), frozenset(row[6]), bool(row[7])) for row in rows]


def list_session_rows(connection: Any) -> list[SessionRow]:
    """Every session row, most recently saved first."""
    rows = connection.execute(
        f"SELECT {_ROW} FROM agentloop_sessions ORDER BY version DESC"
    ).fetchall()
    return [SessionRow(*row) for row in rows]


def delete_session(connection: Any, session_id: str) -> bool:
    """Delete the session's document, items, claims, lease and approvals; ``True`` if saved."""
    for table in (
        "agentloop_items",
        "agentloop_turn_rows",
        "agentloop_claims",
        "agentloop_leases",
        "agentloop_approvals",
    ):
        connection.execute(f"DELETE FROM {table} WHERE session_id = %s", (session_id,))
    deleted = connection.execute(
        "DELETE FROM agentloop_sessions WHERE session_id = %s", (session_id,)
    )
    return bool(deleted.rowcount > 0)
