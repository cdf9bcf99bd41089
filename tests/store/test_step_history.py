"""The step history on the storage protocol: a backend that keeps rows it was told to drop
is named, and sessions of an old database (saved before steps were kept) fork and gain a
history from their next save."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
from store_support import write_legacy_sqlite

from agentloop.store import BackendSessionStore, BackendWrite, MemoryBackend, SqliteSessionStore
from agentloop.testing.store_conformance import check_history_retention, run_check

pytestmark = pytest.mark.anyio


class IgnoresDrop(MemoryBackend):
    """The bug: ``commit`` puts rows but never drops the keys of ``write.drop``."""

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        kept = BackendWrite(head=write.head, lists=write.lists, rows=write.rows)
        return await super().commit(session_id, expected_revision, kept)


async def test_a_backend_that_keeps_dropped_rows_is_named() -> None:
    store = BackendSessionStore(IgnoresDrop())
    with pytest.raises(AssertionError) as caught:
        await run_check(check_history_retention, lambda: nullcontext(store))
    message = str(caught.value)
    assert message.startswith(
        "check_history_retention failed (AssertionError: the steps kept with history_limit=2: "
        "expected 'the last 3 or 4 of 14', found [1, 2, 3,"
    )
    assert (
        "; the backend's primitive commit() is wrong: the rows after dropping k2 and a "
        "missing key of t (write.drop): expected {'k1': 'new'}, found {'k1': 'new', 'k2': 'v2'}"
    ) in message


async def test_a_session_of_an_old_database_forks_and_starts_its_history(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    write_legacy_sqlite(path)
    async with SqliteSessionStore(path) as store:
        original = await store.load("approval")
        assert original is not None
        assert original.started_calls == frozenset({"c0"})
        assert await store.history("approval") == []  # saved before steps were kept

        await store.fork("approval", at=None, new_session_id="approval-b")
        fork = await store.load("approval-b")
        assert fork is not None
        assert fork.started_calls == original.started_calls  # its claim is in the fork's past
        [first] = await store.history("approval-b")
        assert (first.step, first.origin) == (
            1,
            f"forked from 'approval' at its version {original.version}",
        )

        version = await store.save_checkpoint(
            "approval", original.checkpoint, expected_version=original.version
        )
        [step] = await store.history("approval")
        assert (step.step, step.version) == (1, version)
        assert (await store.load_step("approval", 1)).checkpoint == original.checkpoint
