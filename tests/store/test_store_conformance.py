"""Both shipped stores pass the public conformance suite, test by test and as a whole."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path

import anyio
import pytest

from agentloop.store import (
    MemorySessionStore,
    PostgresSessionStore,
    SessionStore,
    SqliteSessionStore,
)
from agentloop.testing.store_conformance import OpenStore, StoreConformance, check_store

pytestmark = pytest.mark.anyio


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def open_store(self) -> OpenStore:
        store = MemorySessionStore()
        return lambda: nullcontext(store)


class TestSqliteStore(StoreConformance):
    @pytest.fixture
    def open_store(self, tmp_path: Path) -> OpenStore:
        return lambda: SqliteSessionStore(tmp_path / "sessions.db")


def test_check_store_runs_every_check_on_one_shared_storage(tmp_path: Path) -> None:
    @asynccontextmanager
    async def open_store() -> AsyncIterator[SessionStore]:
        async with SqliteSessionStore(tmp_path / "shared.db") as store:
            yield store

    anyio.run(check_store, open_store)
    anyio.run(check_store, open_store)  # a second run on the same file: ids never collide


async def test_check_store_without_reopen_on_a_fresh_memory_store_each_time() -> None:
    await check_store(lambda: MemorySessionStore(), persistent=False)


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def open_store(self, postgres_uri: str) -> OpenStore:
        return lambda: PostgresSessionStore(postgres_uri)
