"""PostgreSQL's one-statement save with a step history: the version spliced into the step
rows, the rows a save drops (pruned steps, a rewind's claims set aside) dropped in the same
statement, and the two-round-trip path taken only for a write whose texts hold the number
otherwise."""

from collections.abc import Callable

import pytest

from agentloop import FinishReason, Item, ItemKind, ToolCallPart
from agentloop.store import PostgresSessionStore
from agentloop.store._backend import BackendHead, BackendWrite
from agentloop.testing.store_conformance import sample_checkpoint

pytestmark = pytest.mark.anyio


def _spied(store: PostgresSessionStore) -> list[object]:
    """What each one-statement save of ``store`` returned (a number, ``None`` when refused,
    ``NotImplemented`` when it left the write to the general path)."""
    dialect = store._dialect
    real, taken = dialect.one_statement_save, []

    def spy(*args: object) -> object:
        found = real(*args)  # type: ignore[arg-type]
        taken.append(found)
        return found

    dialect.one_statement_save = spy  # type: ignore[method-assign]
    return taken


def _call(call_id: str) -> Item:
    part = ToolCallPart(call_id, "write_file", {"path": f"/tmp/{call_id}"})
    return Item(ItemKind.ASSISTANT, [part], finish_reason=FinishReason.TOOL_CALL)


async def test_saves_keeping_a_history_are_one_statement_and_drop_the_pruned_steps(
    postgres_uri: str,
) -> None:
    items = [Item.text(ItemKind.USER, f"line {n}") for n in range(9)]
    documents = [sample_checkpoint("s", items[: n + 1]) for n in range(9)]
    async with PostgresSessionStore(postgres_uri, history_limit=2) as store:
        taken = _spied(store)
        versions = [await store.save_checkpoint("s", document) for document in documents]
        assert taken == versions[1:]  # every save on a head: one statement, none refused
        steps = await store.history("s")
        assert [(step.step, step.version) for step in steps] == [
            (7, versions[6]),
            (8, versions[7]),
            (9, versions[8]),
        ]
        for step in steps:
            assert (await store.load_step("s", step.step)).checkpoint == documents[step.step - 1]
        for table in ("steps", "history"):
            kept = await store.backend.read_rows("s", table)
            assert sorted(int(key) for key in kept) == [7, 8, 9]


async def test_a_rewind_sets_claims_aside_and_back_in_one_statement(postgres_uri: str) -> None:
    asked = Item.text(ItemKind.USER, "write it")
    before = sample_checkpoint("s", [asked])
    called = sample_checkpoint("s", [asked, _call("c1")])
    async with PostgresSessionStore(postgres_uri) as store:
        taken = _spied(store)
        await store.save_checkpoint("s", before)
        await store.save_checkpoint("s", called)
        await store.record_call_started("s", "c1", "write_file")
        await store.rewind("s", to=1)
        assert await store.backend.read_rows("s", "claims") == {}
        assert sorted(await store.backend.read_rows("s", "rewound_claims")) == ["c1"]
        assert (await store.load("s")).started_calls == frozenset()  # type: ignore[union-attr]
        await store.rewind("s", to=2)  # the step holds c1 again: its claim comes back
        assert sorted(await store.backend.read_rows("s", "claims")) == ["c1"]
        assert await store.backend.read_rows("s", "rewound_claims") == {}
        loaded = await store.load("s")
        assert loaded is not None
        assert (loaded.checkpoint, loaded.started_calls) == (called, frozenset({"c1"}))
        assert [type(found) for found in taken] == [int, int, int]
        assert [step.origin for step in await store.history("s")] == [
            None,
            None,
            "rewound to step 1",
            "rewound to step 2",
        ]


def _numbered(meta: Callable[[int], str]) -> Callable[[int], BackendWrite]:
    """A write whose meta is ``meta(number)``; it drops ``t/gone`` and puts ``t/kept``."""
    return lambda number: BackendWrite(
        head=BackendHead(revision=2, meta=meta(number), document="d"),
        rows={"t": {"kept": f"row {number}"}},
        drop={"t": ("gone", "kept")},
    )


@pytest.mark.parametrize(
    ("meta", "one_statement"),
    [
        (lambda number: f"version {number}", True),
        (lambda number: f"version {number} again {number}", False),  # twice: not plain
        (lambda number: f"version {number + 1}", False),  # not the number itself
    ],
)
async def test_a_write_holding_the_number_otherwise_takes_two_round_trips(
    postgres_uri: str, meta: Callable[[int], str], one_statement: bool
) -> None:
    """Either path stores the same head and rows: the number where the write puts it,
    the dropped key gone, the key both dropped and put put."""
    async with PostgresSessionStore(postgres_uri) as store:
        backend = store._sql_backend
        assert await backend.commit(
            "w",
            0,
            BackendWrite(
                head=BackendHead(revision=1, meta="first", document="d"),
                rows={"t": {"gone": "x", "kept": "y", "other": "z"}},
            ),
        )
        await backend.next_number("versions")  # the counter exists: the statement may run
        taken = _spied(store)
        number = await backend.commit_numbered("w", 1, "versions", _numbered(meta))
        assert number is not None
        assert taken == ([number] if one_statement else [NotImplemented])
        assert await backend.read("w") == BackendHead(revision=2, meta=meta(number), document="d")
        assert await backend.read_rows("w", "t") == {"kept": f"row {number}", "other": "z"}
