"""The storage protocol: a sound backend passes; a broken one is caught, the primitive named."""

import re
from collections.abc import Callable, Collection
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from agentloop import CheckpointError
from agentloop.store import (
    BackendSessionStore,
    BackendWrite,
    MemoryBackend,
    MemorySessionStore,
    SqliteSessionStore,
    StorageBackend,
)
from agentloop.store._backend import NumberedCommit
from agentloop.testing.store_conformance import (
    check_backend,
    check_claims,
    check_delete,
    check_long_turn,
    check_started_calls,
    check_store,
    check_versions,
    run_check,
    sample_checkpoint,
)

pytestmark = pytest.mark.anyio


async def test_the_memory_backend_keeps_every_primitive() -> None:
    backend = MemoryBackend()
    assert isinstance(backend, StorageBackend)
    await check_backend(backend)
    assert await backend.heads() == {}  # the checks clean up after themselves


class IgnoresRevision(MemoryBackend):
    """The bug: commits whatever revision the writer read (last writer wins)."""

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        head = await self.read(session_id)
        return await super().commit(session_id, 0 if head is None else head.revision, write)


class AppendsListRows(MemoryBackend):
    """The bug: appends a list's new rows instead of replacing the rows from ``start`` on."""

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        lists = {}
        for name, (_start, rows) in write.lists.items():
            lists[name] = (len(await self.read_list(session_id, name)), rows)
        return await super().commit(
            session_id,
            expected_revision,
            BackendWrite(head=write.head, lists=lists, rows=write.rows),
        )


class IgnoresKeys(MemoryBackend):
    """The bug: ``read_rows`` returns every row of the table, whatever keys were asked for."""

    async def read_rows(
        self, session_id: str, table: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        return await super().read_rows(session_id, table)


class KeepsRowsOnDelete(MemoryBackend):
    """The bug: ``delete`` drops the head but keeps the session's lists and tables."""

    def __init__(self) -> None:
        super().__init__()
        self._kept: dict[str, object] = {}

    async def delete(self, session_id: str) -> bool:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._kept[session_id] = session
        return True

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        applied = await super().commit(session_id, expected_revision, write)
        kept: Any = self._kept.pop(session_id, None)
        if applied and kept is not None:
            with self._lock:
                session = self._sessions[session_id]
                for name, rows in kept.lists.items():
                    session.lists.setdefault(name, rows)
                for table, found in kept.tables.items():
                    session.tables.setdefault(table, {}).update(found)
        return applied


class RepeatsNumbers(MemoryBackend):
    """The bug: a counter that restarts from 1 for every call."""

    async def next_number(self, counter: str) -> int:
        return 1


@pytest.mark.parametrize(
    ("backend", "check", "primitive", "what"),
    [
        (AppendsListRows(), check_long_turn, "commit", "list rows after a commit keeping"),
        (IgnoresKeys(), check_claims, "read_rows", "the rows of keys k1 and missing"),
        (
            KeepsRowsOnDelete(),
            check_delete,
            "delete",
            "the list of a session recreated after a delete",
        ),
        (RepeatsNumbers(), check_versions, "next_number", "two numbers of one counter"),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, MemoryBackend) else None,
)
async def test_a_broken_backend_fails_the_suite_naming_its_primitive(
    backend: MemoryBackend, check: object, primitive: str, what: str
) -> None:
    store = BackendSessionStore(backend)
    with pytest.raises(AssertionError) as caught:
        await run_check(check, lambda: nullcontext(store))  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"{check.__name__} failed (")  # type: ignore[attr-defined]
    assert f"; the backend's primitive {primitive}() is wrong: {what}" in message


async def test_a_rule_broken_above_sound_primitives_fails_with_the_checks_own_message() -> None:
    class ForgetsStartedCalls(MemorySessionStore):
        async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
            return None

    store = ForgetsStartedCalls()
    with pytest.raises(AssertionError) as caught:
        await run_check(check_started_calls, lambda: nullcontext(store))
    assert "the backend's primitive" not in str(caught.value)


async def test_a_backend_whose_commit_is_no_compare_and_set_fails_check_store_first() -> None:
    # Within one process its writes rarely race, so the store's own checks may pass; the
    # primitives are checked before them.
    store = BackendSessionStore(IgnoresRevision())
    with pytest.raises(AssertionError) as caught:
        await check_store(lambda: nullcontext(store), persistent=False)
    assert str(caught.value) == (
        "the backend's primitive commit() is wrong: a second commit expecting no head (one "
        "exists): expected False, found True"
    )


async def test_check_backend_names_the_primitive_directly() -> None:
    with pytest.raises(
        AssertionError,
        match=re.escape(
            "the backend's primitive commit() is wrong: a second commit expecting no head (one "
            "exists): expected False, found True"
        ),
    ):
        await check_backend(IgnoresRevision())


class RefusesEveryCommit(MemoryBackend):
    """The bug: compares the revision wrongly, so no commit ever applies."""

    async def commit(self, session_id: str, expected_revision: int, write: BackendWrite) -> bool:
        return False


async def test_a_backend_that_never_commits_is_refused_not_retried_forever() -> None:
    store = BackendSessionStore(RefusesEveryCommit())
    with pytest.raises(CheckpointError) as caught:
        await store.save_checkpoint("s1", sample_checkpoint("s1", []))
    assert str(caught.value).startswith(
        "the storage backend refused 10000 commits in a row (or moved the head under 10000 "
        "loads), each on the revision just read: its commit() must apply a write"
    )
    assert await store.load("s1") is None  # nothing was written
    with pytest.raises(AssertionError) as failed:
        await run_check(check_versions, lambda: nullcontext(store))
    assert "; the backend's primitive commit() is wrong: a first commit expecting revision 0" in (
        str(failed.value)
    )


async def test_the_sql_backend_keeps_every_primitive_and_the_numbered_commit(
    tmp_path: Path,
) -> None:
    async with SqliteSessionStore(tmp_path / "sessions.db") as store:
        assert isinstance(store.backend, NumberedCommit)
        await check_backend(store.backend)
        assert await store.backend.heads() == {}


class NumbersBlindly(MemoryBackend):
    """The bug: its commit_numbered commits whatever revision the head is at."""

    async def commit_numbered(
        self,
        session_id: str,
        expected_revision: int,
        counter: str,
        write: Callable[[int], BackendWrite],
    ) -> int | None:
        head = await self.read(session_id)
        number = await self.next_number(counter)
        revision = 0 if head is None else head.revision
        return number if await self.commit(session_id, revision, write(number)) else None


async def test_check_backend_names_a_wrong_numbered_commit() -> None:
    with pytest.raises(AssertionError) as caught:
        await check_backend(NumbersBlindly())
    assert str(caught.value) == (
        "the backend's primitive commit_numbered() is wrong: a commit on a stale revision: "
        "expected None, found 2"
    )
