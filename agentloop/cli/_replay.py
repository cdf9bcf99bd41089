"""``agentloop replay PATH [--session ID] [--steps | --step N]``: render a JSONL
transcript or a stored session (``--steps`` lists its saved steps, ``--step N``
renders it as saved at step N).

The file's first bytes decide: SQLite's header means a session store (what
``chat --store`` writes), anything else is read as JSONL (what
``agentloop.store.export_jsonl`` and chat's ``/export`` write). Anything that
is neither is refused with one line and status 2.

From a store, the decisions recorded with the session are shown too: a call
approved with edited arguments gets an ``[approval]`` line with the edit next
to the model's call, and a session parked on an approval ends with what it
waits for ("waiting for approval of call call-1 (publish_report)") instead of
a note that its transcript is not provider-valid.
"""

from __future__ import annotations

from pathlib import Path

from ..core._errors import AgentLoopError
from ..core._items import Item
from ..core._transcript import TranscriptViolation, find_violation
from ..loop._converter import structure
from ..loop._session_history import SessionHistory
from ..loop._session_store import SessionStatus, StoredSession, summarize
from ._render import Renderer, format_arguments, short_id

__all__ = ["EXIT_USAGE", "replay"]

EXIT_USAGE = 2
"""The exit status for a command that cannot start: a bad argument or file."""

_SQLITE_HEADER = b"SQLite format 3\x00"


async def replay(
    renderer: Renderer,
    path: str,
    session: str | None,
    *,
    step: int | None = None,
    list_steps: bool = False,
) -> int:
    """Render the transcript at ``path`` (or in the store a URL names), or its session's
    steps (``list_steps``) or its state at ``step``; the exit status."""
    stored: StoredSession | None = None
    history = _History(step, list_steps)
    if "://" in path:  # a store URL, as --store takes: sqlite:///PATH.db, postgresql://...
        found = await _from_url(renderer, path, session, history)
        items, stored = found if found is not None else (None, None)
    else:
        head = _head(path)
        if head is None:
            renderer.error(
                f"agentloop replay: no file {path!r}; expected a JSONL transcript or a session "
                "store"
            )
            return EXIT_USAGE
        if head == _SQLITE_HEADER:
            found = await _from_store(renderer, path, session, history)
            items, stored = found if found is not None else (None, None)
        elif history.wanted:
            renderer.error(
                f"agentloop replay: --steps and --step are for a session store; {path!r} is "
                "a JSONL transcript (it keeps no steps)"
            )
            return EXIT_USAGE
        else:
            items = _from_jsonl(renderer, path, session)
    if items is None:
        return EXIT_USAGE
    if step is not None or not list_steps:
        _render(renderer, items, stored)
    return 0


class _History:
    """What ``--steps``/``--step`` ask of a stored session."""

    def __init__(self, step: int | None, list_steps: bool) -> None:
        self.step = step
        self.list_steps = list_steps

    @property
    def wanted(self) -> bool:
        return self.step is not None or self.list_steps

    async def read(
        self, renderer: Renderer, store: object, session: str
    ) -> tuple[list[Item], StoredSession | None] | None:
        """List the steps, or load the one asked for; ``None`` when neither is asked."""
        if not self.wanted:
            return None
        if not isinstance(store, SessionHistory):
            raise AgentLoopError(f"the store ({type(store).__name__}) keeps no step history")
        if self.list_steps:
            renderer.note(f"the steps of session {session!r}")
            for saved in await store.history(session):
                when = saved.saved_at.strftime("%Y-%m-%d %H:%M:%S")
                origin = f" ({saved.origin})" if saved.origin else ""
                renderer.note(
                    f"step {saved.step}  {when}  {saved.state.lower()}  "
                    f"{saved.item_count} items  {saved.summary}{origin}"
                )
        if self.step is None:
            return [], None
        stored = await store.load_step(session, self.step)
        renderer.note(f"replaying session {session!r} as saved at step {self.step}")
        return [structure(item, Item) for item in stored.checkpoint["transcript"]], stored


def _render(renderer: Renderer, items: list[Item], stored: StoredSession | None) -> None:
    """The transcript, each call approved with edited arguments followed by its edit, then
    what a parked session waits for (or why the transcript is not provider-valid)."""
    for item in items:
        renderer.transcript_item(item)
        if stored is not None:
            _edited_calls(renderer, item, stored)
    violation = find_violation(items)
    waiting = _waiting(stored, items, violation)
    for line in waiting:
        renderer.note(line)
    if violation is not None and not waiting:
        renderer.error(f"note: the transcript is not provider-valid: {violation.message}")


def _edited_calls(renderer: Renderer, item: Item, stored: StoredSession) -> None:
    """An ``[approval]`` line under each call of ``item`` approved with edited arguments."""
    for call in item.tool_calls():
        decision = stored.approvals.get(call.id)
        if decision is None or decision.edited_input is None:
            continue
        renderer.line(
            f"[approval] {short_id(call.id)} approved with edited arguments: "
            f"{call.name}({format_arguments(decision.edited_input)}) "
            f"(the model's: {format_arguments(call.input)})",
            "yellow",
        )


def _waiting(
    stored: StoredSession | None, items: list[Item], violation: TranscriptViolation | None
) -> list[str]:
    """What a session parked on approvals waits for; empty when it is not parked there.

    Its calls still open at the end of the transcript are then expected, not a flaw.
    """
    if stored is None or violation is None or violation.item_index is not None:
        return []
    status, pending = summarize(stored.checkpoint)
    if status is not SessionStatus.AWAITING_APPROVAL or not pending:
        return []
    names = {call.id: call.name for item in items for call in item.tool_calls()}
    lines = []
    for call_id in pending:
        shown = f"call {call_id} ({names.get(call_id, 'unknown tool')})"
        decision = stored.approvals.get(call_id)
        if decision is None:
            lines.append(f"waiting for approval of {shown}")
            continue
        verdict = "approved" if decision.approved else "denied"
        if decision.edited_input is not None:
            verdict += " with edited arguments"
        lines.append(f"{shown} {verdict}; waiting for a worker to resume the session")
    return lines


async def _from_url(
    renderer: Renderer, url: str, session: str | None, history: _History | None = None
) -> tuple[list[Item], StoredSession | None] | None:
    from ..store._location import parse_store_location

    location = parse_store_location(url, "agentloop replay")  # a bad URL: one line, status 2
    if location.kind == "sqlite" and _head(location.target) is None:
        renderer.error(f"agentloop replay: no file {location.target!r} (from {url!r})")
        return None
    return await _from_store(renderer, url, session, history)


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


async def _from_store(
    renderer: Renderer, path: str, session: str | None, history: _History | None = None
) -> tuple[list[Item], StoredSession | None] | None:
    from ._store import open_session_store

    try:
        store, _location = open_session_store(path)
        async with store:
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
            at_step = None if history is None else await history.read(renderer, store, session)
            if at_step is not None:
                return at_step
            items = await store.transcript(session)
            stored = await store.load(session)
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
    return items, stored
