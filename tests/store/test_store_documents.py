"""What stores accept: exact errors for bad documents, and random save sequences that load back."""

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop.store
from agentloop import CheckpointError, Item, ItemKind, unstructure
from agentloop.store import MemorySessionStore, SessionStore, SqliteSessionStore
from agentloop.store._codec import TURN_LISTS, encode_checkpoint
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
        (
            {**GOOD, "format": "x"},
            f"the document has format 'x', expected 'agentloop.checkpoint'; {FIX}",
        ),
        (
            {**GOOD, "version": "2"},
            f"the document has version '2', expected an integer >= 1; {FIX}",
        ),
        (
            {**GOOD, "session_id": "t"},
            "the document has session_id 't', expected 's'; save it under its own session id",
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


def _cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "bad",
    [
        {**GOOD, "x": _cyclic()},
        {**GOOD, "x": [_cyclic()]},
        {**GOOD, "transcript": [*GOOD["transcript"], {**GOOD["transcript"][0], "x": _cyclic()}]},
        {**GOOD, "x": _deep(5_000)},
        {**GOOD, "transcript": [*GOOD["transcript"], {"kind": "user", "parts": _deep(5_000)}]},
    ],
    ids=["cycle in the head", "cycle in a list", "cycle in an item", "deep head", "deep item"],
)
@pytest.mark.anyio
async def test_a_cyclic_or_too_deep_document_gets_a_checkpoint_error_and_keeps_the_last(
    bad: dict[str, Any], tmp_path: Path
) -> None:
    message = f"{PREFIX}: a value holds itself (a cycle) or is nested too deeply for JSON; {FIX}"
    for store in (MemorySessionStore(), SqliteSessionStore(tmp_path / "s.db")):
        await store.save_checkpoint("s", GOOD)
        with pytest.raises(CheckpointError) as raised:
            await store.save_checkpoint("s", bad)
        assert str(raised.value) == message
        loaded = await store.load("s")
        assert loaded is not None
        assert loaded.checkpoint == json.loads(json.dumps(GOOD))
        if isinstance(store, SqliteSessionStore):
            await store.aclose()


@st.composite
def _save_sequences(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Documents saved one after another: appends, rewrites, shrinks, fresh transcripts; a
    turn whose lists grow, are cut, start again or go (the turn's lists are rows)."""
    versions: list[list[Item]] = []
    for _ in range(draw(st.integers(1, 5))):
        fresh = draw(transcripts(max_turns=2))
        previous = versions[-1] if versions else []
        cut = draw(st.integers(0, len(previous)))
        versions.append(draw(st.sampled_from([fresh, previous + fresh, previous[:cut] + fresh])))
    documents = []
    lists: dict[str, list[Any]] = {"tool_calls": [], "model_calls_made": []}
    for step, items in enumerate(versions):
        document = sample_checkpoint("s", items, extra=draw(json_values()), step=step)
        change = draw(st.sampled_from(["grow", "grow", "new turn", "no turn", "cut"]))
        for name in lists:  # new lists (saved ones are never changed), sharing elements
            if change == "new turn":
                lists[name] = []
            elif change == "cut":
                lists[name] = lists[name][: draw(st.integers(0, len(lists[name])))]
            more = draw(st.lists(json_values(max_leaves=3), max_size=3))
            lists[name] = [*lists[name], *more]
        if change == "no turn":
            document["turn"] = None
        else:
            tail = document["transcript"][len(document["transcript"]) // 2 :]
            document["turn"] = {"items": tail, **lists, "step": step}
        documents.append(document)
    return documents


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


# -- encoding reuses the texts of unchanged values, exactly ---------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_reused_texts_encode_every_document_exactly(data: st.DataObject) -> None:
    """Documents as a driver hands them to a store, each encoded right after it is built:
    a save shares the objects of the last one that did not change and has new objects
    (or lists grown in place) for the rest; the turn's items are the very objects of
    the transcript's tail. Every text is the document's exact JSON."""
    draw = data.draw
    values = json_values(max_leaves=4)
    transcript: list[Any] = []
    config: Any = {"limits": draw(values), "name": draw(values)}
    lists: dict[str, list[Any]] = {"tool_calls": [], "records": []}
    extra: Any = draw(values)
    last = None
    for step in range(draw(st.integers(1, 8))):
        for _ in range(draw(st.integers(0, 2))):
            transcript = [*transcript, unstructure(Item.text(ItemKind.USER, draw(st.text())))]
        change = draw(
            st.sampled_from(
                ["none", "append", "grow in place", "replace", "cut", "config", "extra"]
            )
        )
        name = draw(st.sampled_from(sorted(lists)))
        if change == "append":
            lists[name] = [*lists[name], draw(values)]
        elif change == "grow in place":
            lists[name].append(draw(values))
        elif change == "replace" and lists[name]:
            index = draw(st.integers(0, len(lists[name]) - 1))
            lists[name] = [*lists[name][:index], draw(values), *lists[name][index + 1 :]]
        elif change == "cut":
            lists[name] = lists[name][: draw(st.integers(0, len(lists[name])))]
        elif change == "config":
            config = {**config, "limits": draw(values)}
        elif change == "extra":
            extra = draw(values)
        turn = {"items": transcript[-draw(st.integers(0, 3)) :], **lists, "step": step}
        document = sample_checkpoint("s", [], config=config, turn=turn, extra=extra, queue=[])
        document["transcript"] = list(transcript)
        encoded = encode_checkpoint("s", document, last)
        head, rows = _split_turn(document)
        assert encoded.head == _compact(head)
        assert encoded.turn == rows
        assert encoded.items == tuple(_compact(item) for item in transcript)
        last = encoded


def _split_turn(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The head a store writes (the turn's non-empty lists as ``[]``) and those lists' rows."""
    head = {k: v for k, v in document.items() if k != "transcript"}
    turn = head.get("turn")
    if not isinstance(turn, dict):
        return head, {}
    rows = {
        name: tuple(_compact(value) for value in turn[name])
        for name in TURN_LISTS
        if isinstance(turn.get(name), list) and turn[name]
    }
    return {**head, "turn": {k: [] if k in rows else v for k, v in turn.items()}}, rows


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"turn": {"items": [{"a": (1,)}]}}, "checkpoint['turn']['items'][0]['a'] has type tuple"),
        ({"turn": {"usage": {"x": float("nan")}}}, "checkpoint['turn']['usage']['x'] is nan"),
        (
            {"turn": {"calls": [1, {2: 3}]}},
            "checkpoint['turn']['calls'][1] has the non-string key 2",
        ),
        ({"turn": {3: 4}}, "checkpoint['turn'] has the non-string key 3"),
        ({5: 6}, "checkpoint has the non-string key 5"),
        ({"queue": [set()]}, "checkpoint['queue'][0] has type set"),
    ],
)
def test_a_bad_value_in_a_reused_head_is_named_by_its_path(bad: Any, message: str) -> None:
    good = sample_checkpoint("s", [], turn={"items": [], "calls": [1], "usage": None}, queue=[])
    last = encode_checkpoint("s", good)
    with pytest.raises(CheckpointError) as raised:
        encode_checkpoint("s", {**good, **bad}, last)
    assert str(raised.value).startswith(f"{PREFIX}: {message}")
    assert str(raised.value).endswith(f"; {FIX}")


def test_an_item_encoded_afresh_is_checked_even_after_reuse() -> None:
    good = sample_checkpoint("s", [Item.text(ItemKind.USER, "hi")])
    last = encode_checkpoint("s", good)
    bad = {**good, "transcript": [*good["transcript"], {"kind": "user", "parts": "no"}]}
    with pytest.raises(CheckpointError) as raised:
        encode_checkpoint("s", bad, last)
    assert str(raised.value).startswith(f"{PREFIX}: transcript item 1 is not an agentloop item (")


@settings(max_examples=15, deadline=None)
@given(_save_sequences())
def test_any_save_sequence_loads_back_exactly_from_postgres(
    new_postgres_schema: Callable[[], str], documents: list[dict[str, Any]]
) -> None:
    """Appends take the one-statement path (array literals), rewrites the long one."""
    from agentloop.store import PostgresSessionStore

    async def on_postgres() -> None:
        async with PostgresSessionStore(new_postgres_schema()) as store:
            await _save_and_load_each(store, documents)

    anyio.run(on_postgres)


@pytest.mark.anyio
async def test_item_texts_that_need_escaping_in_an_array_literal_load_back_exactly(
    postgres_uri: str,
) -> None:
    from agentloop.store import PostgresSessionStore

    texts = ["NULL", 'say "hi"', "back\\slash", "{a,b}", "é 🙂", "", " ", '\\"{,}\\']
    async with PostgresSessionStore(postgres_uri) as store:
        items: list[Item] = []
        for text in texts:  # one appended item per save
            items.append(Item.text(ItemKind.USER, text))
            document = sample_checkpoint("s", items, note=text)
            await store.save_checkpoint("s", document)
            loaded = await store.load("s")
            assert loaded is not None
            assert loaded.checkpoint == document
        assert [item.parts for item in await store.transcript("s") or []] == [
            item.parts for item in items
        ]
