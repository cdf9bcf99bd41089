"""Both shipped stores pass the public conformance suite, test by test and as a whole."""

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop.store import (
    MemorySessionStore,
    PostgresSessionStore,
    RecordedApproval,
    SessionStore,
    SqliteSessionStore,
)
from agentloop.testing.store_conformance import (
    OpenStore,
    StoreConformance,
    check_claims,
    check_store,
)

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


class ForgetsDecisionDetails(MemorySessionStore):
    """The bug: records the decision but drops its reason and edited input."""

    async def record_approval(  # type: ignore[override]
        self, session_id: str, call_id: str, *, input_digest: str, approved: bool, **_: object
    ) -> RecordedApproval:
        return await super().record_approval(
            session_id, call_id, input_digest=input_digest, approved=approved
        )


class AcceptsAnyReason(MemorySessionStore):
    """The bug: turns any reason into text instead of refusing one that is not a str."""

    async def record_approval(self, *args: Any, reason: Any = None, **kw: Any) -> RecordedApproval:
        text = None if reason is None else str(reason)
        return await super().record_approval(*args, reason=text, **kw)


@pytest.mark.parametrize(
    ("store", "message"),
    [
        (ForgetsDecisionDetails(), "an approval recorded with a reason and edited input"),
        (AcceptsAnyReason(), "a decision with a reason that is not a str"),
    ],
)
async def test_the_kit_catches_a_store_that_mishandles_decision_details(
    store: SessionStore, message: str
) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        await check_claims(lambda: nullcontext(store))
