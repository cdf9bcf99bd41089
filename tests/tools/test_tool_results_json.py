"""Whatever a tool returns, its stored result is JSON by documented rules or an error
naming the problem, the output limit covers every part, and the session still saves."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_support import outcome, results_of, run_one, user

import agentloop as al
import agentloop.testing
import agentloop.tools
from agentloop.store import MemorySessionStore, SqliteSessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: float
    y: tuple[int, ...]


@attrs.frozen
class Box:
    label: str
    items: frozenset[int]


class Returns:
    """Returns whatever it was built with (an async tool, or sync in a thread)."""

    spec = al.ToolSpec("returns", "Returns a value.")

    def __init__(self, value: Any, *, limit: int | None = None) -> None:
        self.value = value
        if limit is not None:
            self.max_output_chars = limit

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        return self.value


def cycle() -> list[Any]:
    looped: list[Any] = [1]
    looped.append(looped)
    return looped


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


CONVERTED = [
    ((1, "two", None), [1, "two", None]),
    ({3, 1, 2}, [1, 2, 3]),
    (frozenset({"b", "a"}), ["a", "b"]),
    (b"caf\xc3\xa9", "café"),
    (bytearray(b"ok"), "ok"),
    (float("nan"), "NaN"),
    (float("inf"), "Infinity"),
    ([float("-inf"), 1.5], ["-Infinity", 1.5]),
    ({2: "a", None: "b", True: "c", 2.5: "d"}, {"2": "a", "null": "b", "true": "c", "2.5": "d"}),
    ({Color.RED: Level.HIGH}, {"red": 3}),
    (datetime.date(2026, 11, 25), "2026-11-25"),
    (datetime.datetime(2026, 11, 25, 15, 0, tzinfo=datetime.UTC), "2026-11-25T15:00:00+00:00"),
    (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (decimal.Decimal("1.50"), "1.50"),
    (decimal.Decimal("NaN"), "NaN"),
    (PurePosixPath("/a/b"), "/a/b"),
    (Point(math.nan, (1, 2)), {"x": "NaN", "y": [1, 2]}),
    (Box("b", frozenset({2, 1})), {"label": "b", "items": [1, 2]}),
    ({"deep": {"set": {(1, 2)}}}, {"deep": {"set": [[1, 2]]}}),
    (
        al.ToolOutput([1, 2], metadata={"took": {0.5}, "n": float("nan")}),
        al.ToolResultPart("call-1", [1, 2], metadata={"took": [0.5], "n": "NaN"}),
    ),
    (
        [al.TextPart("a"), al.MediaPart("image/png", data=b"\x89PNG")],  # type: ignore[arg-type]
        [al.TextPart("a"), al.MediaPart("image/png", data="iVBORw==")],
    ),
    (
        [al.StructuredPart({1: float("nan")}, metadata={"k": (1,)})],
        [al.StructuredPart({"1": "NaN"}, metadata={"k": [1]})],
    ),
]


@pytest.mark.parametrize(
    ("value", "stored"), CONVERTED, ids=[str(i) for i in range(len(CONVERTED))]
)
async def test_returned_values_are_converted_by_the_documented_rules(
    value: Any, stored: Any
) -> None:
    result = await run_one(Returns(value), {})
    expected = (
        stored if isinstance(stored, al.ToolResultPart) else al.ToolResultPart("call-1", stored)
    )
    assert result == expected


NO_JSON = (
    "has no JSON form; return a str, a number, a bool, None, a list, a dict, an attrs class "
    "or a dataclass"
)
KEYS = "keys must be strings (numbers, booleans and None are converted)"
REFUSED: list[tuple[Any, str]] = [
    (
        b"\xff\xfe",
        "at $: 2 bytes that are not UTF-8 text; return a str, or a MediaPart/FilePart with "
        "base64 data",
    ),
    (object(), f"at $: an object of type object {NO_JSON}"),
    ({(1, 2): "x"}, f"at $: a key of type tuple ((1, 2)); {KEYS}"),
    ({1: "a", "1": "b"}, "at $: two keys become the same text '1'"),
    ({"a": [1, {"b": object}]}, f"at $.a[1].b: an object of type type {NO_JSON}"),
    (cycle(), "at $[1]: a reference cycle (the value contains itself)"),
    (nested(150), "at $" + "[0]" * 101 + ": nested deeper than 100 levels"),
    (10**5000, "at $: an integer with more than 3,900 digits"),
    (
        al.ToolOutput("x", metadata={1: "a"}),  # type: ignore[dict-item]
        "at $.metadata: a metadata key of type int (1); metadata keys must be strings",
    ),
    (
        al.ToolOutput("x", metadata=["a"]),  # type: ignore[arg-type]
        "at $.metadata: metadata must be a mapping, got list",
    ),
    (
        al.ToolOutput("x", metadata={"agentloop.outcome": "failed"}),
        "at $.metadata: the keys 'agentloop.outcome' are reserved for agentloop; use another "
        "prefix",
    ),
    (
        al.ToolOutput("x", is_error="yes"),  # type: ignore[arg-type]
        "ToolOutput.is_error must be a bool, got str",
    ),
    ([al.TextPart(3)], "at $[0].text: expected a str, got int"),  # type: ignore[arg-type]
    ([al.MediaPart(None)], "at $[0].mime_type: expected a str, got NoneType"),  # type: ignore[arg-type]
    (
        [al.ToolCallPart("c", "t", {})],
        "at $[0]: a ToolCallPart; a tool may return text, media, file, structured and custom parts",
    ),
    (
        [al.TextPart("a", metadata={"x": object()})],
        f"at $[0].metadata.x: an object of type object {NO_JSON}",
    ),
]


@pytest.mark.parametrize(("value", "problem"), REFUSED, ids=[str(i) for i in range(len(REFUSED))])
async def test_values_without_a_json_form_become_an_error_naming_the_problem(
    value: Any, problem: str
) -> None:
    result = await run_one(Returns(value), {})
    assert (result.output, result.is_error, outcome(result)) == (
        f"tool 'returns' returned a value that cannot be stored: {problem}",
        True,
        "failed",
    )


async def test_a_sync_function_returning_odd_values_is_converted_too() -> None:
    @al.tool
    def odd() -> Any:
        """Returns a set of bytes and floats."""
        return {"a": {b"x", b"y"}, "b": float("nan")}

    assert (await run_one(odd, {})).output == {"a": ["x", "y"], "b": "NaN"}


async def test_the_output_limit_covers_text_media_and_structured_parts_together() -> None:
    parts = [
        al.TextPart("abcdef"),
        al.MediaPart("image/png", data="x" * 100),
        al.TextPart("ghijkl"),
    ]
    result = await run_one(Returns(parts, limit=10), {})
    assert result.output == [
        al.TextPart("abcdef"),
        al.TextPart(
            "[output truncated: 102 of 112 characters cut (text, media and structured parts "
            "count together); 2 part(s) left out]"
        ),
    ]
    cut_text = await run_one(Returns([al.TextPart("x" * 8), al.TextPart("y" * 8)], limit=10), {})
    assert cut_text.output == [
        al.TextPart("x" * 8),
        al.TextPart("yy"),
        al.TextPart(
            "[output truncated: 6 of 16 characters cut (text, media and structured parts count "
            "together)]"
        ),
    ]
    structured = await run_one(Returns([al.StructuredPart({"k": "v" * 50})], limit=10), {})
    assert structured.output == [
        al.TextPart(
            "[output truncated: 49 of 59 characters cut (text, media and structured parts "
            "count together); 1 part(s) left out]"
        )
    ]
    fits = [al.TextPart("abc"), al.MediaPart("image/png", uri="https://x/y.png")]
    assert (await run_one(Returns(fits, limit=100), {})).output == fits


async def test_oversized_metadata_is_dropped_with_a_note() -> None:
    result = await run_one(Returns(al.ToolOutput("ok", metadata={"blob": "z" * 50}), limit=20), {})
    assert result == al.ToolResultPart(
        "call-1",
        "ok",
        metadata={
            "agentloop.metadata_dropped": "the tool's metadata was 62 characters, over the "
            "output limit of 20; it was dropped"
        },
    )


# -- saves never fail because of a result ------------------------------------------------

_keys = st.one_of(
    st.text(max_size=4), st.integers(-5, 5), st.booleans(), st.none(), st.floats(width=16)
)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.sampled_from([Color.RED, Level.HIGH, datetime.date(2026, 1, 1), uuid.UUID(int=7)]),
    st.sampled_from([object(), Path("/p"), decimal.Decimal("-0.0"), math.pi]),
)
weird = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.frozensets(st.one_of(st.integers(), st.text(max_size=3)), max_size=4),
        st.dictionaries(_keys, children, max_size=4),
        st.builds(
            al.ToolOutput,
            children,
            metadata=st.dictionaries(st.text(max_size=3), children, max_size=3),
        ),
    ),
    max_leaves=12,
)


async def _round_trip(value: Any, store: Any) -> None:
    model = al.testing.ScriptedModel([tool_calls(call("returns", {}, id="c1")), "done", "again"])
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Returns(value)))
        .store(store)
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s1")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    (result,) = results_of(driver)
    if result.is_error and outcome(result) == "failed":
        assert result.output.startswith(
            "tool 'returns' returned a value that cannot be stored: at $"
        )
    await store.save_checkpoint("s1", driver.checkpoint())
    resumed = await agent.resume(session_id="s1")
    assert resumed.snapshot().transcript == driver.snapshot().transcript
    resumed.submit_input([user("again")])
    model_again = await resumed.run_until_blocked()
    assert isinstance(model_again, al.Finished)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=60, deadline=None)
@given(value=weird)
def test_any_returned_value_leaves_a_session_that_saves_and_resumes(
    backend: str, value: Any
) -> None:
    anyio.run(_round_trip, value, MemorySessionStore(), backend=backend)


@pytest.mark.parametrize(("value", "stored"), CONVERTED[:8], ids=[str(i) for i in range(8)])
async def test_converted_results_survive_a_real_sqlite_store(
    tmp_path: Path, value: Any, stored: Any
) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await _round_trip(value, store)
