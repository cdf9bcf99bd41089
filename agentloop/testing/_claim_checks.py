"""The checks of :mod:`agentloop.testing.store_conformance` on claims and approvals:
single-use claims (also under task and thread concurrency), a crash between claim and
result, and the inbox queries.

Each ``check_*`` coroutine takes ``open_store`` and raises ``AssertionError``
saying what was expected and what was found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import Any

import anyio

from ..core._errors import InvalidInputError
from ..core._items import (
    Item,
    ItemKind,
    ToolResultPart,
)
from ..loop._converter import unstructure
from ..loop._session_store import (
    Claim,
    ClaimError,
    Lease,
    SessionStatus,
    SessionStore,
    input_digest,
)
from ._store_checks import (
    OpenStore,
    _calls,
    _digest,
    _expect,
    _expect_equal,
    _load,
    _refused,
    _result,
    _save,
    _session_ids,
    _started,
    _user,
    sample_checkpoint,
)

__all__ = [
    "check_claim_survives_crash",
    "check_claims",
    "check_concurrent_claims",
    "check_inbox_queries",
]


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
