"""The checks of :mod:`agentloop.testing.store_conformance`, and their helpers.

Each ``check_*`` coroutine takes ``open_store`` and raises ``AssertionError``
saying what was expected and what was found.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from functools import partial
from typing import Any, TypeAlias, TypeVar

import anyio

from ..core._errors import CheckpointError, InvalidInputError
from ..core._items import (
    CustomPart,
    FinishReason,
    Item,
    ItemKind,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..loop._checkpoint import CHECKPOINT_FORMAT
from ..loop._converter import unstructure
from ..loop._session_store import (
    Claim,
    ClaimError,
    Lease,
    LeaseHeldError,
    LeaseLostError,
    SessionStatus,
    SessionStore,
    StaleSessionError,
    StoredSession,
    input_digest,
)

__all__ = [
    "OpenStore",
    "check_append_after_another_writer",
    "check_claim_survives_crash",
    "check_claims",
    "check_concurrent_claims",
    "check_concurrent_saves",
    "check_delete",
    "check_documents_are_copied",
    "check_inbox_queries",
    "check_large_transcript",
    "check_lease_takeover",
    "check_leases",
    "check_list_order",
    "check_long_turn",
    "check_prefix_rewrite",
    "check_refused_appends",
    "check_rejects_bad_documents",
    "check_replace",
    "check_reopen",
    "check_round_trip",
    "check_sessions_isolated",
    "check_shared_values",
    "check_started_calls",
    "check_two_writers",
    "check_versions",
    "sample_checkpoint",
]

OpenStore: TypeAlias = Callable[[], AbstractAsyncContextManager[SessionStore]]
"""Opens the storage under test; called again after its block exits, reopens the same storage."""


def sample_checkpoint(session_id: str, items: Sequence[Item], **extra: Any) -> dict[str, Any]:
    """A minimal valid checkpoint document holding ``items``, plus ``extra`` keys."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": 1,
        "session_id": session_id,
        "transcript": [unstructure(item) for item in items],
        **extra,
    }


def _user(text: str) -> Item:
    return Item.text(ItemKind.USER, text)


def _calls(*call_ids: str) -> Item:
    parts = [
        ToolCallPart(call_id, "write_file", {"path": f"/tmp/{call_id}"}) for call_id in call_ids
    ]
    return Item(ItemKind.ASSISTANT, parts, finish_reason=FinishReason.TOOL_CALL)


def _result(call_id: str) -> Item:
    return Item(ItemKind.TOOL, [ToolResultPart(call_id, f"wrote {call_id}")])


def _session_ids(prefix: str, count: int = 1) -> list[str]:
    token = uuid.uuid4().hex[:8]
    return [f"conformance-{prefix}-{token}-{index}" for index in range(count)]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _expect_equal(found: Any, expected: Any, what: str) -> None:
    _expect(found == expected, f"{what}: expected {_show(expected)}, found {_show(found)}")


async def _save(
    store: SessionStore, session_id: str, items: list[Item], **extra: Any
) -> dict[str, Any]:
    document = sample_checkpoint(session_id, items, **extra)
    await store.save_checkpoint(session_id, document)
    return document


async def _load(store: SessionStore, session_id: str) -> StoredSession:
    loaded = await store.load(session_id)
    if loaded is None:
        raise AssertionError(f"load({session_id!r}) returned None, expected the saved session")
    return loaded


async def _started(store: SessionStore, session_id: str) -> frozenset[str]:
    return (await _load(store, session_id)).started_calls


async def _listed(store: SessionStore, session_ids: Sequence[str]) -> list[tuple[str, int]]:
    infos = await store.list_sessions()
    return [(info.session_id, info.item_count) for info in infos if info.session_id in session_ids]


async def _expect_document(
    store: SessionStore, session_id: str, expected: dict[str, Any], what: str
) -> None:
    found = (await _load(store, session_id)).checkpoint
    same = type(found) is dict and _canonical(found) == _canonical(expected)
    _expect(same, f"{what}: expected document {_show(expected)}, found {_show(found)}")


async def check_round_trip(open_store: OpenStore) -> None:
    """A saved document loads deep-equal, with its items, session id and a UTC time."""
    (session_id,) = _session_ids("round-trip")
    items = [
        Item.text(ItemKind.SYSTEM, "be brief"),
        _user('héllo ✓ \u2028 tab\t quote" nul\x00'),
        Item(
            ItemKind.ASSISTANT,
            [ReasoningPart("think", redacted=True), ToolCallPart("c1", "echo", {"x": [1, 2.5]})],
            usage=Usage(10, 5, cost=0.25),
            finish_reason=FinishReason.TOOL_CALL,
            created_at=1_700_000_000.5,
        ),
        Item(ItemKind.TOOL, [ToolResultPart("c1", [TextPart("ok")], metadata={"k": [None]})]),
        Item(ItemKind.CONTEXT, [StructuredPart({"a": {"b": []}}), CustomPart("x", 2**62)]),
    ]
    extra = {
        "config": {"model": "scripted", "limits": {"max_turns": 3}, "tags": []},
        "counters": {"turn": 7, "ratio": 0.1, "big": 10**30, "negative": -0.0},
        "flags": [True, False, None, ""],
    }
    async with open_store() as store:
        _expect(isinstance(store, SessionStore), f"{store!r} does not implement SessionStore")
        _expect_equal(await store.load(session_id), None, "load() of an unknown session")
        _expect_equal(await store.transcript(session_id), None, "transcript() of unknown session")
        document = await _save(store, session_id, items, **extra)
        await _expect_document(store, session_id, document, "round trip")
        loaded = await _load(store, session_id)
        _expect_equal(loaded.session_id, session_id, "StoredSession.session_id")
        _expect_equal(loaded.started_calls, frozenset(), "started_calls with none recorded")
        _expect_equal(loaded.updated_at.utcoffset(), timedelta(0), "updated_at's UTC offset")
        _expect_equal(await store.transcript(session_id), items, "transcript() after a save")


async def check_replace(open_store: OpenStore) -> None:
    """A save replaces the whole previous document: no item or key of it survives."""
    (session_id,) = _session_ids("replace")
    async with open_store() as store:
        await _save(store, session_id, [_user(f"a{n}") for n in range(5)], old={"x": 1})
        second = await _save(store, session_id, [_user("b0"), _user("b1")], new=[1])
        await _expect_document(store, session_id, second, "after replacing a document")
        _expect_equal(await store.transcript(session_id), [_user("b0"), _user("b1")], "items")


async def check_list_order(open_store: OpenStore) -> None:
    """``list_sessions`` lists every saved session once, most recently updated first."""
    ids = _session_ids("list", 3)
    async with open_store() as store:
        for count, session_id in enumerate(ids, start=1):
            await _save(store, session_id, [_user("x")] * count)
        expected = [(ids[2], 3), (ids[1], 2), (ids[0], 1)]
        _expect_equal(await _listed(store, ids), expected, "order after three saves")
        await _save(store, ids[0], [_user("y")] * 4)
        expected = [(ids[0], 4), (ids[2], 3), (ids[1], 2)]
        _expect_equal(await _listed(store, ids), expected, "order after re-saving the oldest")
        times = [info.updated_at for info in await store.list_sessions() if info.session_id in ids]
        _expect_equal(times, sorted(times, reverse=True), "updated_at, newest first")


async def check_delete(open_store: OpenStore) -> None:
    """``delete`` forgets the document and started calls of one session only."""
    doomed, kept = _session_ids("delete", 2)
    async with open_store() as store:
        for session_id in (doomed, kept):
            await _save(store, session_id, [_calls("c1")])
            await store.record_call_started(session_id, "c1", "write_file")
        _expect_equal(await store.delete(doomed), True, "delete() of a saved session")
        _expect_equal(await store.load(doomed), None, "load() after delete")
        _expect_equal(await store.transcript(doomed), None, "transcript() after delete")
        _expect_equal(await _listed(store, [doomed, kept]), [(kept, 1)], "list after delete")
        _expect_equal(await store.delete(doomed), False, "delete() of a deleted session")
        await _save(store, doomed, [_calls("c1")])
        _expect_equal(await _started(store, doomed), frozenset(), "deleted, then saved again")
        _expect_equal(await _started(store, kept), frozenset({"c1"}), "the other session")


async def check_started_calls(open_store: OpenStore) -> None:
    """Started calls are in doubt until a saved transcript answers them, then cleared for good."""
    session_id, other = _session_ids("started", 2)
    async with open_store() as store:
        await store.record_call_started(session_id, "c1", "write_file")
        _expect_equal(await store.load(session_id), None, "load() with no document")
        _expect_equal(await _listed(store, [session_id]), [], "list with no document")
        head = [_user("go"), _calls("c1", "c2")]
        await _save(store, session_id, head)
        await store.record_call_started(session_id, "c2", "write_file")
        _expect_equal(await _started(store, session_id), {"c1", "c2"}, "none answered")
        await _save(store, session_id, [*head, _result("c1")])
        _expect_equal(await _started(store, session_id), {"c2"}, "after c1's result was saved")
        compacted = [_user("summary"), _calls("c2")]
        await _save(store, session_id, compacted)
        _expect_equal(await _started(store, session_id), {"c2"}, "compaction dropped c1's pair")
        await store.record_call_started(session_id, "c2", "write_file")
        _expect_equal(await _started(store, session_id), {"c2"}, "after recording c2 twice")
        await _save(store, other, [_calls("c2")])
        _expect_equal(await _started(store, other), frozenset(), "another session's calls")
        await _save(store, session_id, [*compacted, _result("c2")])
        _expect_equal(await _started(store, session_id), frozenset(), "every call answered")


async def check_reopen(open_store: OpenStore) -> None:
    """Documents and started calls survive closing and reopening the store."""
    (session_id,) = _session_ids("reopen")
    async with open_store() as store:
        document = await _save(store, session_id, [_user("go"), _calls("c1")], turn=1)
        await store.record_call_started(session_id, "c1", "write_file")
    async with open_store() as store:
        await _expect_document(store, session_id, document, "after reopening")
        _expect_equal(await _started(store, session_id), {"c1"}, "started calls after reopening")
        _expect_equal(await _listed(store, [session_id]), [(session_id, 2)], "after reopening")


def _bad_documents(session_id: str, items: list[Any]) -> list[tuple[str, Any]]:
    good = sample_checkpoint(session_id, [])
    good["transcript"] = items
    return [
        ("not a mapping", [good]),
        ("no format", {k: v for k, v in good.items() if k != "format"}),
        ("another format", {**good, "format": "something.else"}),
        ("no version", {k: v for k, v in good.items() if k != "version"}),
        ("a string version", {**good, "version": "1"}),
        ("a boolean version", {**good, "version": True}),
        ("version 0", {**good, "version": 0}),
        ("another session's id", {**good, "session_id": session_id + "-other"}),
        ("no transcript", {k: v for k, v in good.items() if k != "transcript"}),
        ("a transcript mapping", {**good, "transcript": {"0": items[0]}}),
        ("a string item", {**good, "transcript": [*items, "hello"]}),
        ("an item without parts", {**good, "transcript": [*items, {"kind": "user"}]}),
        ("a tuple", {**good, "extra": (1, 2)}),
        ("a NaN", {**good, "extra": [math.nan]}),
        ("a non-string key", {**good, "extra": {1: "one"}}),
        ("a set", {**good, "extra": {"a"}}),
    ]


async def check_rejects_bad_documents(open_store: OpenStore) -> None:
    """A malformed document raises ``CheckpointError`` naming the session; nothing changes."""
    saved, fresh = _session_ids("bad", 2)
    items = [_user("go"), _calls("c1")]
    async with open_store() as store:
        await _save(store, saved, items, turn=3)
        await store.record_call_started(saved, "c1", "write_file")
        before, listed = await _load(store, saved), await _listed(store, [saved, fresh])
        for session_id in (saved, fresh):
            for label, bad in _bad_documents(session_id, [unstructure(item) for item in items]):
                try:
                    await store.save_checkpoint(session_id, bad)
                except CheckpointError as error:
                    _expect(session_id in str(error), f"{label}: {error} names no session")
                else:
                    raise AssertionError(f"saving {label} did not raise CheckpointError")
                _expect_equal(await store.load(saved), before, f"session after saving {label}")
                _expect_equal(await store.load(fresh), None, f"unsaved session after {label}")
                _expect_equal(await _listed(store, [saved, fresh]), listed, f"after {label}")


async def check_documents_are_copied(open_store: OpenStore) -> None:
    """Mutating a saved or a loaded document never changes what the store holds."""
    (session_id,) = _session_ids("copied")
    async with open_store() as store:
        document = await _save(store, session_id, [_user("go")], nested={"list": [1]})
        expected = json.loads(json.dumps(document))
        document["nested"]["list"].append(2)
        document["transcript"].append(document["transcript"][0])
        await _expect_document(store, session_id, expected, "after mutating the saved document")
        loaded = await _load(store, session_id)
        loaded.checkpoint["nested"]["list"].clear()
        loaded.checkpoint["transcript"].clear()
        await _expect_document(store, session_id, expected, "after mutating a loaded document")


async def check_sessions_isolated(open_store: OpenStore) -> None:
    """Many sessions saved in turn each keep their own document and started calls."""
    ids = _session_ids("isolated", 12)
    documents: dict[str, dict[str, Any]] = {}
    async with open_store() as store:
        for round_number in range(3):
            for index, session_id in enumerate(ids):
                items = [_user(f"{index}/{n}") for n in range(index + round_number)]
                documents[session_id] = await _save(store, session_id, items, index=index)
        await store.record_call_started(ids[0], "only-0", "write_file")
        _expect_equal(await store.delete(ids[1]), True, "delete() of one of many sessions")
        for index, session_id in enumerate(ids[2:], start=2):
            await _expect_document(store, session_id, documents[session_id], f"session {index}")
            _expect_equal(await _started(store, session_id), frozenset(), f"session {index}")


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


def _long_transcript(count: int) -> list[Item]:
    items: list[Item] = [Item.text(ItemKind.SYSTEM, "long session")]
    while len(items) < count:
        call_id = f"call-{len(items)}"
        items += [_user(f"step {len(items)}"), _calls(call_id), _result(call_id)]
    return items[:count]


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


def _turn_document(
    session_id: str, transcript: list[Any], turn: dict[str, Any] | None, **extra: Any
) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "version": 1,
        "session_id": session_id,
        "config": {"session_id": session_id},
        "turn": turn,
        "transcript": list(transcript),
        **extra,
    }


async def check_long_turn(open_store: OpenStore) -> None:
    """One long turn saved as a driver saves it (three saves per tool round, the turn's
    items, tool calls and model call records growing append-only, some in place) loads
    exactly at every point, and so do what ends it: a compaction inside the turn, an
    element replaced by an equal one of other types, a new turn, no turn, a turn whose
    lists are empty, and a turn that is not an object."""
    (session_id,) = _session_ids("long-turn")
    transcript: list[Any] = [unstructure(_user("start a long turn"))]
    turn: dict[str, Any] = {
        "items": [transcript[0]],
        "tool_calls": [],
        "model_calls_made": [],
        "round": 0,
    }
    async with open_store() as store:
        for round_number in range(40):
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
            if round_number % 13 == 0:
                await _expect_document(store, session_id, saved, f"round {round_number}")
        await _expect_document(store, session_id, saved, "the 40th round of one turn")
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
        _expect_equal(await store.delete(session_id), True, "delete() after a long turn")
        _expect_equal(await store.load(session_id), None, "load() after delete()")
        again = _turn_document(session_id, transcript[:1], {"items": [1], "tool_calls": [2]})
        await store.save_checkpoint(session_id, again)
        await _expect_document(store, session_id, again, "a session saved again after delete()")


# -- many writers: versions, leases, claims, approvals, inbox queries ---------------------


_E = TypeVar("_E", bound=Exception)


async def _refused(error_type: type[_E], what: str, call: Callable[[], Awaitable[Any]]) -> _E:
    try:
        await call()
    except error_type as error:
        return error
    except Exception as error:
        raise AssertionError(
            f"{what}: expected {error_type.__name__}, found {type(error).__name__}: {error}"
        ) from error
    raise AssertionError(f"{what}: expected {error_type.__name__}, nothing was raised")


async def check_versions(open_store: OpenStore) -> None:
    """Saves return growing versions; a save based on an old version is refused, unwritten."""
    (session_id,) = _session_ids("versions")
    async with open_store() as store:
        first = await store.save_checkpoint(
            session_id, sample_checkpoint(session_id, [_user("a")]), expected_version=0
        )
        _expect(isinstance(first, int) and first > 0, f"first version: {first!r}, expected > 0")
        _expect_equal((await _load(store, session_id)).version, first, "version after 1 save")
        second = await store.save_checkpoint(
            session_id, sample_checkpoint(session_id, [_user("b")]), expected_version=first
        )
        _expect(second > first, f"second version {second} is not greater than {first}")
        before = await _load(store, session_id)
        for based_on in (first, 0, second + 1):
            error = await _refused(
                StaleSessionError,
                f"a save based on version {based_on} (stored: {second})",
                partial(
                    store.save_checkpoint,
                    session_id,
                    sample_checkpoint(session_id, [_user("lost")]),
                    expected_version=based_on,
                ),
            )
            _expect(session_id in str(error), f"{error} names no session")
            _expect_equal(
                (error.expected, error.found),
                (based_on, second),
                "StaleSessionError's expected and found versions",
            )
            _expect_equal(await store.load(session_id), before, f"after the save on {based_on}")
        unconditional = await store.save_checkpoint(
            session_id, sample_checkpoint(session_id, [_user("c")])
        )
        _expect(unconditional > second, "a save without expected_version is not versioned")
        _expect_equal(await store.delete(session_id), True, "delete() of a versioned session")
        await _refused(
            StaleSessionError,
            "a save based on a version of a deleted session",
            lambda: store.save_checkpoint(
                session_id, sample_checkpoint(session_id, []), expected_version=unconditional
            ),
        )
        _expect_equal(await store.load(session_id), None, "load() after the refused save")
        reborn = await store.save_checkpoint(
            session_id, sample_checkpoint(session_id, []), expected_version=0
        )
        _expect(reborn > unconditional, f"version after delete {reborn} reuses an old one")


async def check_append_after_another_writer(open_store: OpenStore) -> None:
    """A save that appends to what this store last wrote, after another opening rewrote
    the session (shorter, other items), loads back exactly from both openings."""
    (session_id,) = _session_ids("append-after")
    async with open_store() as first, open_store() as second:
        await first.save_checkpoint(
            session_id, sample_checkpoint(session_id, [_user("one"), _user("two")])
        )
        await second.save_checkpoint(session_id, sample_checkpoint(session_id, [_user("other")]))
        items = [_user("one"), _user("two"), _user("three")]
        document = sample_checkpoint(session_id, items)
        await first.save_checkpoint(session_id, document)  # unfenced, no version: it wins
        for store, name in ((first, "the appending store"), (second, "the other opening")):
            await _expect_document(store, session_id, document, f"read by {name}")
            _expect_equal(await store.transcript(session_id), items, f"items read by {name}")


async def check_two_writers(open_store: OpenStore) -> None:
    """Two drivers of one session: the later save based on the same version is refused."""
    (session_id,) = _session_ids("two-writers")
    async with open_store() as first, open_store() as second:
        await first.save_checkpoint(session_id, sample_checkpoint(session_id, [_user("go")]))
        seen_by_first = await _load(first, session_id)
        seen_by_second = await _load(second, session_id)
        step = [_user("go"), _user("first's turn")]
        await first.save_checkpoint(
            session_id,
            sample_checkpoint(session_id, step),
            expected_version=seen_by_first.version,
        )
        await _refused(
            StaleSessionError,
            "the second driver's save, based on the version both loaded",
            lambda: second.save_checkpoint(
                session_id,
                sample_checkpoint(session_id, [_user("go"), _user("second's turn")]),
                expected_version=seen_by_second.version,
            ),
        )
        _expect_equal(await second.transcript(session_id), step, "the first driver's turn kept")

        base = (await _load(first, session_id)).version
        outcomes: list[str] = []

        async def race(writer: int) -> None:
            document = sample_checkpoint(session_id, [_user(f"racer {writer}")])
            try:
                await (first if writer % 2 else second).save_checkpoint(
                    session_id, document, expected_version=base
                )
            except StaleSessionError:
                outcomes.append("stale")
            else:
                outcomes.append(f"saved {writer}")

        async with anyio.create_task_group() as group:
            for writer in range(8):
                group.start_soon(race, writer)
        winners = [outcome for outcome in outcomes if outcome != "stale"]
        _expect_equal(len(winners), 1, f"saves based on one version that succeeded ({outcomes})")
        winner = int(winners[0].split()[1])
        _expect_equal(
            await first.transcript(session_id), [_user(f"racer {winner}")], "the winner's save"
        )


async def check_leases(open_store: OpenStore) -> None:
    """A lease excludes other owners and unfenced writes; renew, release, growing tokens."""
    (session_id,) = _session_ids("leases")
    async with open_store() as store:
        lease, version = await _check_lease_excludes(store, session_id)
        again = await _check_lease_renewed(store, session_id, lease, version)
        await _check_lease_released(store, session_id, again)


async def _check_lease_excludes(store: SessionStore, session_id: str) -> tuple[Lease, int]:
    """worker-a's lease refuses worker-b's acquire and saves without its token, writing
    nothing; the lease and the version saved under it are returned."""
    lease = await store.acquire(session_id, "worker-a", 60)
    _expect_equal((lease.session_id, lease.owner), (session_id, "worker-a"), "lease")
    error = await _refused(
        LeaseHeldError,
        "another owner's acquire of a leased session",
        lambda: store.acquire(session_id, "worker-b", 60),
    )
    _expect_equal(error.holder, "worker-a", "LeaseHeldError.holder")
    version = await store.save_checkpoint(
        session_id,
        sample_checkpoint(session_id, [_user("leased")]),
        expected_version=0,
        fencing_token=lease.token,
    )
    before = await _load(store, session_id)
    await _refused(
        LeaseLostError,
        "an unfenced save under another owner's live lease",
        lambda: store.save_checkpoint(session_id, sample_checkpoint(session_id, [])),
    )
    await _refused(
        LeaseLostError,
        "a save with a made-up token",
        lambda: _fenced_save(store, session_id, lease.token + 1000),
    )
    _expect_equal(await store.load(session_id), before, "after the refused saves")
    return lease, version


def _fenced_save(store: SessionStore, session_id: str, token: int) -> Awaitable[int]:
    """Save an empty session with fencing token ``token``."""
    return store.save_checkpoint(session_id, sample_checkpoint(session_id, []), fencing_token=token)


async def _check_lease_renewed(
    store: SessionStore, session_id: str, lease: Lease, version: int
) -> Lease:
    """Renewing keeps the token and extends the lease; re-acquiring gives a newer token
    that supersedes the old one (whose release is a no-op); returns the newer lease."""
    renewed = await store.renew(lease, 120)
    _expect_equal(renewed.token, lease.token, "token after renew")
    _expect(renewed.expires_at > lease.expires_at, "renew did not extend the lease")
    again = await store.acquire(session_id, "worker-a", 60)
    _expect(again.token > lease.token, "re-acquiring by the same owner gives a newer token")
    await _refused(
        LeaseLostError,
        "a save with the owner's superseded token",
        lambda: _fenced_save(store, session_id, lease.token),
    )
    await store.release(lease)  # not current: a no-op
    await store.save_checkpoint(
        session_id,
        sample_checkpoint(session_id, [_user("leased"), _user("more")]),
        expected_version=version,
        fencing_token=again.token,
    )
    return again


async def _check_lease_released(store: SessionStore, session_id: str, again: Lease) -> None:
    """A released lease's token and renew are refused, unfenced saves work again, a new
    owner's token is greater, and a ttl that is not a positive finite number is refused."""
    await store.release(again)
    await _refused(
        LeaseLostError,
        "a save with a released token",
        lambda: _fenced_save(store, session_id, again.token),
    )
    await _refused(LeaseLostError, "renewing a released lease", lambda: store.renew(again, 5))
    await store.save_checkpoint(session_id, sample_checkpoint(session_id, [_user("free")]))
    other = await store.acquire(session_id, "worker-b", 60)
    _expect(other.token > again.token, "a new owner's token is not greater")
    for ttl in (0, -1, math.nan, math.inf):
        await _refused(
            InvalidInputError, f"ttl {ttl}", partial(store.acquire, session_id, "x", ttl)
        )
    await store.release(other)


async def check_refused_appends(open_store: OpenStore) -> None:
    """A save that only appends to what this store itself last wrote or read is refused like
    any other, and writes nothing: under another owner's live lease, with a made-up,
    superseded or released token, or based on another version. (A store may take a
    shorter way for such saves; the session is read back before each one.)"""
    (session_id,) = _session_ids("appends")
    async with open_store() as store:
        version = await store.save_checkpoint(
            session_id, sample_checkpoint(session_id, [_user("one")])
        )
        more = sample_checkpoint(session_id, [_user("one"), _user("two")])
        lease = await store.acquire(session_id, "worker-b", 60)
        newer = lease

        def append(**options: Any) -> Awaitable[int]:
            return store.save_checkpoint(session_id, more, **options)

        refusals: list[tuple[type[Exception], str, Callable[[], Awaitable[int]]]] = [
            (LeaseLostError, "an unfenced append under another owner's live lease", append),
            (
                LeaseLostError,
                "an append with a made-up token",
                lambda: append(fencing_token=lease.token + 1000),
            ),
            (
                StaleSessionError,
                "an append based on a version the store never had",
                lambda: append(expected_version=version + 1000, fencing_token=lease.token),
            ),
            (
                StaleSessionError,
                "an append expecting no session",
                lambda: append(expected_version=0, fencing_token=lease.token),
            ),
            (
                LeaseLostError,
                "an append with a superseded token",
                lambda: append(fencing_token=lease.token),
            ),
            (
                LeaseLostError,
                "an append with a released token",
                lambda: append(fencing_token=newer.token),
            ),
        ]
        for number, (error_type, what, call) in enumerate(refusals):
            if number == 4:
                newer = await store.acquire(session_id, "worker-b", 60)
            elif number == 5:
                await store.release(newer)
            before = await _load(store, session_id)
            await _refused(error_type, what, call)
            _expect_equal(await store.load(session_id), before, f"after {what}")
        saved = await append(expected_version=version)
        _expect(saved != version, f"the accepted append kept version {version}")
        await _expect_document(store, session_id, more, "the accepted append")


async def check_lease_takeover(open_store: OpenStore) -> None:
    """After a lease expires another worker takes over; the old owner's save and claim fail."""
    (session_id,) = _session_ids("takeover")
    async with open_store() as store:
        dead = await store.acquire(session_id, "worker-dead", 0.2)
        await store.save_checkpoint(
            session_id,
            sample_checkpoint(session_id, [_user("go"), _calls("c1")]),
            fencing_token=dead.token,
        )
        before = await _load(store, session_id)
        await anyio.sleep(0.4)
        alive = await store.acquire(session_id, "worker-alive", 60)
        _expect(alive.token > dead.token, "the takeover's token is not greater")
        await _refused(
            LeaseLostError,
            "the old owner's save after the takeover",
            lambda: store.save_checkpoint(
                session_id, sample_checkpoint(session_id, [_user("late")]), fencing_token=dead.token
            ),
        )
        await _refused(
            LeaseLostError,
            "the old owner's claim after the takeover",
            lambda: store.claim(
                session_id,
                "c1",
                tool_name="write_file",
                input_digest=_digest("c1"),
                fencing_token=dead.token,
            ),
        )
        await _refused(LeaseLostError, "the old owner's renew", lambda: store.renew(dead, 60))
        _expect_equal(await store.load(session_id), before, "after the old owner's attempts")
        await store.claim(
            session_id,
            "c1",
            tool_name="write_file",
            input_digest=_digest("c1"),
            fencing_token=alive.token,
        )
        await store.release(alive)


def _digest(call_id: str) -> str:
    return input_digest("write_file", {"path": f"/tmp/{call_id}"})


async def check_claims(open_store: OpenStore) -> None:
    """A call is claimed once, ever; approvals bind the claim to the approved input.

    A decision keeps its reason and edited input exactly (and a copy of them);
    a reason that is not a str, an edit with a denial or an edit that is not
    JSON is refused with ``InvalidInputError``.
    """
    (session_id,) = _session_ids("claims")
    async with open_store() as store:
        await _save(store, session_id, [_user("go"), _calls("c1", "c2", "c3", "c4", "c5")])
        await _check_claimed_once(store, session_id)
        await _check_claims_against_decisions(store, session_id)
        await _check_second_decisions(store, session_id)
        await _check_claims_after_results(store, session_id)
        await _check_decision_details(store)


def _claim_call(
    store: SessionStore, session_id: str, call_id: str, digest_of: str | None = None
) -> Awaitable[Claim]:
    """Claim ``call_id`` (a ``write_file`` call) for the input of ``digest_of`` (its own)."""
    digest = _digest(call_id if digest_of is None else digest_of)
    return store.claim(session_id, call_id, tool_name="write_file", input_digest=digest)


async def _check_claimed_once(store: SessionStore, session_id: str) -> None:
    """c1's claim says what it claims and marks it started; a second claim is refused."""
    claim = await _claim_call(store, session_id, "c1")
    _expect_equal(
        (claim.session_id, claim.call_id, claim.tool_name, claim.input_digest),
        (session_id, "c1", "write_file", _digest("c1")),
        "the claim",
    )
    _expect_equal(await _started(store, session_id), {"c1"}, "started calls after a claim")
    error = await _refused(
        ClaimError, "a second claim of c1", lambda: _claim_call(store, session_id, "c1")
    )
    _expect_equal(error.reason, "claimed", "reason of a second claim")


async def _check_claims_against_decisions(store: SessionStore, session_id: str) -> None:
    """A started call (c2), other input than approved (c3) and a denied call (c4) are
    not claimed; the approved input (c3) is."""
    await store.record_call_started(session_id, "c2", "write_file")
    await _refused(
        ClaimError,
        "a claim of a call recorded as started",
        lambda: _claim_call(store, session_id, "c2"),
    )
    await store.record_approval(session_id, "c3", input_digest=_digest("c3"), approved=True)
    error = await _refused(
        ClaimError,
        "a claim of c3 for other input than approved",
        lambda: _claim_call(store, session_id, "c3", digest_of="other"),
    )
    _expect_equal(error.reason, "digest", "reason of a claim for other input")
    await _claim_call(store, session_id, "c3")
    await store.record_approval(session_id, "c4", input_digest=_digest("c4"), approved=False)
    error = await _refused(
        ClaimError, "a claim of a denied call", lambda: _claim_call(store, session_id, "c4")
    )
    _expect_equal(error.reason, "denied", "reason of a claim of a denied call")


async def _check_second_decisions(store: SessionStore, session_id: str) -> None:
    """The same decision again is kept; a different one, or one on a claimed call, is
    refused."""
    same = await store.record_approval(session_id, "c4", input_digest=_digest("c4"), approved=False)
    _expect_equal(same.approved, False, "recording the same decision again")
    for digest, approved in ((_digest("c4"), True), (_digest("x"), False)):
        error = await _refused(
            ClaimError,
            "a different decision on a decided call",
            partial(
                store.record_approval, session_id, "c4", input_digest=digest, approved=approved
            ),
        )
        _expect_equal(error.reason, "decided", "reason of a second decision")
    await _refused(
        ClaimError,
        "a decision on a claimed call",
        lambda: store.record_approval(session_id, "c1", input_digest=_digest("c1"), approved=True),
    )


async def _check_claims_after_results(store: SessionStore, session_id: str) -> None:
    """The loaded session holds the claims and decisions; a result ends a call's doubt,
    and an answered call stays unclaimable after its result is compacted away."""
    loaded = await _load(store, session_id)
    _expect_equal(loaded.started_calls, {"c1", "c2", "c3"}, "claimed calls in doubt")
    _expect_equal(
        {c: (a.input_digest, a.approved) for c, a in loaded.approvals.items()},
        {"c3": (_digest("c3"), True), "c4": (_digest("c4"), False)},
        "approvals of the loaded session",
    )
    answered = [_user("go"), _calls("c1", "c2", "c3", "c4", "c5"), _result("c1")]
    await _save(store, session_id, answered)
    _expect_equal(await _started(store, session_id), {"c2", "c3"}, "after c1's result")
    await _save(store, session_id, [_user("compacted")])
    await _refused(
        ClaimError,
        "a claim of an answered call whose result was compacted away",
        lambda: _claim_call(store, session_id, "c1"),
    )
    await _claim_call(store, session_id, "c5")


_EDITED = {"path": "/tmp/edited <b>é</b>", "lines": [1, 2.5, None, True, {"k": "v"}]}


async def _check_decision_details(store: SessionStore) -> None:
    """A decision keeps its reason and edited input, exactly, copied; bad ones are refused."""
    (session_id,) = _session_ids("decision-details")
    await _save(store, session_id, [_user("go"), _calls("d1", "d2", "d3", "d4")])
    edited = json.loads(json.dumps(_EDITED))
    digest = input_digest("write_file", edited)
    approval = await store.record_approval(
        session_id, "d1", input_digest=digest, approved=True, reason="ok <i>", edited_input=edited
    )
    edited["path"] = "/tmp/changed after recording"
    _expect_equal(
        (approval.input_digest, approval.approved, approval.reason, approval.edited_input),
        (digest, True, "ok <i>", _EDITED),
        "an approval recorded with a reason and edited input",
    )
    denial = await store.record_approval(
        session_id, "d2", input_digest=_digest("d2"), approved=False, reason="not today"
    )
    _expect_equal((denial.reason, denial.edited_input), ("not today", None), "a denial")
    plain = await store.record_approval(session_id, "d3", input_digest=_digest("d3"), approved=True)
    _expect_equal((plain.reason, plain.edited_input), (None, None), "a plain approval")
    again = await store.record_approval(
        session_id, "d2", input_digest=_digest("d2"), approved=False
    )
    _expect_equal(again.reason, "not today", "the same decision again keeps the first's reason")
    bad: list[tuple[str, dict[str, Any]]] = [
        ("a reason that is not a str", {"approved": False, "reason": 5}),
        ("edited input with a denial", {"approved": False, "edited_input": {"path": "/x"}}),
        ("edited input that is not JSON (a set)", {"approved": True, "edited_input": {1, 2}}),
        ("edited input that is not JSON (NaN)", {"approved": True, "edited_input": math.nan}),
        ("edited input with an int key", {"approved": True, "edited_input": {1: "x"}}),
    ]
    record_d4 = partial(store.record_approval, session_id, "d4", input_digest=_digest("d4"))
    for what, arguments in bad:
        refused = partial(record_d4, **arguments)
        await _refused(InvalidInputError, f"a decision with {what}", refused)
    loaded = await _load(store, session_id)
    _expect_equal(
        {c: (a.approved, a.reason, a.edited_input) for c, a in loaded.approvals.items()},
        {
            "d1": (True, "ok <i>", _EDITED),
            "d2": (False, "not today", None),
            "d3": (True, None, None),
        },
        "the decisions loaded (d4's refused decisions wrote nothing)",
    )
    loaded.approvals["d1"].edited_input["path"] = "/tmp/changed after loading"
    reloaded = await _load(store, session_id)
    _expect_equal(reloaded.approvals["d1"].edited_input, _EDITED, "a loaded edited input, copied")
    await store.claim(session_id, "d1", tool_name="write_file", input_digest=digest)
    await store.delete(session_id)


async def check_concurrent_claims(open_store: OpenStore) -> None:
    """Many claimants of one call at once, in tasks and in threads: exactly one wins."""
    (session_id,) = _session_ids("claim-race")
    async with open_store() as store:
        await _save(store, session_id, [_calls("c1", "c2")])
        won: list[int] = []

        async def claim_in(claimant: int, target: SessionStore, call_id: str) -> None:
            try:
                await target.claim(
                    session_id, call_id, tool_name="write_file", input_digest=_digest(call_id)
                )
            except ClaimError:
                return
            won.append(claimant)

        async with anyio.create_task_group() as group:
            for claimant in range(8):
                group.start_soon(claim_in, claimant, store, "c1")
        _expect_equal(len(won), 1, f"task claimants of one call that won ({won})")

        won.clear()

        def in_thread(claimant: int) -> None:
            async def claim_in_own_store() -> None:
                async with open_store() as own:
                    await claim_in(claimant, own, "c2")

            anyio.run(claim_in_own_store)

        async with anyio.create_task_group() as group:
            for claimant in range(4):
                group.start_soon(anyio.to_thread.run_sync, in_thread, claimant)
        _expect_equal(len(won), 1, f"thread claimants of one call that won ({won})")
        _expect_equal(await _started(store, session_id), {"c1", "c2"}, "both calls in doubt")


async def check_claim_survives_crash(open_store: OpenStore) -> None:
    """A crash between claim and result leaves the call in doubt: never claimable again."""
    (session_id,) = _session_ids("crash")
    async with open_store() as store:
        version = await store.save_checkpoint(
            session_id, sample_checkpoint(session_id, [_user("go"), _calls("c1")])
        )
        lease = await store.acquire(session_id, "worker-1", 0.2)
        await store.claim(
            session_id,
            "c1",
            tool_name="write_file",
            input_digest=_digest("c1"),
            fencing_token=lease.token,
        )
    # worker-1 dies here: no result saved, no release.
    await anyio.sleep(0.4)
    async with open_store() as store:
        loaded = await _load(store, session_id)
        _expect_equal(loaded.started_calls, {"c1"}, "calls in doubt after the crash")
        _expect_equal(loaded.version, version, "version after the crash")
        lease = await store.acquire(session_id, "worker-2", 60)
        await _refused(
            ClaimError,
            "a claim of the in-doubt call by the next worker",
            lambda: store.claim(
                session_id,
                "c1",
                tool_name="write_file",
                input_digest=_digest("c1"),
                fencing_token=lease.token,
            ),
        )
        in_doubt = Item(ItemKind.TOOL, [ToolResultPart("c1", "in doubt", is_error=True)])
        await store.save_checkpoint(
            session_id,
            sample_checkpoint(session_id, [_user("go"), _calls("c1"), in_doubt]),
            expected_version=version,
            fencing_token=lease.token,
        )
        _expect_equal(await _started(store, session_id), frozenset(), "after the in-doubt result")
        await store.release(lease)


def _state_document(
    session_id: str, state: str, *, awaiting: Sequence[str] = (), queued: bool = False
) -> dict[str, Any]:
    calls = [
        {"index": n, "call": {"id": call_id}, "status": "awaiting_approval"}
        for n, call_id in enumerate(awaiting)
    ]
    return sample_checkpoint(
        session_id,
        [_user("go"), _calls(*awaiting)] if awaiting else [_user("go")],
        state=state,
        turn={"round": {"calls": calls}} if awaiting else None,
        pending_input=[unstructure(_user("queued"))] if queued else [],
    )


async def check_inbox_queries(open_store: OpenStore) -> None:
    """Sessions awaiting approval and ready to advance, from the status saved with each save."""
    approval, paused, queued, idle = _session_ids("inbox", 4)
    ours = {approval, paused, queued, idle}
    async with open_store() as store:
        await store.save_checkpoint(
            approval, _state_document(approval, "AWAITING_APPROVAL", awaiting=["c1", "c2"])
        )
        await store.save_checkpoint(paused, _state_document(paused, "AFTER_TOOL_RESULT"))
        await store.save_checkpoint(queued, _state_document(queued, "IDLE", queued=True))
        await store.save_checkpoint(idle, _state_document(idle, "IDLE"))
        _expect_equal((await _load(store, approval)).status, SessionStatus.AWAITING_APPROVAL, "")

        async def inbox() -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
            return [
                (s.session_id, s.pending_approvals, s.undecided)
                for s in await store.sessions_awaiting_approval()
                if s.session_id in ours
            ]

        async def ready() -> list[str]:
            return [s.session_id for s in await store.sessions_ready() if s.session_id in ours]

        _expect_equal(await inbox(), [(approval, ("c1", "c2"), ("c1", "c2"))], "the inbox")
        _expect_equal(await ready(), [paused, queued], "ready sessions, oldest first")
        await store.record_approval(approval, "c1", input_digest=_digest("c1"), approved=True)
        _expect_equal(await inbox(), [(approval, ("c1", "c2"), ("c2",))], "one call decided")
        await store.record_approval(approval, "c2", input_digest=_digest("c2"), approved=False)
        _expect_equal(await inbox(), [], "the inbox once every call is decided")
        _expect_equal(await ready(), [approval, paused, queued], "decided sessions are ready")
        lease = await store.acquire(paused, "worker-a", 60)
        _expect_equal(await ready(), [approval, queued], "a leased session is not ready")
        await store.release(lease)
        taken: list[Lease] = []
        while (next_lease := await store.acquire_ready("worker-b", 60)) is not None:
            taken.append(next_lease)
            _expect(len(taken) < 10_000, "acquire_ready() never ran out of ready sessions")
        _expect_equal(
            [lease.session_id for lease in taken if lease.session_id in ours],
            [approval, paused, queued],
            "sessions acquire_ready() leased, oldest first",
        )
        _expect_equal(await ready(), [], "ready sessions once all are leased")
        for lease in taken:
            await store.release(lease)
        await store.save_checkpoint(idle, _state_document(idle, "AFTER_TOOL_RESULT"))
        _expect_equal(await ready(), [approval, paused, queued, idle], "after a status change")
        for session_id in ours:
            await store.delete(session_id)
