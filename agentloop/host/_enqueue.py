"""``enqueue_input``: queue a user's input for a stored session without building an agent.

The input goes where a driver keeps the input a host submitted: the
document's ``pending_input`` when the session rests idle or paused after a
tool result (the next model call answers it), or a follow-up message when a
round waits for approval decisions (it starts a new turn once the round's
turn finishes). The write is an ordinary save under a short lease of its own
(``acquire``, ``load``, a fenced save based on the loaded version,
``release``), so it works on every ``SessionStore`` and never races a worker:
while a worker holds the session's lease, it is refused (or waited for, with
``wait=``). The session's status becomes ``READY`` when it was idle, so the
next worker (``acquire_ready``) picks it up.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from typing import Any

import anyio

from ..core._errors import InvalidInputError
from ..core._items import Item
from ..loop._converter import unstructure
from ..loop._core import checked_input
from ..loop._session_store import Lease, LeaseHeldError, SessionStore

__all__ = ["enqueue_input"]

_RETRY_INTERVAL = 0.05
_LEASE_TTL = 30.0
"""The enqueuing lease's ttl: it covers one load and one save, and is released at once."""


async def enqueue_input(
    store: SessionStore, session_id: str, items: Sequence[Item], *, wait: float = 0.0
) -> int:
    """Queue ``items`` (user input) for the stored session ``session_id``; its new version.

    Durable on return: the next driver resumed from the store finds the
    input queued, and a worker fleet advances the session (it becomes
    ``READY`` when it was idle). Raises ``InvalidInputError`` for an unknown
    session, an empty or malformed ``items`` (a single ``Item``, a non-Item,
    a tool part) or a bad ``wait``, and ``LeaseHeldError`` when a worker
    holds the session's lease for longer than ``wait`` seconds. Whatever it
    raises, nothing was queued.
    """
    checked = _checked(session_id, items, wait)
    if await store.load(session_id) is None:
        raise _unknown(session_id)
    lease = await _acquire(store, session_id, wait)
    try:
        stored = await store.load(session_id)
        if stored is None:
            raise _unknown(session_id)
        document = _with_input(stored.checkpoint, checked)
        return await store.save_checkpoint(
            session_id, document, expected_version=stored.version, fencing_token=lease.token
        )
    finally:
        with anyio.CancelScope(shield=True):
            await store.release(lease)


def _checked(session_id: str, items: Sequence[Item], wait: float) -> tuple[Item, ...]:
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError(
            f"cannot queue input: session_id must be a non-empty str, got {session_id!r}"
        )
    operation = f"cannot queue input for session {session_id!r}"
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < math.inf:
        raise InvalidInputError(f"{operation}: wait must be seconds >= 0, got {wait!r}")
    if isinstance(items, str | bytes):
        raise InvalidInputError(f"{operation}: expected a sequence of Items, got a str")
    checked = checked_input(items, f"{operation}: enqueue_input")
    if not checked:
        raise InvalidInputError(f"{operation}: expected at least one Item, got none")
    return checked


def _unknown(session_id: str) -> InvalidInputError:
    return InvalidInputError(
        f"cannot queue input for session {session_id!r}: the store has no checkpoint for "
        "it; start the session (agent.start(...) and a save) first"
    )


async def _acquire(store: SessionStore, session_id: str, wait: float) -> Lease:
    """A lease of our own, retried every 50 ms for ``wait`` seconds while a worker holds one."""
    owner = f"enqueue-input-{uuid.uuid4().hex}"
    deadline = anyio.current_time() + wait
    while True:
        try:
            return await store.acquire(session_id, owner, _LEASE_TTL)
        except LeaseHeldError as held:
            if anyio.current_time() >= deadline:
                raise LeaseHeldError(
                    f"cannot queue input for session {session_id!r}: it is leased to "
                    f"{held.holder!r} until {held.expires_at.isoformat()}; nothing was "
                    "queued: retry once the worker releases it, or pass wait=seconds",
                    session_id=session_id,
                    holder=held.holder,
                    expires_at=held.expires_at,
                ) from None
        await anyio.sleep(_RETRY_INTERVAL)


def _with_input(document: dict[str, Any], items: tuple[Item, ...]) -> dict[str, Any]:
    """The document with ``items`` queued where the driver would queue them in its state."""
    encoded = [unstructure(item) for item in items]
    if document.get("state") in ("AWAITING_APPROVAL", "AWAITING_ANSWER"):
        queued = list(document.get("follow_ups") or [])
        return {**document, "follow_ups": [*queued, {"items": encoded, "label": "the user"}]}
    pending = list(document.get("pending_input") or [])
    return {**document, "pending_input": [*pending, *encoded]}
