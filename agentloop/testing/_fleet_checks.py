"""Conformance checks for what a worker fleet's host relies on beyond saves and claims.

``record_approval`` says whether it recorded the decision; the approval inbox
gives each undecided call's tool, input and digest; ``enqueue_input`` queues
input durably (and refuses what it must, changing nothing). Part of
:mod:`agentloop.testing.store_conformance`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..core._errors import InvalidInputError
from ..core._items import Item, ItemKind, ToolResultPart
from ..host._enqueue import enqueue_input
from ..loop._converter import unstructure
from ..loop._session_store import (
    ClaimError,
    LeaseHeldError,
    PendingCall,
    SessionStatus,
    SessionStore,
)
from ._store_checks import (
    OpenStore,
    _calls,
    _digest,
    _expect,
    _expect_equal,
    _load,
    _refused,
    _session_ids,
    _user,
    sample_checkpoint,
)

__all__ = ["check_approval_records", "check_enqueue_input", "check_inbox_details"]


def _waiting(session_id: str, call_ids: tuple[str, ...]) -> dict[str, Any]:
    """A document whose round waits for decisions on ``call_ids`` (``write_file`` calls)."""
    calls = [
        {
            "index": n,
            "call": {"id": call_id, "name": "write_file", "input": {"path": f"/tmp/{call_id}"}},
            "status": "awaiting_approval",
        }
        for n, call_id in enumerate(call_ids)
    ]
    return sample_checkpoint(
        session_id,
        [_user("go"), _calls(*call_ids)],
        state="AWAITING_APPROVAL",
        turn={"round": {"calls": calls}},
        pending_input=[],
        follow_ups=[],
    )


def _pending(call_id: str) -> PendingCall:
    return PendingCall(
        call_id=call_id,
        tool_name="write_file",
        input={"path": f"/tmp/{call_id}"},
        input_digest=_digest(call_id),
    )


async def check_approval_records(open_store: OpenStore) -> None:
    """``record_approval`` returns ``newly_recorded=True`` when it wrote the decision.

    The same decision again returns the stored one (equal, ``newly_recorded``
    ``False``, its first reason kept); a conflicting one raises ``ClaimError``
    (``"decided"``) and changes nothing; loaded decisions say ``False``.
    """
    (session_id,) = _session_ids("approval-records")
    async with open_store() as store:
        await store.save_checkpoint(session_id, _waiting(session_id, ("a1", "a2")))
        first = await store.record_approval(
            session_id, "a1", input_digest=_digest("a1"), approved=False, reason="not now"
        )
        _expect_equal(first.newly_recorded, True, "the first record of a decision")
        again = await store.record_approval(
            session_id, "a1", input_digest=_digest("a1"), approved=False, reason="other"
        )
        _expect_equal(
            (again.newly_recorded, again.reason, again.decided_at),
            (False, "not now", first.decided_at),
            "the same decision recorded again",
        )
        _expect_equal(again, first, "the same decision again equals the first")
        for digest, approved in ((_digest("a1"), True), (_digest("other"), False)):
            error = await _refused(
                ClaimError,
                "a conflicting decision",
                partial(
                    store.record_approval, session_id, "a1", input_digest=digest, approved=approved
                ),
            )
            _expect_equal(error.reason, "decided", "reason of a conflicting decision")
        loaded = await _load(store, session_id)
        _expect_equal(dict(loaded.approvals), {"a1": first}, "decisions after the conflict")
        _expect_equal(loaded.approvals["a1"].newly_recorded, False, "a loaded decision")
        await store.delete(session_id)


async def check_inbox_details(open_store: OpenStore) -> None:
    """``sessions_awaiting_approval`` gives each undecided call's tool, input and digest."""
    (session_id,) = _session_ids("inbox-details")
    async with open_store() as store:
        await store.save_checkpoint(session_id, _waiting(session_id, ("p1", "p2")))

        async def row() -> tuple[tuple[str, ...], tuple[PendingCall, ...]] | None:
            for summary in await store.sessions_awaiting_approval():
                if summary.session_id == session_id:
                    return summary.undecided, summary.undecided_calls
            return None

        _expect_equal(
            await row(), (("p1", "p2"), (_pending("p1"), _pending("p2"))), "the inbox row"
        )
        await store.record_approval(session_id, "p1", input_digest=_digest("p1"), approved=True)
        _expect_equal(await row(), (("p2",), (_pending("p2"),)), "the row once p1 is decided")
        await store.record_approval(session_id, "p2", input_digest=_digest("p2"), approved=True)
        _expect_equal(await row(), None, "the row once every call is decided")
        ready = [s for s in await store.sessions_ready() if s.session_id == session_id]
        _expect_equal(
            [(s.undecided, s.undecided_calls) for s in ready], [((), ())], "the ready row"
        )
        await store.delete(session_id)


async def check_enqueue_input(open_store: OpenStore) -> None:
    """``enqueue_input`` queues input durably; bad calls are refused and change nothing.

    Idle: the items join ``pending_input`` and the session is ready. Waiting
    for decisions: they become a follow-up. Refused: an unknown session, a
    single ``Item``, a non-Item, a tool part, no items, a bad ``wait``
    (``InvalidInputError``), a session another owner leases (``LeaseHeldError``).
    """
    idle, waiting, unknown = _session_ids("enqueue", 3)
    hello, more = _user("hello"), _user("and more")
    async with open_store() as store:
        base = sample_checkpoint(idle, [_user("hi")], state="IDLE", pending_input=[])
        await store.save_checkpoint(idle, base)
        await _expect_refusals(store, idle, unknown, hello)
        version = await enqueue_input(store, idle, [hello])
        second = await enqueue_input(store, idle, [more])
        _expect(second > version, f"versions grow: {version}, then {second}")
        loaded = await _load(store, idle)
        _expect_equal(
            (loaded.version, loaded.status, loaded.checkpoint["pending_input"]),
            (second, SessionStatus.READY, [unstructure(hello), unstructure(more)]),
            "an idle session after two enqueue_input calls",
        )
        ready = [s.session_id for s in await store.sessions_ready() if s.session_id == idle]
        _expect_equal(ready, [idle], "the session is ready for a worker")
        await store.save_checkpoint(waiting, _waiting(waiting, ("q1",)))
        await enqueue_input(store, waiting, [hello])
        held = await _load(store, waiting)
        _expect_equal(
            (held.status, held.checkpoint["pending_input"], held.checkpoint["follow_ups"]),
            (
                SessionStatus.AWAITING_APPROVAL,
                [],
                [{"items": [unstructure(hello)], "label": "the user"}],
            ),
            "input queued while a round waits for decisions",
        )
        for session_id in (idle, waiting):
            await store.delete(session_id)


async def _expect_refusals(store: SessionStore, idle: str, unknown: str, item: Item) -> None:
    before = await _load(store, idle)
    tool_part = Item(ItemKind.USER, [ToolResultPart("c1", "made up")])
    bad: list[tuple[str, str, Any, Any]] = [
        ("an unknown session", unknown, [item], "the store has no checkpoint for it"),
        ("an empty session id", "", [item], "session_id must be a non-empty str"),
        ("a single Item", idle, item, "got a single Item"),
        ("a str", idle, "hello", "got a str"),
        ("a non-Item", idle, [item, {"kind": "user"}], "element 1 is dict"),
        ("a tool part", idle, [tool_part], "holds a tool_call or tool_result part"),
        ("no items", idle, [], "expected at least one Item, got none"),
    ]
    for what, session_id, items, message in bad:
        error = await _refused(
            InvalidInputError,
            f"enqueue_input with {what}",
            partial(enqueue_input, store, session_id, items),
        )
        _expect(message in str(error), f"enqueue_input with {what}: message {str(error)!r}")
    await _refused(
        InvalidInputError, "a negative wait", lambda: enqueue_input(store, idle, [item], wait=-1)
    )
    lease = await store.acquire(idle, "conformance-worker", 60)
    held = await _refused(
        LeaseHeldError,
        "enqueue_input under a worker's lease",
        lambda: enqueue_input(store, idle, [item]),
    )
    _expect_equal(held.holder, "conformance-worker", "the holder named by the refusal")
    _expect("retry once the worker releases it" in str(held), f"message {str(held)!r}")
    await store.release(lease)
    after = await _load(store, idle)
    _expect_equal(
        (after.version, after.checkpoint), (before.version, before.checkpoint), "after refusals"
    )
    _expect_equal(await store.load(unknown), None, "the unknown session after the refusal")
