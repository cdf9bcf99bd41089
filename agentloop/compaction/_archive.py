"""The result archive: full tool outputs kept out of the transcript, read back by call id.

:class:`TrimLargeOutputs` stores each output it trims under
``(session_id, call_id)``; the ``read_result`` tool (:func:`read_result_tool`)
lets the model read it back a page at a time.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio.to_thread

from ..core._errors import InvalidInputError
from ..tools._decorator import FunctionTool, tool
from ..tools._tool import ToolContext

__all__ = [
    "READ_RESULT_TOOL",
    "MemoryResultArchive",
    "ResultArchive",
    "SqliteResultArchive",
    "read_result_tool",
]

T = TypeVar("T")

READ_RESULT_TOOL = "read_result"
"""The name of the tool that reads an archived output back."""

_DEFAULT_PAGE_CHARS = 8_000


@runtime_checkable
class ResultArchive(Protocol):
    """Full tool outputs, keyed by session id and call id (call ids are unique in a session).

    ``put`` of a key that exists keeps the first text: an output is archived
    once, and re-trimming an already trimmed transcript must not overwrite it.
    """

    async def put(self, session_id: str, call_id: str, text: str) -> None:
        """Store ``text`` for the call (no-op if the call already has an entry)."""
        ...

    async def get(self, session_id: str, call_id: str) -> str | None:
        """The stored text, or ``None`` if there is none."""
        ...


class MemoryResultArchive:
    """A :class:`ResultArchive` in a dict: for tests and single-process hosts."""

    def __init__(self) -> None:
        self._texts: dict[tuple[str, str], str] = {}

    def __repr__(self) -> str:
        return f"MemoryResultArchive({len(self._texts)} outputs)"

    def __len__(self) -> int:
        return len(self._texts)

    async def put(self, session_id: str, call_id: str, text: str) -> None:
        """Store ``text`` unless the call already has an entry."""
        self._texts.setdefault((session_id, call_id), text)

    async def get(self, session_id: str, call_id: str) -> str | None:
        """The stored text, or ``None``."""
        return self._texts.get((session_id, call_id))


_SCHEMA = """
CREATE TABLE IF NOT EXISTS agentloop_archived_results (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
)
"""


class SqliteResultArchive:
    """A :class:`ResultArchive` in a SQLite file (created if missing; may be the session
    store's file: the table is ``agentloop_archived_results``).

    One connection, opened on first use, guarded by a lock; each call runs
    in a worker thread, so it works under asyncio and trio. ``close()``
    releases the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SqliteResultArchive({self._path!r})"

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            connection = sqlite3.connect(self._path, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)
            connection.commit()
            self._connection = connection
        return self._connection

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return work(self._connect())

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(partial(self._locked, work))

    async def put(self, session_id: str, call_id: str, text: str) -> None:
        """Store ``text`` unless the call already has an entry."""

        def insert(connection: sqlite3.Connection) -> None:
            with connection:
                connection.execute(
                    "INSERT OR IGNORE INTO agentloop_archived_results VALUES (?, ?, ?)",
                    (session_id, call_id, text),
                )

        await self._run(insert)

    async def get(self, session_id: str, call_id: str) -> str | None:
        """The stored text, or ``None``."""

        def select(connection: sqlite3.Connection) -> str | None:
            row = connection.execute(
                "SELECT text FROM agentloop_archived_results WHERE session_id = ? AND call_id = ?",
                (session_id, call_id),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._run(select)

    async def close(self) -> None:
        """Close the connection (a later call opens it again)."""

        def close() -> None:
            with self._lock:
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None

        await anyio.to_thread.run_sync(close)


def read_result_tool(
    archive: ResultArchive, *, page_chars: int = _DEFAULT_PAGE_CHARS
) -> FunctionTool[[ToolContext, str, int], Coroutine[Any, Any, str]]:
    """The ``read_result`` tool: the model reads a trimmed output back, ``page_chars`` at a time.

    Input: ``call_id`` (named in the trim marker) and an optional ``offset``.
    The answer is the page, followed by a line saying which characters it
    holds and the ``offset`` of the next page. An unknown call id or an
    offset past the end is an error result the model can read.
    """
    if not isinstance(page_chars, int) or isinstance(page_chars, bool) or page_chars <= 0:
        raise InvalidInputError(
            f"read_result_tool: page_chars must be a positive int, got {page_chars!r}"
        )

    async def read_result(ctx: ToolContext, call_id: str, offset: int = 0) -> str:
        """Read the full output of an earlier tool call whose result was trimmed to save context.

        call_id: the id named in the trimmed result's marker. offset: the character to
        start from (0 for the beginning; the previous page says where the next one starts).
        """
        text = await archive.get(ctx.session_id, call_id)
        if text is None:
            raise LookupError(
                f"no archived output for call {call_id!r} in this session; read_result only "
                "reads outputs that compaction trimmed (their marker names the call id)"
            )
        if offset < 0 or (offset >= len(text) and offset != 0):
            raise ValueError(
                f"offset {offset} is outside the output of call {call_id!r}, which has "
                f"{len(text)} characters; use an offset from 0 to {max(0, len(text) - 1)}"
            )
        end = min(len(text), offset + page_chars)
        page = text[offset:end]
        if end < len(text):
            footer = (
                f"[characters {offset}-{end} of {len(text)}; call read_result with "
                f"call_id={call_id!r} and offset={end} for the next page]"
            )
        else:
            footer = f"[characters {offset}-{end} of {len(text)}; end of output]"
        return f"{page}\n{footer}"

    decorate = tool(name=READ_RESULT_TOOL, read_only=True, idempotent=True)
    return decorate(read_result)
