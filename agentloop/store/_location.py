"""Where a store lives: one argument, a file path or a URL, checked before anything opens.

``sqlite:///sessions.db`` (relative to the current directory, as in
SQLAlchemy), ``sqlite:////srv/sessions.db`` (four slashes: absolute) and a
plain path all name a SQLite file; ``postgresql://...`` (or ``postgres://``)
a PostgreSQL database. A value that cannot be opened is refused at once with
what to do, not later with SQLite's "unable to open database file".
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, NamedTuple

from ..core._errors import InvalidInputError

__all__ = ["StoreLocation", "parse_store_location", "sqlite_file"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_POSTGRES = ("postgresql", "postgres")
EXPECTED = "a file path (sessions.db), sqlite:///PATH.db or postgresql://USER@HOST/DB"


class StoreLocation(NamedTuple):
    """A parsed store argument: ``kind`` and the SQLite path or the PostgreSQL URL."""

    kind: Literal["sqlite", "postgres"]
    target: str


def parse_store_location(
    value: object, operation: str = "--store", *, makes_directories: bool = False
) -> StoreLocation:
    """``value`` (a path or URL) as a :class:`StoreLocation`; ``InvalidInputError`` if it
    names nothing a store can open (see the module docstring). ``makes_directories``:
    the caller creates a missing parent directory (it is not refused)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise InvalidInputError(f"{operation}: expected {EXPECTED}, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{operation}: the store is an empty string; expected {EXPECTED}")
    scheme = _SCHEME.match(value)
    if scheme is None:
        return StoreLocation("sqlite", _checked_path(value, value, operation, makes_directories))
    name = scheme.group(1).lower()
    if name in _POSTGRES:
        if value.partition("://")[2] in ("", "/"):
            raise InvalidInputError(
                f"{operation} {value!r}: expected postgresql://USER@HOST/DB (a database to use)"
            )
        return StoreLocation("postgres", value)
    if name == "sqlite":
        path = value[len(scheme.group(0)) :]
        if not path.startswith("/") or path in ("/", "//"):
            raise InvalidInputError(
                f"{operation} {value!r}: expected sqlite:///PATH.db (three slashes, relative to "
                "the current directory) or sqlite:////ABSOLUTE/PATH.db"
            )
        return StoreLocation("sqlite", _checked_path(value, path[1:], operation, makes_directories))
    raise InvalidInputError(
        f"{operation} {value!r}: unknown scheme {scheme.group(1)!r}; expected {EXPECTED}"
    )


def sqlite_file(value: object, operation: str = "SqliteSessionStore") -> str:
    """The SQLite file ``value`` names (a path or ``sqlite:///`` URL), checked."""
    location = parse_store_location(value, operation)
    if location.kind != "sqlite":
        raise InvalidInputError(
            f"{operation} {location.target!r}: that is a PostgreSQL URL; open it with "
            "agentloop.store.PostgresSessionStore(url)"
        )
    return location.target


def _checked_path(value: str, path: str, operation: str, makes_directories: bool) -> str:
    """``path`` if a SQLite file can be opened or created there; else what to do instead."""
    if path == ":memory:":
        return path
    path = os.path.expanduser(path)
    file = Path(path)
    if file.is_dir():
        raise InvalidInputError(
            f"{operation} {value!r}: {str(file)!r} is a directory; name a file in it, "
            f"e.g. {str(file / 'sessions.db')!r}"
        )
    if file.exists():
        if not os.access(file, os.R_OK | os.W_OK):
            raise InvalidInputError(
                f"{operation} {value!r}: {str(file)!r} is not readable and writable by this "
                "user; check its permissions"
            )
        return path
    parent = file.parent
    if makes_directories and not parent.exists():
        return path
    if not parent.is_dir():
        raise InvalidInputError(
            f"{operation} {value!r}: the directory {str(parent)!r} does not exist; create it "
            f"first (mkdir -p {str(parent)!r}) or choose another path"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInputError(
            f"{operation} {value!r}: cannot create {file.name!r} in {str(parent)!r} (not "
            "writable by this user); choose another directory"
        )
    return path
