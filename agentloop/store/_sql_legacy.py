"""Older SQL stores' schema steps: the table-per-kind layout moved, question statuses.

SQLite schema 1 to 5 and PostgreSQL migrations 1 to 3 kept a table per kind
of row, with fewer columns the older they are. :func:`move_legacy_rows` reads
whichever columns a database has (a missing one reads as its default, as the
old migrations filled it) and writes each session's head, lists and keyed rows
as :class:`BackendSessionStore` keeps them. :func:`restatus_questions` gives
heads stored as awaiting input while resting on a question (SQLite schema 7,
PostgreSQL migration 5) or a call in doubt (8, 6) their own status. Each runs
inside the transaction that records the new schema version (docs/store.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

import attrs

from ..core._errors import CheckpointError
from ..loop._session_store import SessionStatus, summarize
from ._heads import CLAIMS, DECISIONS
from ._records import (
    ITEMS,
    TURN_LIST_PREFIX,
    ClaimRow,
    DecisionRow,
    LeaseRecord,
    SessionMeta,
    decode_record,
    encode_record,
)

__all__ = ["move_legacy_rows", "restatus_questions"]

_COLUMNS: dict[str, dict[str, str]] = {
    role: {column.partition("=")[0]: column.partition("=")[2] for column in columns.split()}
    for role, columns in {
        "sessions": "session_id head item_count version updated_at status=NULL "
        "pending_approvals=NULL turn_counts=NULL",
        "items": "session_id position item",
        "turn_rows": "session_id list position element",
        "claims": "session_id call_id tool_name claimed_at input_digest=NULL answered=0",
        "leases": "session_id owner token expires_at released",
        "approvals": "session_id call_id input_digest approved decided_at reason=NULL "
        "edited_input=NULL",
    }.items()
}
"""Each old table's columns by its role, in the order read; the default stands for a column
a table lacks."""


def move_legacy_rows(
    connection: Any,
    names: dict[str, str],
    columns: Callable[[Any, str], set[str]],
    sql: Callable[[str], str],
    where: str,
) -> None:
    """Copy the old tables' rows into the new tables, then drop the old ones.

    ``names`` renames a role's table or a column (SQLite's ``started_calls``,
    ``sequence``, ``started_at``); a table's name is the dialect's prefix and its role's
    name. ``columns(connection, table)`` is the set of a table's columns (empty if it
    does not exist); ``sql`` puts the dialect's prefix (``{t}``) and placeholders
    (``?``) into a statement. A row that does not convert raises
    ``CheckpointError`` naming it and the store (``where``); the caller's
    transaction then rolls back.
    """

    def write(table: str, rows: Iterable[tuple[Any, ...]]) -> None:
        connection.cursor().executemany(sql(f"INSERT INTO {{t}}{table} VALUES (?, ?, ?, ?)"), rows)

    tables = {role: sql("{t}" + names.get(role, role)) for role in _COLUMNS}
    found = {role: columns(connection, table) for role, table in tables.items()}
    read = {role: _read(connection, tables[role], found[role], names, role) for role in tables}
    metas: dict[str, SessionMeta] = {}
    documents: dict[str, str] = {}
    for row in read["sessions"]:
        metas[row[0]], documents[row[0]] = _converted("sessions", row, _session, where), row[1]
    for row in read["leases"]:
        lease = _converted("leases", row, _lease, where)
        metas[row[0]] = attrs.evolve(metas.get(row[0], SessionMeta()), lease=lease)
    keyed = [_converted("claims", row, _claim, where) for row in read["claims"]]
    keyed += [_converted("approvals", row, _decision, where) for row in read["approvals"]]
    for session_id, _table, _key, _text in keyed:
        metas.setdefault(session_id, SessionMeta())
    write(
        "heads",
        [(sid, 1, encode_record(meta), documents.get(sid)) for sid, meta in metas.items()],
    )
    lists = [(sid, ITEMS, position, text) for sid, position, text in read["items"]]
    lists += [(s, TURN_LIST_PREFIX + name, p, text) for s, name, p, text in read["turn_rows"]]
    write("lists", lists)
    write("keyed", keyed)
    for role, table in tables.items():
        if found[role]:
            connection.execute(f"DROP TABLE {table}")


_T = TypeVar("_T")


def _converted(
    role: str, row: tuple[Any, ...], convert: Callable[[tuple[Any, ...]], _T], where: str
) -> _T:
    try:
        return convert(row)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        key = row[0] if role in ("sessions", "leases") else row[:2]
        raise CheckpointError(
            f"cannot open session store {where}: moving its rows onto the storage protocol's "
            f"tables failed at {role} row {key!r}: {error}; nothing was changed: repair or "
            "delete that row, then open the store again"
        ) from None


def _lease(row: tuple[Any, ...]) -> LeaseRecord:
    _session_id, owner, token, expires_at, released = row
    return LeaseRecord(
        owner=owner, token=int(token), expires_at=_epoch(expires_at), released=bool(released)
    )


def _read(
    connection: Any, table: str, found: set[str], names: dict[str, str], role: str
) -> list[tuple[Any, ...]]:
    """The old table's rows, with its role's columns in order (none if it has no columns)."""
    if not found:
        return []
    selected = [
        names.get(column, column) if names.get(column, column) in found else default
        for column, default in _COLUMNS[role].items()
    ]
    return [tuple(row) for row in connection.execute(f"SELECT {', '.join(selected)} FROM {table}")]


def _session(row: tuple[Any, ...]) -> SessionMeta:
    _id, head, item_count, version, updated_at, status, pending, turn_counts = row
    if status is None:  # schema 1: derived from the head, as its migration did
        try:
            found, calls = summarize(json.loads(head))
        except (TypeError, ValueError, AttributeError):
            found, calls = SessionStatus.AWAITING_INPUT, ()
    else:
        found = SessionStatus(status) if status in _STATUSES else SessionStatus.AWAITING_INPUT
        if isinstance(pending, str):
            pending = json.loads(pending)
        calls = tuple(str(call_id) for call_id in pending or ())
    return SessionMeta(
        version=int(version),
        updated_at=_epoch(updated_at),
        status=found,
        pending=calls,
        item_count=int(item_count),
        turn_counts=turn_counts,
    )


_STATUSES = frozenset(status.value for status in SessionStatus)


def _claim(row: tuple[Any, ...]) -> tuple[str, str, str, str]:
    session_id, call_id, tool_name, claimed_at, input_digest, answered = row
    claim = ClaimRow(
        tool_name=tool_name,
        input_digest=input_digest,
        claimed_at=_epoch(claimed_at),
        answered=bool(answered),
    )
    return session_id, CLAIMS, call_id, encode_record(claim)


def _decision(row: tuple[Any, ...]) -> tuple[str, str, str, str]:
    session_id, call_id, input_digest, approved, decided_at, reason, edited_input = row
    decision = DecisionRow(
        input_digest=input_digest,
        approved=bool(approved),
        decided_at=_epoch(decided_at),
        reason=reason,
        edited_input=edited_input,
    )
    return session_id, DECISIONS, call_id, encode_record(decision)


def _epoch(value: object) -> float:
    """A stored time (ISO text, a datetime or seconds) in seconds since the epoch."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value).timestamp()
    return float(value)  # type: ignore[arg-type]


_RESTATUSED = {
    "AWAITING_ANSWER": SessionStatus.AWAITING_ANSWER,
    "AWAITING_RESOLUTION": SessionStatus.AWAITING_RESOLUTION,
}


def restatus_questions(connection: Any, sql: Callable[[str], str]) -> None:
    """Give each head resting on a question or a call in doubt (document state
    ``AWAITING_ANSWER``, ``AWAITING_RESOLUTION``) but stored as awaiting input its status
    (``summarize``'s, with the question ids as pending). Every other head, and one whose
    meta or document does not decode, is left byte for byte; running it again changes
    nothing."""
    heads = connection.execute(sql("SELECT session_id, meta, document FROM {t}heads")).fetchall()
    for session_id, meta_text, document in heads:
        if document is None or not any(f'"{state}"' in document for state in _RESTATUSED):
            continue  # cheap: no head of another state is decoded
        try:
            meta = decode_record(meta_text, SessionMeta, session_id, "its head's meta")
            parsed = json.loads(document)
        except Exception:
            continue  # left as it is: a load reports it
        if not isinstance(parsed, dict) or meta.status is not SessionStatus.AWAITING_INPUT:
            continue
        status, pending = summarize(parsed)
        if status in _RESTATUSED.values():
            new = encode_record(attrs.evolve(meta, status=status, pending=pending))
            connection.execute(
                sql("UPDATE {t}heads SET meta = ? WHERE session_id = ?"), (new, session_id)
            )
