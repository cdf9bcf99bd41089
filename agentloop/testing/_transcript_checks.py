"""The checks of :mod:`agentloop.testing.store_conformance` on documents as a driver
grows and rewrites them: saves from many tasks at once, a long transcript, compaction-style
rewrites, values shared between saves and one long turn.

Each ``check_*`` coroutine takes ``open_store`` and raises ``AssertionError``
saying what was expected and what was found.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio

from ..loop._checkpoint import CHECKPOINT_FORMAT
from ..loop._converter import unstructure
from ..loop._session_store import SessionStore
from ._store_checks import (
    OpenStore,
    _calls,
    _expect_document,
    _expect_equal,
    _listed,
    _load,
    _long_transcript,
    _result,
    _save,
    _session_ids,
    _show,
    _turn_document,
    _user,
    sample_checkpoint,
)

__all__ = [
    "check_concurrent_saves",
    "check_large_transcript",
    "check_long_turn",
    "check_prefix_rewrite",
    "check_shared_values",
]


def _round_document(session_id: str, writer: int, round_number: int) -> dict[str, Any]:
    items = [_user(f"writer {writer} round {round_number} #{n}") for n in range(round_number + 1)]
    return sample_checkpoint(session_id, items, writer=writer, round=round_number)


async def check_concurrent_saves(open_store: OpenStore) -> None:
    """Saves from several tasks at once never mix documents: each load is one whole save."""
    own = _session_ids("concurrent", 5)
    (shared,) = _session_ids("concurrent-shared")
    rounds, shared_writers = 8, range(len(own), len(own) + 3)

    async def write(session_id: str, writer: int) -> None:
        for number in range(rounds):
            await store.save_checkpoint(session_id, _round_document(session_id, writer, number))
            await store.record_call_started(session_id, f"w{writer}-r{number}", "write_file")

    async with open_store() as store:
        async with anyio.create_task_group() as group:
            for writer, session_id in enumerate(own):
                group.start_soon(write, session_id, writer)
            for writer in shared_writers:
                group.start_soon(write, shared, writer)
        for writer, session_id in enumerate(own):
            expected = _round_document(session_id, writer, rounds - 1)
            await _expect_document(store, session_id, expected, f"writer {writer}'s session")
        loaded = await _load(store, shared)
        last_writer, last_round = loaded.checkpoint.get("writer"), loaded.checkpoint.get("round")
        if not isinstance(last_writer, int) or not isinstance(last_round, int):
            raise AssertionError(f"shared document {_show(loaded.checkpoint)} was never saved")
        expected = _round_document(shared, last_writer, last_round)
        await _expect_document(store, shared, expected, "the session several tasks saved")
        started = {f"w{w}-r{r}" for w in shared_writers for r in range(rounds)}
        _expect_equal(loaded.started_calls, started, "started calls of the shared session")


async def check_large_transcript(open_store: OpenStore) -> None:
    """A 1,000-item transcript round-trips, and so does one more item appended to it."""
    (session_id,) = _session_ids("large")
    items = _long_transcript(1_000)
    async with open_store() as store:
        document = await _save(store, session_id, items)
        await _expect_document(store, session_id, document, "1,000 items")
        longer = [*items, _user("one more")]
        document = await _save(store, session_id, longer)
        await _expect_document(store, session_id, document, "1,001 items")
        _expect_equal(await store.transcript(session_id), longer, "transcript() of 1,001 items")
        _expect_equal(await _listed(store, [session_id]), [(session_id, 1_001)], "item_count")


async def check_prefix_rewrite(open_store: OpenStore) -> None:
    """Compaction-style rewrites (new prefix, changed middle, shrink, regrow) load exactly."""
    (session_id,) = _session_ids("rewrite")
    base = _long_transcript(60)
    versions = [
        base,
        [_user("summary of 20 items"), *base[20:]],
        [*base[:30], _user("redacted"), *base[31:]],
        base[:10],
        base,
        [],
        base[:3],
    ]
    async with open_store() as store:
        for number, items in enumerate(versions):
            document = await _save(store, session_id, items, version_number=number)
            await _expect_document(store, session_id, document, f"rewrite {number}")
            _expect_equal(await store.transcript(session_id), items, f"items of rewrite {number}")
            listed = await _listed(store, [session_id])
            _expect_equal(listed, [(session_id, len(items))], f"item_count of rewrite {number}")


async def check_shared_values(open_store: OpenStore) -> None:
    """Documents built as a driver builds them load exactly: each save hands the store
    the very objects of the last one for what did not change (transcript items, the
    config, the elements of the turn's lists) and new objects for what did."""
    (session_id,) = _session_ids("shared")
    items = [unstructure(item) for item in _long_transcript(6)]
    config = {"session_id": session_id, "limits": {"max_model_calls_per_turn": 5}}
    calls: list[Any] = [{"call_id": "c-1", "input": {"n": 1}}]
    records: list[Any] = [1, {"usage": None}]

    def document(**changes: Any) -> dict[str, Any]:
        turn = {"items": items[-3:], "tool_calls": list(calls), "records": list(records)}
        return {
            "format": CHECKPOINT_FORMAT,
            "version": 1,
            "session_id": session_id,
            "config": config,
            "turn": {**turn, **changes},
            "queued": [],
            "transcript": list(items),
        }

    async with open_store() as store:
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("the first save", document),
            ("the same document again", document),
            ("one more item and call", document),
            ("a call replaced by an equal one of other types", document),
            ("a new config", document),
            ("a turn list cut short", lambda: document(records=records[:1])),
            ("an emptied turn list", lambda: document(tool_calls=[])),
            ("the cut list grown again", document),
        ]
        for number, (what, build) in enumerate(steps):
            if number == 2:
                items.append(unstructure(_user("one more")))
                calls.append({"call_id": "c-2", "input": {"n": 2}})
            elif number == 3:
                calls[0] = {"call_id": "c-1", "input": {"n": 1.0}}  # 1 == 1.0, not in JSON
                records[0] = True  # True == 1, not in JSON
            elif number == 4:
                config = {**config, "limits": {"max_model_calls_per_turn": 6}}
            saved = build()
            await store.save_checkpoint(session_id, saved)
            await _expect_document(store, session_id, json.loads(json.dumps(saved)), what)


async def check_long_turn(open_store: OpenStore) -> None:
    """One long turn saved as a driver saves it (three saves per tool round, the turn's
    items, tool calls and model call records growing append-only, some in place) loads
    exactly at every point, and so do what ends it: a compaction inside the turn, an
    element replaced by an equal one of other types, a new turn, no turn, a turn whose
    lists are empty, and a turn that is not an object."""
    (session_id,) = _session_ids("long-turn")
    async with open_store() as store:
        transcript, turn = await _save_long_turn(store, session_id)
        await _save_turn_endings(store, session_id, transcript, turn)
        await _check_saved_after_delete(store, session_id, transcript)


async def _save_long_turn(store: SessionStore, session_id: str) -> tuple[list[Any], dict[str, Any]]:
    """Forty tool rounds of one turn, checked every 13th round and after the last;
    returns the transcript and the turn."""
    transcript: list[Any] = [unstructure(_user("start a long turn"))]
    turn: dict[str, Any] = {
        "items": [transcript[0]],
        "tool_calls": [],
        "model_calls_made": [],
        "round": 0,
    }
    for round_number in range(40):
        transcript, turn, saved = await _save_tool_round(
            store, session_id, transcript, turn, round_number
        )
        if round_number % 13 == 0:
            await _expect_document(store, session_id, saved, f"round {round_number}")
    await _expect_document(store, session_id, saved, "the 40th round of one turn")
    return transcript, turn


async def _save_tool_round(
    store: SessionStore,
    session_id: str,
    transcript: list[Any],
    turn: dict[str, Any],
    round_number: int,
) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """The three saves of one tool round (call made, call running, result); returns the
    transcript, the turn and the last document saved."""
    call_id = f"call-{round_number}"
    call = unstructure(_calls(call_id))
    transcript = [*transcript, call]
    turn["items"].append(call)  # grown in place, as a driver may
    turn["model_calls_made"] = [*turn["model_calls_made"], {"round": round_number}]
    turn = {**turn, "round": round_number}
    first = _turn_document(session_id, transcript, turn)
    await store.save_checkpoint(session_id, first)
    running = {"call_id": call_id, "status": "running"}
    turn = {**turn, "tool_calls": [*turn["tool_calls"], running]}  # saved: not changed
    await store.save_checkpoint(session_id, _turn_document(session_id, transcript, turn))
    result = unstructure(_result(call_id))
    transcript = [*transcript, result]
    done = {"call_id": call_id, "status": "done"}
    turn = {
        **turn,
        "items": [*turn["items"], result],
        "tool_calls": [*turn["tool_calls"][:-1], done],
    }
    saved = _turn_document(session_id, transcript, turn)
    await store.save_checkpoint(session_id, saved)
    return transcript, turn, saved


async def _save_turn_endings(
    store: SessionStore, session_id: str, transcript: list[Any], turn: dict[str, Any]
) -> None:
    """Each way the long turn ends, saved in turn and loaded exactly."""
    endings: list[tuple[str, dict[str, Any] | None]] = [
        ("a compaction inside the turn", {**turn, "items": turn["items"][-4:]}),
        (
            "a tool call replaced by an equal one of other types",
            {**turn, "tool_calls": [{"call_id": "call-0", "status": "done", "n": 1.0}]},
        ),
        ("a new turn", {"items": [transcript[0]], "tool_calls": [], "model_calls_made": [1]}),
        ("no turn", None),
        ("a turn with empty lists", {"items": [], "tool_calls": [], "model_calls_made": []}),
        ("a turn again", {"items": [transcript[1]], "tool_calls": [{"n": True}]}),
        ("a turn that is a list", [[1, 2], {"items": [3]}]),  # type: ignore[list-item]
        ("a turn whose lists are not lists", {"items": {"a": 1}, "tool_calls": "x"}),
    ]
    for what, ending in endings:
        saved = _turn_document(session_id, transcript, ending, note=what)
        await store.save_checkpoint(session_id, saved)
        await _expect_document(store, session_id, json.loads(json.dumps(saved)), what)


async def _check_saved_after_delete(
    store: SessionStore, session_id: str, transcript: list[Any]
) -> None:
    """The long turn's session is deleted, then saved again and loaded exactly."""
    _expect_equal(await store.delete(session_id), True, "delete() after a long turn")
    _expect_equal(await store.load(session_id), None, "load() after delete()")
    again = _turn_document(session_id, transcript[:1], {"items": [1], "tool_calls": [2]})
    await store.save_checkpoint(session_id, again)
    await _expect_document(store, session_id, again, "a session saved again after delete()")
