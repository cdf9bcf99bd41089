"""A conformance suite for :class:`agentloop.store.SessionStore` implementations.

Give it ``open_store``: a callable returning an async context manager that
opens the storage under test (calling it again after the block exits must
reopen the *same* storage). Then either ``await check_store(open_store)``, or
mix :class:`StoreConformance` into a pytest class and provide an
``open_store`` fixture; each check then is its own test::

    pytestmark = pytest.mark.anyio

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def open_store(self, tmp_path):
            return lambda: MyStore(tmp_path / "sessions.db")

Every check uses fresh, unique session ids and only looks at those, so the
checks can share one storage. The many-writer checks (versions, two writers,
leases and their takeover after expiry, single-use claims under task and
thread concurrency, a crash between claim and result, the inbox queries)
open the storage twice at once and from other threads: ``open_store`` must
give a store usable from the thread that opened it. The takeover and crash
checks sleep 0.4 s each, to let a 0.2 s lease expire. What a fleet's host
relies on is checked too: the inbox's undecided calls with tool, input and
digest, whether ``record_approval`` recorded the decision, and
``enqueue_input`` (queued durably; bad calls refused, nothing changed).
Failures raise ``AssertionError`` saying what was expected and what was found.
Needs neither pytest nor hypothesis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from ._fleet_checks import check_approval_records, check_enqueue_input, check_inbox_details
from ._store_checks import (
    OpenStore,
    check_append_after_another_writer,
    check_claim_survives_crash,
    check_claims,
    check_concurrent_claims,
    check_concurrent_saves,
    check_delete,
    check_documents_are_copied,
    check_inbox_queries,
    check_large_transcript,
    check_lease_takeover,
    check_leases,
    check_list_order,
    check_long_turn,
    check_prefix_rewrite,
    check_refused_appends,
    check_rejects_bad_documents,
    check_reopen,
    check_replace,
    check_round_trip,
    check_sessions_isolated,
    check_shared_values,
    check_started_calls,
    check_two_writers,
    check_versions,
    sample_checkpoint,
)

__all__ = [
    "CHECKS",
    "SHARED_STORAGE_CHECKS",
    "OpenStore",
    "StoreConformance",
    "check_append_after_another_writer",
    "check_approval_records",
    "check_enqueue_input",
    "check_inbox_details",
    "check_versions",
    "check_two_writers",
    "check_leases",
    "check_lease_takeover",
    "check_claims",
    "check_concurrent_claims",
    "check_claim_survives_crash",
    "check_inbox_queries",
    "check_concurrent_saves",
    "check_delete",
    "check_documents_are_copied",
    "check_large_transcript",
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
    "check_store",
    "sample_checkpoint",
]

CHECKS: tuple[Callable[[OpenStore], Awaitable[None]], ...] = (
    check_round_trip,
    check_replace,
    check_list_order,
    check_delete,
    check_started_calls,
    check_reopen,
    check_rejects_bad_documents,
    check_documents_are_copied,
    check_sessions_isolated,
    check_concurrent_saves,
    check_large_transcript,
    check_prefix_rewrite,
    check_shared_values,
    check_long_turn,
    check_versions,
    check_two_writers,
    check_append_after_another_writer,
    check_leases,
    check_refused_appends,
    check_lease_takeover,
    check_claims,
    check_concurrent_claims,
    check_claim_survives_crash,
    check_inbox_queries,
    check_inbox_details,
    check_approval_records,
    check_enqueue_input,
)
"""Every check, in the order :func:`check_store` runs them."""

SHARED_STORAGE_CHECKS: frozenset[Callable[[OpenStore], Awaitable[None]]] = frozenset(
    {
        check_reopen,
        check_two_writers,
        check_append_after_another_writer,
        check_concurrent_claims,
        check_claim_survives_crash,
    }
)
"""Checks that open the storage more than once and need each opening to see the same data."""


async def check_store(open_store: OpenStore, *, persistent: bool = True) -> None:
    """Run every check on ``open_store``; skip the shared-storage ones unless ``persistent``."""
    for check in CHECKS:
        if check in SHARED_STORAGE_CHECKS and not persistent:
            continue
        await check(open_store)


class StoreConformance:
    """Mix into a pytest test class that provides an ``open_store`` fixture.

    Set ``persistent = False`` for a store that forgets everything when
    reopened (the :data:`SHARED_STORAGE_CHECKS` are skipped then). The test
    module needs ``pytestmark = pytest.mark.anyio``.
    """

    persistent: ClassVar[bool] = True

    async def test_round_trip(self, open_store: OpenStore) -> None:
        await check_round_trip(open_store)

    async def test_replace(self, open_store: OpenStore) -> None:
        await check_replace(open_store)

    async def test_list_order(self, open_store: OpenStore) -> None:
        await check_list_order(open_store)

    async def test_delete(self, open_store: OpenStore) -> None:
        await check_delete(open_store)

    async def test_started_calls(self, open_store: OpenStore) -> None:
        await check_started_calls(open_store)

    def _skip_unless_persistent(self) -> None:
        if not self.persistent:
            import pytest

            pytest.skip("the store is not persistent")

    async def test_reopen(self, open_store: OpenStore) -> None:
        self._skip_unless_persistent()
        await check_reopen(open_store)

    async def test_rejects_bad_documents(self, open_store: OpenStore) -> None:
        await check_rejects_bad_documents(open_store)

    async def test_documents_are_copied(self, open_store: OpenStore) -> None:
        await check_documents_are_copied(open_store)

    async def test_sessions_isolated(self, open_store: OpenStore) -> None:
        await check_sessions_isolated(open_store)

    async def test_concurrent_saves(self, open_store: OpenStore) -> None:
        await check_concurrent_saves(open_store)

    async def test_large_transcript(self, open_store: OpenStore) -> None:
        await check_large_transcript(open_store)

    async def test_prefix_rewrite(self, open_store: OpenStore) -> None:
        await check_prefix_rewrite(open_store)

    async def test_shared_values(self, open_store: OpenStore) -> None:
        await check_shared_values(open_store)

    async def test_long_turn(self, open_store: OpenStore) -> None:
        await check_long_turn(open_store)

    async def test_versions(self, open_store: OpenStore) -> None:
        await check_versions(open_store)

    async def test_two_writers(self, open_store: OpenStore) -> None:
        self._skip_unless_persistent()
        await check_two_writers(open_store)

    async def test_append_after_another_writer(self, open_store: OpenStore) -> None:
        self._skip_unless_persistent()
        await check_append_after_another_writer(open_store)

    async def test_leases(self, open_store: OpenStore) -> None:
        await check_leases(open_store)

    async def test_refused_appends(self, open_store: OpenStore) -> None:
        await check_refused_appends(open_store)

    async def test_lease_takeover(self, open_store: OpenStore) -> None:
        await check_lease_takeover(open_store)

    async def test_claims(self, open_store: OpenStore) -> None:
        await check_claims(open_store)

    async def test_concurrent_claims(self, open_store: OpenStore) -> None:
        self._skip_unless_persistent()
        await check_concurrent_claims(open_store)

    async def test_claim_survives_crash(self, open_store: OpenStore) -> None:
        self._skip_unless_persistent()
        await check_claim_survives_crash(open_store)

    async def test_inbox_queries(self, open_store: OpenStore) -> None:
        await check_inbox_queries(open_store)

    async def test_inbox_details(self, open_store: OpenStore) -> None:
        await check_inbox_details(open_store)

    async def test_approval_records(self, open_store: OpenStore) -> None:
        await check_approval_records(open_store)

    async def test_enqueue_input(self, open_store: OpenStore) -> None:
        await check_enqueue_input(open_store)
