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
checks can share one storage. Failures raise ``AssertionError`` saying what
was expected and what was found. Needs neither pytest nor hypothesis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from ._store_checks import (
    OpenStore,
    check_concurrent_saves,
    check_delete,
    check_documents_are_copied,
    check_large_transcript,
    check_list_order,
    check_prefix_rewrite,
    check_rejects_bad_documents,
    check_reopen,
    check_replace,
    check_round_trip,
    check_sessions_isolated,
    check_started_calls,
    sample_checkpoint,
)

__all__ = [
    "CHECKS",
    "OpenStore",
    "StoreConformance",
    "check_concurrent_saves",
    "check_delete",
    "check_documents_are_copied",
    "check_large_transcript",
    "check_list_order",
    "check_prefix_rewrite",
    "check_rejects_bad_documents",
    "check_replace",
    "check_reopen",
    "check_round_trip",
    "check_sessions_isolated",
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
)
"""Every check, in the order :func:`check_store` runs them."""


async def check_store(open_store: OpenStore, *, persistent: bool = True) -> None:
    """Run every check against ``open_store``; skip :func:`check_reopen` unless ``persistent``."""
    for check in CHECKS:
        if check is check_reopen and not persistent:
            continue
        await check(open_store)


class StoreConformance:
    """Mix into a pytest test class that provides an ``open_store`` fixture.

    Set ``persistent = False`` for a store that forgets everything when
    reopened. The test module needs ``pytestmark = pytest.mark.anyio``.
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

    async def test_reopen(self, open_store: OpenStore) -> None:
        if not self.persistent:
            import pytest

            pytest.skip("the store is not persistent")
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
