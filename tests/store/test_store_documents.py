"""What stores accept: exact errors for bad documents, and random save sequences that load back."""

import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop.store
from agentloop import CheckpointError, Item, ItemKind, unstructure
from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore
from agentloop.testing import json_values, transcripts
from agentloop.testing.store_conformance import sample_checkpoint


def test_the_public_surface_is_explicit_and_sorted() -> None:
    names = agentloop.store.__all__

    def order(name: str) -> tuple[int, str]:  # constants, classes, then functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(names) == sorted(names, key=order)
    assert all(hasattr(agentloop.store, name) for name in names)
    assert isinstance(MemorySessionStore(), SessionStore)
    assert isinstance(SqliteSessionStore(":memory:"), SessionStore)


FIX = "save the document driver.checkpoint() returns, unchanged"
PREFIX = "cannot save checkpoint for session 's'"
GOOD = sample_checkpoint("s", [Item.text(ItemKind.USER, "hi")])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("text", f"expected a mapping, found str; {FIX}"),
        ({**GOOD, "format": "x"}, f"expected format 'agentloop.checkpoint', found 'x'; {FIX}"),
        ({**GOOD, "version": "2"}, f"expected an integer version >= 1, found '2'; {FIX}"),
        (
            {**GOOD, "session_id": "t"},
            "the document's session_id is 't'; save it under its own session id",
        ),
        ({**GOOD, "transcript": None}, f"expected a 'transcript' list, found NoneType; {FIX}"),
        (
            {**GOOD, "transcript": [*GOOD["transcript"], 3]},
            f"checkpoint['transcript'][1] has type int, expected an item object; {FIX}",
        ),
        (
            {**GOOD, "transcript": [{"kind": "nobody", "parts": []}]},
            "transcript item 0 is not an agentloop item (invalid value for type, expected "
            f"ItemKind @ $.kind); {FIX}",
        ),
        (
            {**GOOD, "x": {"y": (1,)}},
            "checkpoint['x']['y'] has type tuple, which is not JSON (use dict, list, str, int, "
            f"float, bool or None); {FIX}",
        ),
        (
            {**GOOD, "x": [float("inf")]},
            f"checkpoint['x'][0] is inf, which JSON cannot represent; {FIX}",
        ),
        ({**GOOD, "x": {2: 1}}, f"checkpoint['x'] has the non-string key 2; {FIX}"),
    ],
)
@pytest.mark.anyio
async def test_a_bad_document_gets_an_exact_error(document: Any, message: str) -> None:
    store = MemorySessionStore()
    with pytest.raises(CheckpointError) as raised:
        await store.save_checkpoint("s", document)
    assert str(raised.value) == f"{PREFIX}: {message}"
    assert await store.list_sessions() == []


@st.composite
def _save_sequences(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Documents saved one after another: appends, rewrites, shrinks, fresh transcripts."""
    versions: list[list[Item]] = []
    for _ in range(draw(st.integers(1, 5))):
        fresh = draw(transcripts(max_turns=2))
        previous = versions[-1] if versions else []
        cut = draw(st.integers(0, len(previous)))
        versions.append(draw(st.sampled_from([fresh, previous + fresh, previous[:cut] + fresh])))
    return [
        sample_checkpoint("s", items, extra=draw(json_values()), step=step)
        for step, items in enumerate(versions)
    ]


async def _save_and_load_each(store: SessionStore, documents: list[dict[str, Any]]) -> None:
    for document in documents:
        await store.save_checkpoint("s", document)
        loaded = await store.load("s")
        assert loaded is not None
        assert loaded.checkpoint == document
        expected_items = [unstructure(item) for item in await store.transcript("s") or []]
        assert expected_items == document["transcript"]


@settings(max_examples=25, deadline=None)
@given(_save_sequences())
def test_any_save_sequence_loads_back_exactly_from_both_stores(
    documents: list[dict[str, Any]],
) -> None:
    anyio.run(_save_and_load_each, MemorySessionStore(), documents)
    with tempfile.TemporaryDirectory() as directory:

        async def on_sqlite() -> None:
            async with SqliteSessionStore(Path(directory) / "s.db") as store:
                await _save_and_load_each(store, documents)

        anyio.run(on_sqlite)
