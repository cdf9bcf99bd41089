"""JSONL export/import: exact round trips, and imports that name the bad line."""

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import InvalidInputError, Item, ItemKind, StructuredPart, unstructure
from agentloop.store import export_jsonl, import_jsonl
from agentloop.testing import items, transcripts


@settings(max_examples=60, deadline=None)
@given(st.lists(items(), max_size=6))
def test_any_items_round_trip_through_a_file_object(values: list[Item]) -> None:
    buffer = io.StringIO()
    assert export_jsonl(values, buffer) == len(values)
    lines = buffer.getvalue().split("\n")
    assert lines[-1] == ""
    assert [json.loads(line) for line in lines[:-1]] == [unstructure(item) for item in values]
    buffer.seek(0)
    assert import_jsonl(buffer) == values


@settings(max_examples=30, deadline=None)
@given(transcripts())
def test_whole_transcripts_round_trip(transcript: list[Item]) -> None:
    buffer = io.StringIO()
    export_jsonl(transcript, buffer)
    buffer.seek(0)
    assert import_jsonl(buffer) == transcript


def test_a_path_is_written_as_utf8_one_item_per_line(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    values = [Item.text(ItemKind.USER, "héllo \u2028 ✓"), Item.text(ItemKind.ASSISTANT, "hi")]
    assert export_jsonl(values, path) == 2
    assert len(path.read_text(encoding="utf-8").split("\n")) == 3
    assert import_jsonl(path) == values
    assert import_jsonl(str(path)) == values


def _import_text(text: str) -> list[Item]:
    source = io.StringIO(text)
    source.name = "t.jsonl"
    return import_jsonl(source)


GOOD = json.dumps(unstructure(Item.text(ItemKind.USER, "hi")))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"{GOOD}\n{{not json\n",
            "line 2 is not JSON (Expecting property name enclosed in double quotes at column 2); "
            "fix or remove line 2",
        ),
        (
            f'{GOOD}\n{GOOD}\n{{"kind": "user"}}\n',
            "line 3 is not an agentloop item (required field missing @ $.parts); "
            "fix or remove line 3",
        ),
        (f"{GOOD}\n\n{GOOD}\n", "line 2 is empty, expected one JSON item per line; remove line 2"),
        ('{"kind": NaN}\n', "line 1 is not JSON (NaN is not JSON); fix or remove line 1"),
        (
            "[]\n",
            "line 1 is not an agentloop item (AttributeError: 'list' object has no "
            "attribute 'keys'); fix or remove line 1",
        ),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_returned(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        _import_text(text)
    assert str(raised.value) == f"cannot import JSONL transcript from 't.jsonl': {message}"


def test_an_unwritable_item_leaves_the_path_untouched(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    good = Item.text(ItemKind.USER, "hi")
    bad = Item(ItemKind.CONTEXT, [StructuredPart(float("nan"))])
    with pytest.raises(InvalidInputError) as raised:
        export_jsonl([good, bad], path)
    assert str(raised.value) == (
        "cannot export JSONL transcript: item 1['parts'][0]['value'] is nan, which JSON cannot "
        "represent; make the item's values JSON"
    )
    with pytest.raises(InvalidInputError) as not_an_item:
        export_jsonl([good, "hello"], path)  # type: ignore[list-item]
    assert str(not_an_item.value) == (
        "cannot export JSONL transcript: expected an Item at index 1, found str; "
        "pass the transcript's items"
    )
    assert not path.exists()
