"""``run_leased``: do some work on a session while holding its lease, renewed meanwhile.

What the AG-UI endpoint and the A2A server do around every run: take the
session's lease (a run on the same session meanwhile, from this process or
another, is refused as busy), renew it every third of its time, release it
whatever happens (shielded), and raise the work's own error as itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from .._log import get_logger
from ..loop._session_store import Lease, LeaseHeldError, SessionStore
from ._problems import RunRefused

__all__ = ["run_leased"]

log = get_logger()

T = TypeVar("T")


async def run_leased(
    store: SessionStore,
    session_id: str,
    ttl: float,
    work: Callable[[Lease], Awaitable[T]],
    *,
    owner: str = "agentloop-ui",
) -> T:
    """``await work(lease)`` under a fresh lease of ``session_id``; ``RunRefused`` when busy."""
    try:
        lease = await store.acquire(session_id, f"{owner}:{uuid.uuid4().hex}", ttl)
    except LeaseHeldError as held:
        raise RunRefused(
            f"thread {session_id!r} is busy: {held.holder} holds its session until "
            f"{held.expires_at:%H:%M:%S} UTC; wait for that run to finish and send again. "
            "Nothing was changed",
            code="thread_busy",
        ) from None
    lost: list[bool] = []
    failure: Exception | None = None
    done: list[T] = []
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_renew, store, lease, ttl, group.cancel_scope, lost)
            try:
                done.append(await work(lease))
            except Exception as error:  # raised as itself, not in an ExceptionGroup
                failure = error
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await store.release(lease)
    if failure is not None:
        raise failure
    if lost or not done:
        raise RunRefused(
            f"the run lost the lease of thread {session_id!r} (renewing it failed) and "
            "stopped; send another run to go on from what the session saved",
            code="lease_lost",
        )
    return done[0]


async def _renew(
    store: SessionStore, lease: Lease, ttl: float, scope: anyio.CancelScope, lost: list[bool]
) -> None:
    while True:
        await anyio.sleep(ttl / 3)
        try:
            lease = await store.renew(lease, ttl)
        except Exception:
            log.exception("renewing a run's lease failed", session_id=lease.session_id)
            lost.append(True)
            scope.cancel()
            return
