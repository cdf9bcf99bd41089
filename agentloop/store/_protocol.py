"""The ``SessionStore`` protocol and its values, re-exported from ``loop._session_store``.

Kept so ``agentloop.store._protocol`` imports keep working; the definitions
live next to the driver that uses them.
"""

from __future__ import annotations

from ..loop._session_store import (
    Claim,
    ClaimError,
    Lease,
    LeaseError,
    LeaseHeldError,
    LeaseLostError,
    RecordedApproval,
    SessionInfo,
    SessionStatus,
    SessionStore,
    SessionSummary,
    StaleSessionError,
    StoredSession,
    input_digest,
)

__all__ = [
    "RecordedApproval",
    "Claim",
    "ClaimError",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "SessionInfo",
    "SessionStatus",
    "SessionStore",
    "SessionSummary",
    "StaleSessionError",
    "StoredSession",
    "input_digest",
]
