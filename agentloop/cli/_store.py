"""The ``--store`` argument of every command: a path or a URL, opened the same way.

See :mod:`agentloop.store._location`: a SQLite file (``sessions.db``,
``sqlite:///sessions.db``) or a PostgreSQL database (``postgresql://...``,
which needs the postgres extra). Bad values are refused before anything runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import is_installed
from ..store._location import StoreLocation, parse_store_location

if TYPE_CHECKING:
    from ..store._postgres import PostgresSessionStore
    from ..store._sqlite import SqliteSessionStore

__all__ = ["open_session_store", "require_postgres", "sqlite_argument"]


def require_postgres() -> None:
    """Raise the postgres extra's ``ModuleNotFoundError`` (one line in the CLI) if missing."""
    if not is_installed("psycopg"):
        raise ModuleNotFoundError("No module named 'psycopg'", name="psycopg")


def open_session_store(
    value: str,
) -> tuple[SqliteSessionStore | PostgresSessionStore, StoreLocation]:
    """The (unopened) store ``--store value`` names, and where it is."""
    location = parse_store_location(value)
    if location.kind == "postgres":
        require_postgres()
        from ..store._postgres import PostgresSessionStore

        return PostgresSessionStore(location.target), location
    from ..store._sqlite import SqliteSessionStore

    return SqliteSessionStore(location.target), location


def sqlite_argument(value: str, command: str) -> str:
    """The SQLite file of ``--store value`` for a command that only writes SQLite (and
    creates its directory)."""
    location = parse_store_location(value, makes_directories=True)
    if location.kind != "sqlite":
        from ..core._errors import InvalidInputError

        raise InvalidInputError(
            f"--store {value!r}: agentloop {command} saves to a SQLite file; expected PATH.db "
            "or sqlite:///PATH.db"
        )
    return location.target
