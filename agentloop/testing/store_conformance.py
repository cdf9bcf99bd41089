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
``enqueue_input`` (queued durably; bad calls refused, nothing changed). A
store with a step history (``SessionHistory``) has it checked: every save
listed and loaded exactly, a fork, a rewind, and the retention's dropped rows.
Failures raise ``AssertionError`` saying what was expected and what was found.
Needs neither pytest nor hypothesis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from ..store._backed import BackendSessionStore
from ._backend_checks import check_backend
from ._claim_checks import (
    check_claim_survives_crash,
    check_claims,
    check_concurrent_claims,
    check_inbox_queries,
)
from ._fleet_checks import check_approval_records, check_enqueue_input, check_inbox_details
from ._history_checks import check_history_retention, check_step_history
from ._store_checks import (
    OpenStore,
    check_delete,
    check_documents_are_copied,
    check_list_order,
    check_rejects_bad_documents,
    check_reopen,
    check_replace,
    check_round_trip,
    check_sessions_isolated,
    check_started_calls,
    sample_checkpoint,
)
from ._transcript_checks import (
    check_concurrent_saves,
    check_large_transcript,
    check_long_turn,
    check_prefix_rewrite,
    check_shared_values,
)
from ._write_checks import (
    check_append_after_another_writer,
    check_lease_takeover,
    check_leases,
    check_refused_appends,
    check_two_writers,
    check_versions,
)

__all__ = [
    "CHECKS",
    "SHARED_STORAGE_CHECKS",
    "OpenStore",
    "StoreConformance",
    "check_backend",
    "check_append_after_another_writer",
    "check_approval_records",
    "check_enqueue_input",
    "check_history_retention",
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
    "check_step_history",
    "check_store",
    "run_check",
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
    check_step_history,
    check_history_retention,
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


async def run_check(check: Callable[[OpenStore], Awaitable[None]], open_store: OpenStore) -> None:
    """Run one check; when it fails on a :class:`~agentloop.store.BackendSessionStore`,
    check the backend's primitives (:func:`check_backend`) and name the one that broke."""
    try:
        await check(open_store)
    except Exception as error:
        broken = await _broken_primitive(open_store)
        if broken is None:
            raise
        raise AssertionError(
            f"{check.__name__} failed ({type(error).__name__}: {error}); {broken}"
        ) from error


async def _broken_primitive(open_store: OpenStore) -> str | None:
    """What :func:`check_backend` says of the store's backend (``None``: no backend, or sound)."""
    async with open_store() as store:
        if not isinstance(store, BackendSessionStore):
            return None
        try:
            await check_backend(store.backend)
        except AssertionError as error:
            return str(error)
    return None


async def check_store(open_store: OpenStore, *, persistent: bool = True) -> None:
    """Run every check on ``open_store``; skip the shared-storage ones unless ``persistent``."""
    await _check_primitives(open_store)
    for check in CHECKS:
        if check in SHARED_STORAGE_CHECKS and not persistent:
            continue
        await run_check(check, open_store)


def _test(check: Callable[[OpenStore], Awaitable[None]]) -> Any:
    """The :class:`StoreConformance` test method that runs ``check``."""

    async def test(self: StoreConformance, open_store: OpenStore) -> None:
        if check in SHARED_STORAGE_CHECKS and not self.persistent:
            import pytest

            pytest.skip("the store is not persistent")
        await run_check(check, open_store)

    test.__name__ = test.__qualname__ = "test_" + check.__name__.removeprefix("check_")
    test.__doc__ = check.__doc__
    return test


async def _check_primitives(open_store: OpenStore) -> None:
    """The backend's primitives, when the store is a ``BackendSessionStore``."""
    async with open_store() as store:
        if isinstance(store, BackendSessionStore):
            await check_backend(store.backend)


class StoreConformance:
    """Mix into a pytest test class that provides an ``open_store`` fixture.

    Set ``persistent = False`` for a store that forgets everything when
    reopened (the :data:`SHARED_STORAGE_CHECKS` are skipped then). The test
    module needs ``pytestmark = pytest.mark.anyio``. A store built on a
    backend also gets ``test_primitives`` (:func:`check_backend`).
    """

    persistent: ClassVar[bool] = True

    test_primitives = _test(_check_primitives)
    test_round_trip = _test(check_round_trip)
    test_replace = _test(check_replace)
    test_list_order = _test(check_list_order)
    test_delete = _test(check_delete)
    test_started_calls = _test(check_started_calls)
    test_reopen = _test(check_reopen)
    test_rejects_bad_documents = _test(check_rejects_bad_documents)
    test_documents_are_copied = _test(check_documents_are_copied)
    test_sessions_isolated = _test(check_sessions_isolated)
    test_concurrent_saves = _test(check_concurrent_saves)
    test_large_transcript = _test(check_large_transcript)
    test_prefix_rewrite = _test(check_prefix_rewrite)
    test_shared_values = _test(check_shared_values)
    test_long_turn = _test(check_long_turn)
    test_versions = _test(check_versions)
    test_two_writers = _test(check_two_writers)
    test_append_after_another_writer = _test(check_append_after_another_writer)
    test_leases = _test(check_leases)
    test_refused_appends = _test(check_refused_appends)
    test_lease_takeover = _test(check_lease_takeover)
    test_claims = _test(check_claims)
    test_concurrent_claims = _test(check_concurrent_claims)
    test_claim_survives_crash = _test(check_claim_survives_crash)
    test_inbox_queries = _test(check_inbox_queries)
    test_inbox_details = _test(check_inbox_details)
    test_approval_records = _test(check_approval_records)
    test_enqueue_input = _test(check_enqueue_input)
    test_step_history = _test(check_step_history)
    test_history_retention = _test(check_history_retention)
