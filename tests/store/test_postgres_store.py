"""PostgreSQL specifics: versioned schema and migrations, many workers polling, errors."""

import json
from collections.abc import Callable

import anyio
import psycopg
import pytest

from agentloop import CheckpointError, InvalidInputError, InvalidStateError
from agentloop.store import Lease, PostgresSessionStore
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio


def _query(uri: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(uri, autocommit=True) as connection:
        return connection.execute(sql).fetchall()  # type: ignore[arg-type]


async def test_the_schema_is_created_once_and_versioned(postgres_uri: str) -> None:
    async with PostgresSessionStore(postgres_uri) as store:
        assert await store.schema_version() == 6
    async with PostgresSessionStore(postgres_uri) as store:  # reopening migrates nothing
        assert await store.schema_version() == 6
    versions = _query(postgres_uri, "SELECT version FROM agentloop_schema ORDER BY version")
    assert [row[0] for row in versions] == [1, 2, 3, 4, 5, 6]
    tables = _query(
        postgres_uri,
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename",
    )
    assert [row[0] for row in tables] == [
        "agentloop_heads",
        "agentloop_keyed",
        "agentloop_lists",
        "agentloop_schema",
    ]


async def test_stores_opened_at_once_migrate_exactly_once(postgres_uri: str) -> None:
    async def open_one() -> None:
        async with PostgresSessionStore(postgres_uri) as store:
            await store.list_sessions()

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(open_one)
    assert _query(postgres_uri, "SELECT version FROM agentloop_schema ORDER BY version") == [
        (1,),
        (2,),
        (3,),
        (4,),
        (5,),
        (6,),
    ]


async def test_a_newer_schema_is_refused_and_left_alone(postgres_uri: str) -> None:
    async with PostgresSessionStore(postgres_uri):
        pass
    _query(postgres_uri, "INSERT INTO agentloop_schema (version) VALUES (7) RETURNING version")
    store = PostgresSessionStore(postgres_uri)
    with pytest.raises(CheckpointError) as raised:
        await store.open()
    assert str(raised.value) == (
        "cannot open session store PostgreSQL: expected schema version 6, found 7; "
        "it was written by a newer agentloop, upgrade agentloop to read it"
    )
    assert _query(postgres_uri, "SELECT max(version) FROM agentloop_schema") == [(7,)]
    await store.aclose()


async def test_an_unreachable_database_is_a_checkpoint_error(postgres_uri: str) -> None:
    store = PostgresSessionStore(postgres_uri.replace("/postgres?", "/missing?"))
    with pytest.raises(CheckpointError) as raised:
        await store.load("s")
    message = str(raised.value)
    assert message.startswith("cannot read session 's': connecting to PostgreSQL failed: ")
    assert message.endswith("; check the connection string")
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    await store.aclose()


async def test_a_closed_store_refuses_calls(postgres_uri: str) -> None:
    store = PostgresSessionStore(postgres_uri)
    await store.save_checkpoint("s", sample_checkpoint("s", []))
    await store.aclose()
    await store.aclose()
    assert repr(store) == "PostgresSessionStore(pool_size=4, closed)"
    with pytest.raises(InvalidStateError) as raised:
        await store.load("s")
    assert str(raised.value) == (
        "cannot read session 's': the PostgresSessionStore is closed; "
        "open a new PostgresSessionStore"
    )


@pytest.mark.parametrize("bad", ["", None, 3, b"postgresql://x"])
def test_a_bad_connection_string_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError) as raised:
        PostgresSessionStore(bad)  # type: ignore[arg-type]
    assert str(raised.value) == f"PostgresSessionStore expects a connection string, got {bad!r}"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4", None])
def test_a_bad_pool_size_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError) as raised:
        PostgresSessionStore("postgresql://x", pool_size=bad)  # type: ignore[arg-type]
    assert str(raised.value) == f"PostgresSessionStore expects pool_size >= 1, got {bad!r}"


def _ready_document(session_id: str) -> dict[str, object]:
    return sample_checkpoint(session_id, [], state="AFTER_TOOL_RESULT")


async def test_workers_polling_at_once_lease_disjoint_sessions(
    new_postgres_schema: Callable[[], str],
) -> None:
    uri = new_postgres_schema()
    sessions = [f"ready-{n}" for n in range(24)]
    async with PostgresSessionStore(uri) as store:
        for session_id in sessions:
            await store.save_checkpoint(session_id, _ready_document(session_id))
    leases: dict[str, list[Lease]] = {}

    def worker(name: str) -> None:
        async def poll() -> None:
            async with PostgresSessionStore(uri, pool_size=1) as own:
                while (lease := await own.acquire_ready(name, 60)) is not None:
                    leases.setdefault(name, []).append(lease)

        anyio.run(poll)

    async with anyio.create_task_group() as group:
        for number in range(4):
            group.start_soon(anyio.to_thread.run_sync, worker, f"worker-{number}")
    taken = sorted(lease.session_id for found in leases.values() for lease in found)
    assert taken == sorted(sessions)  # every session leased once, by exactly one worker
    tokens = [lease.token for found in leases.values() for lease in found]
    assert len(set(tokens)) == len(tokens)


def test_without_psycopg_the_store_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ModuleNotFoundError) as raised:
        PostgresSessionStore("postgresql://x")
    assert str(raised.value) == (
        "PostgresSessionStore needs psycopg 3: pip install 'agentloop-runtime[postgres]'"
    )


async def test_a_version_1_schema_keeps_its_decisions_and_takes_reasons_and_edits(
    postgres_uri: str,
) -> None:
    from datetime import UTC, datetime

    from store_support import LEGACY

    from agentloop.store import input_digest

    migrations = json.loads((LEGACY / "postgres_migration3.json").read_text())["migrations"]
    with psycopg.connect(postgres_uri) as connection:  # the schema agentloop wrote before
        connection.execute(
            "CREATE TABLE agentloop_schema "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for statement in migrations[0].split(";"):
            if statement.strip():
                connection.execute(statement)  # type: ignore[arg-type]
        connection.execute("INSERT INTO agentloop_schema (version) VALUES (1)")
        connection.execute(
            "INSERT INTO agentloop_approvals VALUES "
            "('s', 'c1', 'sha256:old', true, '2026-01-01 00:00:01+00')"
        )
    async with PostgresSessionStore(postgres_uri) as store:
        assert await store.schema_version() == 6
        await store.save_checkpoint("s", sample_checkpoint("s", []))
        loaded = await store.load("s")
        assert loaded is not None
        old = loaded.approvals["c1"]
        assert (old.input_digest, old.approved, old.reason, old.edited_input) == (
            "sha256:old",
            True,
            None,
            None,
        )
        assert old.decided_at == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
        edited = {"path": "/b", "n": [1, "<x>"]}
        await store.record_approval(
            "s",
            "c2",
            input_digest=input_digest("write", edited),
            approved=True,
            reason="fine",
            edited_input=edited,
        )
        await store.record_approval("s", "c3", input_digest="sha256:3", approved=False, reason="no")
    async with PostgresSessionStore(postgres_uri) as reopened:
        again = await reopened.load("s")
        assert again is not None
        assert (again.approvals["c2"].reason, again.approvals["c2"].edited_input) == (
            "fine",
            edited,
        )
        assert (again.approvals["c3"].reason, again.approvals["c3"].edited_input) == ("no", None)


async def test_a_save_the_database_refuses_leaves_the_last_save_and_a_usable_connection(
    postgres_uri: str,
) -> None:
    from agentloop import FinishReason, Item, ItemKind, ToolCallPart, ToolResultPart

    asked = Item.text(ItemKind.USER, "write it")
    call = Item(
        ItemKind.ASSISTANT, [ToolCallPart("c1", "write", {})], finish_reason=FinishReason.TOOL_CALL
    )
    async with PostgresSessionStore(postgres_uri, pool_size=1) as store:  # one connection
        first = await store.save_checkpoint("s", sample_checkpoint("s", [asked, call]))
        await store.record_call_started("s", "c1", "write")
        # A fault in the middle of the next save's writes, as a full disk would be.
        with psycopg.connect(postgres_uri, autocommit=True) as connection:
            connection.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.body LIKE '%refuse me%' THEN RAISE EXCEPTION 'refused by the test'; "
                "END IF; RETURN NEW; END $$"
            )
            connection.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON agentloop_lists "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        refused = [asked, call, Item(ItemKind.TOOL, [ToolResultPart("c1", "refuse me")])]
        with pytest.raises(CheckpointError) as raised:
            await store.save_checkpoint("s", sample_checkpoint("s", refused))
        assert str(raised.value).startswith(
            "cannot write session 's' in PostgreSQL: RaiseException: refused by the test"
        )
        loaded = await store.load("s")  # nothing of the refused save: not its item, not its
        assert loaded is not None  # answer to c1, not its version
        assert (loaded.version, len(loaded.checkpoint["transcript"])) == (first, 2)
        assert loaded.started_calls == frozenset({"c1"})
        accepted = [*refused[:2], Item(ItemKind.TOOL, [ToolResultPart("c1", "wrote it")])]
        second = await store.save_checkpoint(
            "s", sample_checkpoint("s", accepted), expected_version=first
        )
        assert second > first
        reloaded = await store.load("s")
        assert reloaded is not None
        assert reloaded.version == second
        assert reloaded.checkpoint == sample_checkpoint("s", accepted)
        assert reloaded.started_calls == frozenset()
    assert _query(postgres_uri, "SELECT count(*) FROM agentloop_lists") == [(3,)]


async def test_a_save_on_a_head_is_one_statement_even_when_its_texts_hold_the_mark(
    postgres_uri: str,
) -> None:
    """The one-statement save splices the version into the texts that change with it (the
    meta, the step row), found by building the write with two marks: a document holding
    a mark's digits is the same under both, so it takes the one statement too and is
    stored exactly."""
    from agentloop import Item, ItemKind

    async with PostgresSessionStore(postgres_uri) as store:
        dialect = store._dialect
        real, taken = dialect.one_statement_save, []

        def spy(*args: object) -> object:
            found = real(*args)  # type: ignore[arg-type]
            taken.append(found)
            return found

        dialect.one_statement_save = spy  # type: ignore[method-assign]
        items = [Item.text(ItemKind.USER, f"line {n}") for n in range(4)]
        mark = "7304129853016457931"
        documents = [
            sample_checkpoint("s", items[:3]),  # the first save inserts the head
            sample_checkpoint("s", items),  # appends a row
            sample_checkpoint("s", items[:1], note=mark),  # cuts rows, holds the mark
            sample_checkpoint("s", [items[3], *items[:2]]),  # rewrites rows, cuts one
        ]
        versions = []
        for document in documents:
            versions.append(await store.save_checkpoint("s", document))
            loaded = await store.load("s")
            assert loaded is not None
            assert (loaded.version, loaded.checkpoint) == (versions[-1], document)
        assert taken == versions[1:]
        assert versions == sorted(set(versions))
    rows = _query(postgres_uri, "SELECT position, body FROM agentloop_lists ORDER BY position")
    assert [json.loads(str(body))["parts"][0]["text"] for _position, body in rows] == [
        "line 3",
        "line 0",
        "line 1",
    ]
    assert [position for position, _body in rows] == [0, 1, 2]
