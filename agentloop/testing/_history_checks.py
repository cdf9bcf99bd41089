"""Conformance checks of a store's step history: list, load, fork, rewind, retention.

They run on a store that keeps a history (:class:`~agentloop.store.SessionHistory`;
every ``BackendSessionStore`` is one) and pass on any other. Each step is saved
the way a driver saves (the transcript growing, a turn's lists growing, a
compaction rewriting a prefix, the turn ending), so rebuilding a step from
the rows exercises every list write of the storage protocol; the retention
check opens the same backend with a small ``history_limit``, so the rows a
save drops (``BackendWrite.drop``) are checked too.
"""

from __future__ import annotations

import json
from typing import Any

from ..loop._converter import unstructure
from ..loop._session_history import SessionHistory
from ..store._backed import BackendSessionStore
from ._store_checks import (
    OpenStore,
    _calls,
    _long_transcript,
    _result,
    _session_ids,
    _turn_document,
    _user,
)

__all__ = ["check_history_retention", "check_step_history"]


def _documents(session_id: str) -> list[dict[str, Any]]:
    """Seven documents of one session, as a driver saves them, each a step."""
    base = [unstructure(item) for item in _long_transcript(12)]
    call, result = unstructure(_calls("call-h")), unstructure(_result("call-h"))
    turn: dict[str, Any] = {"items": [base[-1]], "tool_calls": [], "round": 0}
    grown = {**turn, "items": [*turn["items"], call], "tool_calls": [{"call_id": "call-h"}]}
    return [
        _turn_document(session_id, base[:4], None),
        _turn_document(session_id, base, turn),
        _turn_document(session_id, [*base, call], grown),
        _turn_document(session_id, [*base, call, result], {**grown, "round": 1}),
        _turn_document(session_id, [unstructure(_user("summary")), *base[6:]], None),
        _turn_document(session_id, [], None),
        _turn_document(session_id, base[:2], None),
    ]


def _same(found: Any, expected: Any) -> bool:
    return json.dumps(found, sort_keys=True) == json.dumps(expected, sort_keys=True)


def _fail(what: str, expected: Any, found: Any) -> AssertionError:
    text = f"{what}: expected {expected!r}, found {found!r}"
    return AssertionError(text if len(text) < 900 else text[:900] + "...")


async def check_step_history(open_store: OpenStore) -> None:
    """Every save is a step: listed in order with its version, loaded exactly, forked
    into a new session (the original unchanged) and rewound to as a new step."""
    session_id, fork_id = _session_ids("history", 2)
    documents = _documents(session_id)
    async with open_store() as store:
        if not isinstance(store, SessionHistory):
            return
        versions = [await store.save_checkpoint(session_id, document) for document in documents]
        steps = await store.history(session_id)
        if not steps:
            return  # a store opened with history_limit=0 keeps none
        listed = [(step.step, step.version, step.item_count) for step in steps]
        expected = [
            (number, version, len(document["transcript"]))
            for number, (version, document) in enumerate(
                zip(versions, documents, strict=True), start=1
            )
        ][-len(listed) :]
        if listed != expected:
            raise _fail("history() after 7 saves (step, version, item_count)", expected, listed)
        for step in steps:
            loaded = await store.load_step(session_id, step.step)
            document = documents[step.step - 1]
            if not _same(loaded.checkpoint, document):
                raise _fail(f"load_step({step.step}) document", document, loaded.checkpoint)
        first = steps[0].step
        at = steps[len(steps) // 2].step
        await store.fork(session_id, at=at, new_session_id=fork_id)
        forked = await store.load(fork_id)
        renamed = {**documents[at - 1], "session_id": fork_id, "config": {"session_id": fork_id}}
        found_fork = None if forked is None else dict(forked.checkpoint)
        if found_fork is not None and isinstance(found_fork.get("config"), dict):
            # the calls it holds without a result keep their keys: noted in the metadata
            found_fork["config"] = {
                key: value for key, value in found_fork["config"].items() if key != "metadata"
            }
        if found_fork is None or not _same(found_fork, renamed):
            raise _fail("the fork's document", renamed, found_fork)
        if await store.history(session_id) != steps:
            raise _fail("the original's history after a fork", steps, "a changed one")
        await store.rewind(session_id, to=first)
        rewound = await store.load(session_id)
        if rewound is None or not _same(rewound.checkpoint, documents[first - 1]):
            raise _fail(f"the document after rewind(to={first})", documents[first - 1], rewound)
        after = await store.history(session_id)
        found = (after[-1].step, after[-1].origin)
        if found != (steps[-1].step + 1, f"rewound to step {first}"):
            raise _fail("the latest step after a rewind", (steps[-1].step + 1, "rewound"), found)
        await store.delete(session_id)
        if await store.history(session_id) != []:
            raise _fail("history() after delete", [], await store.history(session_id))


async def check_history_retention(open_store: OpenStore) -> None:
    """With ``history_limit=2`` a session keeps 3 or 4 steps, each loaded exactly, and the
    rows of the steps it dropped are gone (the backend's ``commit`` applied ``drop``)."""
    (session_id,) = _session_ids("retention")
    documents = _documents(session_id) * 2
    async with open_store() as opened:
        if not isinstance(opened, BackendSessionStore):
            return
        store = BackendSessionStore(opened.backend, history_limit=2)
        for document in documents:
            await store.save_checkpoint(session_id, document)
        steps = [step.step for step in await store.history(session_id)]
        count = len(documents)
        if steps not in ([count - 2, count - 1, count], [count - 3, count - 2, count - 1, count]):
            raise _fail("the steps kept with history_limit=2", f"the last 3 or 4 of {count}", steps)
        for step in steps:
            loaded = await store.load_step(session_id, step)
            if not _same(loaded.checkpoint, documents[step - 1]):
                raise _fail(f"load_step({step})", documents[step - 1], loaded.checkpoint)
        rows = await opened.backend.read_rows(session_id, "history")
        if sorted(int(key) for key in rows) != steps:
            raise _fail("the history rows kept (backend.read_rows)", steps, sorted(rows))
        await store.delete(session_id)
