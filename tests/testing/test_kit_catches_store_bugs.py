"""The store conformance checks for claims and leases name the rule a buggy store breaks."""

from __future__ import annotations

import re
from contextlib import nullcontext
from typing import Any

import pytest

from agentloop.store import Claim, ClaimError, Lease, MemorySessionStore, SessionStore
from agentloop.testing.store_conformance import check_claims, check_leases

pytestmark = pytest.mark.anyio


class ClaimsTwice(MemorySessionStore):
    """The bug: a call claimed before is claimed again (its first claim is handed back)."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: dict[tuple[str, str], Claim] = {}

    async def claim(self, session_id: str, call_id: str, **options: Any) -> Claim:
        try:
            claim = await super().claim(session_id, call_id, **options)
        except ClaimError as error:
            if error.reason != "claimed":
                raise
            return self.claims[session_id, call_id]
        self.claims[session_id, call_id] = claim
        return claim


class ForgetsStartedCalls(MemorySessionStore):
    """The bug: a call recorded as started is not remembered, so it can be claimed."""

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        return None


class RenewsWithoutExtending(MemorySessionStore):
    """The bug: renew extends the lease but hands back the old expiry."""

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        await super().renew(lease, ttl)
        return lease


class KeepsReleasedLeases(MemorySessionStore):
    """The bug: release does nothing, so a released token still fences saves."""

    async def release(self, lease: Lease) -> None:
        return None


@pytest.mark.parametrize(
    ("store_type", "message"),
    [
        (ClaimsTwice, "a second claim of c1: expected ClaimError, nothing was raised"),
        (
            ForgetsStartedCalls,
            "a claim of a call recorded as started: expected ClaimError, nothing was raised",
        ),
    ],
)
async def test_check_claims_names_the_claim_a_buggy_store_lets_through(
    store_type: type[SessionStore], message: str
) -> None:
    store = store_type()
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        await check_claims(lambda: nullcontext(store))


@pytest.mark.parametrize(
    ("store_type", "message"),
    [
        (RenewsWithoutExtending, "renew did not extend the lease"),
        (
            KeepsReleasedLeases,
            "a save with a released token: expected LeaseLostError, nothing was raised",
        ),
    ],
)
async def test_check_leases_names_the_lease_rule_a_buggy_store_breaks(
    store_type: type[SessionStore], message: str
) -> None:
    store = store_type()
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        await check_leases(lambda: nullcontext(store))


async def test_a_correct_store_passes_the_claim_and_lease_checks() -> None:
    store = MemorySessionStore()
    await check_claims(lambda: nullcontext(store))
    await check_leases(lambda: nullcontext(store))
