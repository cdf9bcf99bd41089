"""Run the store conformance suite on both anyio backends, trio included (docs/testing.md)."""

import sys
from contextlib import nullcontext
from typing import Any

import anyio
import attrs
import pytest

import agentloop as al
import agentloop.store
from agentloop.testing.store_conformance import OpenStore, StoreConformance, check_store

pytestmark = pytest.mark.anyio  # the anyio pytest plugin runs the async checks


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)  # every check runs on asyncio and on trio


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def open_store(self) -> OpenStore:
        store = al.store.MemorySessionStore()
        return lambda: nullcontext(store)  # reopening gives the same storage


class AliasingStore(al.store.MemorySessionStore):
    """The bug: keeps the caller's document instead of a copy."""

    async def save_checkpoint(self, session_id: str, checkpoint: Any) -> None:
        await super().save_checkpoint(session_id, checkpoint)
        self.kept = getattr(self, "kept", {})
        self.kept[session_id] = checkpoint

    async def load(self, session_id: str) -> al.store.StoredSession | None:
        stored = await super().load(session_id)
        if stored is None or session_id not in self.kept:
            return stored
        return attrs.evolve(stored, checkpoint=self.kept[session_id])


def test_check_store_catches_an_aliasing_store_on_trio() -> None:
    store = AliasingStore()
    with pytest.raises(AssertionError, match="after mutating the saved document"):
        anyio.run(check_store, lambda: nullcontext(store), backend="trio")
    fresh = al.store.MemorySessionStore()
    anyio.run(check_store, lambda: nullcontext(fresh), backend="trio")


if __name__ == "__main__":
    test_check_store_catches_an_aliasing_store_on_trio()
    code = pytest.main(
        [
            __file__,
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
        ]
    )
    sys.exit(code) if code else print("store: the suite passes on asyncio and trio")
