"""``agentloop replay PATH [--session ID]``: render a JSONL transcript or a stored session.

The file's first bytes decide: SQLite's header means a session store (what
``chat --store`` writes), anything else is read as JSONL (what
``agentloop.store.export_jsonl`` and chat's ``/export`` write). Anything that
is neither is refused with one line and status 2.
"""

from __future__ import annotations

from pathlib import Path

from ..core._errors import AgentLoopError
from ..core._items import Item
from ..core._transcript import find_violation
from ._render import Renderer

__all__ = ["EXIT_USAGE", "replay"]

EXIT_USAGE = 2
"""The exit status for a command that cannot start: a bad argument or file."""

_SQLITE_HEADER = b"SQLite format 3\x00"


async def replay(renderer: Renderer, path: str, session: str | None) -> int:
    """Render the transcript at ``path``; the exit status."""
    head = _head(path)
    if head is None:
        renderer.error(
            f"agentloop replay: no file {path!r}; expected a JSONL transcript or a session store"
        )
        return EXIT_USAGE
    if head == _SQLITE_HEADER:
        items = await _from_store(renderer, path, session)
    else:
        items = _from_jsonl(renderer, path, session)
    if items is None:
        return EXIT_USAGE
    renderer.transcript(items)
    violation = find_violation(items)
    if violation is not None:
        renderer.error(f"note: the transcript is not provider-valid: {violation.message}")
    return 0


def _head(path: str) -> bytes | None:
    """The file's first bytes (enough to tell SQLite); ``None`` if it is not a file."""
    file = Path(path)
    if not file.is_file():
        return None
    with file.open("rb") as handle:
        return handle.read(len(_SQLITE_HEADER))


def _from_jsonl(renderer: Renderer, path: str, session: str | None) -> list[Item] | None:
    from ..store import import_jsonl

    if session is not None:
        renderer.error(
            f"agentloop replay: --session {session!r} is for a session store; {path!r} is "
            "not one (a JSONL transcript holds one session)"
        )
        return None
    try:
        items = import_jsonl(path)
    except UnicodeDecodeError:
        renderer.error(
            f"agentloop replay: {path!r} is neither a JSONL transcript nor a session store "
            "(it is not UTF-8 text)"
        )
        return None
    except AgentLoopError as error:
        renderer.error(
            f"agentloop replay: {path!r} is not a JSONL transcript: {error}; expected one "
            "agentloop.unstructure(item) per line, or a session store (.db)"
        )
        return None
    renderer.note(f"replaying {path} ({len(items)} items)")
    return items


async def _from_store(renderer: Renderer, path: str, session: str | None) -> list[Item] | None:
    from ..store import SqliteSessionStore

    try:
        async with SqliteSessionStore(path) as store:
            sessions = sorted(info.session_id for info in await store.list_sessions())
            if session is None:
                if len(sessions) != 1:
                    listed = ", ".join(repr(name) for name in sessions) or "none"
                    renderer.error(
                        f"agentloop replay: {path!r} holds {len(sessions)} sessions ({listed}); "
                        "choose one with --session ID"
                    )
                    return None
                session = sessions[0]
            items = await store.transcript(session)
    except AgentLoopError as error:
        renderer.error(f"agentloop replay: cannot read the session store {path!r}: {error}")
        return None
    if items is None:
        listed = ", ".join(repr(name) for name in sessions) or "none"
        renderer.error(
            f"agentloop replay: no session {session!r} in {path!r}; its sessions: {listed}"
        )
        return None
    renderer.note(f"replaying session {session!r} from {path} ({len(items)} items)")
    return items
