"""The checks of :mod:`agentloop.testing.store_conformance` on documents, and the
helpers every check module shares.

Each ``check_*`` coroutine takes ``open_store`` and raises ``AssertionError``
saying what was expected and what was found. The other checks are in
``_transcript_checks`` (documents as a driver grows them), ``_write_checks``
(versions, writers, leases) and ``_claim_checks`` (claims, approvals, the inbox).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any, TypeAlias, TypeVar

from ..core._errors import CheckpointError
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
from ..loop._session_store import SessionStore, StoredSession, input_digest

__all__ = [
    "OpenStore",
    "check_delete",
    "check_documents_are_copied",
    "check_list_order",
    "check_rejects_bad_documents",
    "check_reopen",
    "check_replace",
    "check_round_trip",
    "check_sessions_isolated",
    "check_started_calls",
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


def _digest(call_id: str) -> str:
    return input_digest("write_file", {"path": f"/tmp/{call_id}"})


def _long_transcript(count: int) -> list[Item]:
    items: list[Item] = [Item.text(ItemKind.SYSTEM, "long session")]
    while len(items) < count:
        call_id = f"call-{len(items)}"
        items += [_user(f"step {len(items)}"), _calls(call_id), _result(call_id)]
    return items[:count]


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
