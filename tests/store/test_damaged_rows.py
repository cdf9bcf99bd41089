"""Every damaged store row raises CheckpointError naming the session and the row (issue 13).

The damage is done to real SQLite files and real PostgreSQL rows, chosen by
hypothesis: a truncated or non-JSON head or item, an item that is not an
Item, a missing item row, a position gap. load(), transcript() and (through
load) Agent.resume() all refuse; nothing is returned half-restored; saving
the session again repairs it.
"""

import shutil
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.model
import agentloop.testing
from agentloop.store import PostgresSessionStore, SessionStore, SqliteSessionStore

SESSION = "damaged"
BACKENDS = ["asyncio", "trio"]

NOT_JSON = ["", "nope", "{", '{"a": NaN}', "[1, 2", "\x00", "{'single': 'quotes'}"]
NOT_A_HEAD = [
    "null",
    "[]",
    "3",
    '"text"',
    '{"format": "other"}',
    '{"format": "agentloop.checkpoint"}',
]
NOT_AN_ITEM = [
    "null",
    "[]",
    "{}",
    '{"kind": "nope", "parts": []}',
    '{"kind": "user", "parts": 3}',
    '{"kind": "user", "parts": [{"type": "unknown"}]}',
    '"user"',
]


def reply(request: al.model.TurnRequest) -> str:
    return f"answer {len(request.transcript)}"


def agent(store: SessionStore) -> al.Agent:
    return al.Agent.builder().model(al.testing.ScriptedModel(reply)).store(store).build()


async def _write_session(store: SessionStore) -> None:
    driver = await agent(store).start(SESSION)
    for turn in range(3):
        driver.submit_input([al.Item.text(al.ItemKind.USER, f"question {turn}")])
        await driver.run_until_blocked()


@pytest.fixture(scope="module")
def pristine() -> Iterator[tuple[Path, dict[str, Any]]]:
    """A SQLite file holding one session the driver saved, and that session's document."""
    folder = Path(tempfile.mkdtemp(prefix="agentloop-damaged-"))
    path = folder / "pristine.db"

    async def build() -> dict[str, Any]:
        async with SqliteSessionStore(path) as store:
            await _write_session(store)
            stored = await store.load(SESSION)
        assert stored is not None
        return stored.checkpoint

    document = anyio.run(build)
    assert len(document["transcript"]) == 6
    yield path, document
    shutil.rmtree(folder, ignore_errors=True)


# -- the damage -----------------------------------------------------------------------

Damage = tuple[str, int, str]
"""(what, item index or cut, replacement text)."""

damages = st.one_of(
    st.tuples(st.just("truncate head"), st.integers(0, 10_000), st.just("")),
    st.tuples(st.just("replace head"), st.just(0), st.sampled_from(NOT_JSON + NOT_A_HEAD)),
    st.tuples(st.just("truncate item"), st.integers(0, 5), st.integers(0, 10_000).map(str)),
    st.tuples(st.just("replace item"), st.integers(0, 5), st.sampled_from(NOT_JSON + NOT_AN_ITEM)),
    st.tuples(st.just("delete item"), st.integers(0, 5), st.just("")),
    st.tuples(st.just("move item"), st.integers(0, 5), st.integers(6, 1_000).map(str)),
)


def expected_row(damage: Damage) -> str:
    what, index, _ = damage
    return "its head row" if "head" in what else f"item row {index}"


def _sqlite_damage(path: Path, damage: Damage) -> None:
    what, index, text = damage
    item = "list = 'items' AND position = ?"
    connection = sqlite3.connect(path)
    with connection:
        if what == "truncate head":
            (head,) = connection.execute("SELECT document FROM heads").fetchone()
            connection.execute("UPDATE heads SET document = ?", (head[: index % len(head)],))
        elif what == "replace head":
            connection.execute("UPDATE heads SET document = ?", (text,))
        elif what == "truncate item":
            (body,) = connection.execute(
                f"SELECT body FROM lists WHERE {item}", (index,)
            ).fetchone()
            cut = body[: int(text) % len(body)]
            connection.execute(f"UPDATE lists SET body = ? WHERE {item}", (cut, index))
        elif what == "replace item":
            connection.execute(f"UPDATE lists SET body = ? WHERE {item}", (text, index))
        elif what == "delete item":
            connection.execute(f"DELETE FROM lists WHERE {item}", (index,))
        else:
            connection.execute(f"UPDATE lists SET position = ? WHERE {item}", (int(text), index))
    connection.close()


async def _expect_refused(store: SessionStore, damage: Damage) -> None:
    row = expected_row(damage)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.load(SESSION),
        lambda: store.transcript(SESSION),
        lambda: agent(store).resume(session_id=SESSION),
    ]
    for call in calls:
        with pytest.raises(al.CheckpointError) as raised:
            await call()
        message = str(raised.value)
        assert message.startswith(f"cannot load session {SESSION!r}: {row}"), (damage, message)
        assert message.endswith(
            "the store is damaged: restore it from a backup or delete the session"
        )


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damage=damages)
def test_a_damaged_sqlite_row_is_refused_everywhere(
    backend: str, damage: Damage, pristine: tuple[Path, dict[str, Any]]
) -> None:
    template, document = pristine
    folder = Path(tempfile.mkdtemp(prefix="agentloop-damage-"))
    try:
        path = folder / "sessions.db"
        shutil.copy(template, path)
        _sqlite_damage(path, damage)

        async def check() -> None:
            async with SqliteSessionStore(path) as store:
                await _expect_refused(store, damage)
                assert [info.session_id for info in await store.list_sessions()] == [SESSION]
                await store.save_checkpoint(SESSION, document)  # saving again repairs it
                loaded = await store.load(SESSION)
                assert loaded is not None
                assert loaded.checkpoint == document
                await agent(store).resume(session_id=SESSION)

        anyio.run(check, backend=backend)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _postgres_damage(uri: str, damage: Damage) -> None:
    what, index, text = damage
    head = "agentloop_heads SET document = %s WHERE session_id = %s"
    item = "WHERE session_id = %s AND list = 'items' AND position = %s"
    with psycopg.connect(uri, autocommit=True) as connection:
        if what == "truncate head":
            (document,) = connection.execute(
                "SELECT document FROM agentloop_heads WHERE session_id = %s", (SESSION,)
            ).fetchone()  # type: ignore[misc]
            connection.execute(f"UPDATE {head}", (document[: index % len(document)], SESSION))
        elif what == "replace head":  # text columns refuse NUL
            connection.execute(f"UPDATE {head}", (text.replace("\x00", "\x01"), SESSION))
        elif what == "truncate item":
            (body,) = connection.execute(
                f"SELECT body FROM agentloop_lists {item}", (SESSION, index)
            ).fetchone()  # type: ignore[misc]
            connection.execute(
                f"UPDATE agentloop_lists SET body = %s {item}",
                (body[: int(text) % len(body)], SESSION, index),
            )
        elif what == "replace item":  # text columns refuse NUL
            connection.execute(
                f"UPDATE agentloop_lists SET body = %s {item}",
                (text.replace("\x00", "\x01"), SESSION, index),
            )
        elif what == "delete item":
            connection.execute(f"DELETE FROM agentloop_lists {item}", (SESSION, index))
        else:
            connection.execute(
                f"UPDATE agentloop_lists SET position = %s {item}", (int(text), SESSION, index)
            )


@pytest.mark.parametrize("backend", BACKENDS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(damage=damages)
def test_a_damaged_postgres_row_is_refused_everywhere(
    backend: str, damage: Damage, pristine: tuple[Path, dict[str, Any]], postgres_uri: str
) -> None:
    _, document = pristine

    async def save_fresh() -> None:
        async with PostgresSessionStore(postgres_uri) as store:
            await store.delete(SESSION)
            await store.save_checkpoint(SESSION, document)

    async def check() -> None:
        async with PostgresSessionStore(postgres_uri) as store:
            await _expect_refused(store, damage)
            await store.save_checkpoint(SESSION, document)
            loaded = await store.load(SESSION)
            assert loaded is not None
            assert loaded.checkpoint == document
            await agent(store).resume(session_id=SESSION)

    anyio.run(save_fresh, backend=backend)
    _postgres_damage(postgres_uri, damage)
    anyio.run(check, backend=backend)
