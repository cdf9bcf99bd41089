"""The checks of :mod:`agentloop.testing.store_conformance` on many writers: versions,
two writers of one session, leases, refused appends and a lease taken over after expiry.

Each ``check_*`` coroutine takes ``open_store`` and raises ``AssertionError``
saying what was expected and what was found.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from ..core._errors import InvalidInputError
from ..loop._session_store import (
    Lease,
    LeaseHeldError,
    LeaseLostError,
    SessionStore,
    StaleSessionError,
)
from ._store_checks import (
    OpenStore,
    _calls,
    _digest,
    _expect,
    _expect_document,
    _expect_equal,
    _load,
    _refused,
    _session_ids,
    _user,
    sample_checkpoint,
)

__all__ = [
    "check_append_after_another_writer",
    "check_lease_takeover",
    "check_leases",
    "check_refused_appends",
    "check_two_writers",
    "check_versions",
]


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
        await _check_appends_refused(store, session_id, more, version)
        saved = await store.save_checkpoint(session_id, more, expected_version=version)
        _expect(saved != version, f"the accepted append kept version {version}")
        await _expect_document(store, session_id, more, "the accepted append")


async def _check_appends_refused(
    store: SessionStore, session_id: str, more: dict[str, Any], version: int
) -> None:
    """Appending ``more`` to the session saved at ``version`` is refused, writing nothing,
    under worker-b's lease and with each token and version that does not hold."""
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
