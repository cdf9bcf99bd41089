"""Fixtures shared by the driver's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """Each store a driver test runs against: in memory, and a SQLite file."""
    if request.param == "memory":
        yield MemorySessionStore()
        return
    async with SqliteSessionStore(tmp_path / "sessions.db") as opened:
        yield opened
