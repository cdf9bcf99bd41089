"""Server configs and the mcp__<server>__<tool> naming (pure, no server needed)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop.mcp as mcp
from agentloop import InvalidInputError
from agentloop.mcp import HttpServer, StdioServer, tool_names

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_public_surface_is_sorted_and_importable() -> None:
    def order(name: str) -> tuple[int, str]:  # constants, classes, then functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert mcp.__all__ == sorted(mcp.__all__, key=order)
    for name in mcp.__all__:
        value = getattr(mcp, name)
        assert not isinstance(value, type) or value.__doc__, name


@pytest.mark.parametrize(
    "name", ["", "a__b", "_a", "a_", "has space", "dot.name", "x" * 33, "ü", "a/b"]
)
def test_bad_server_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        StdioServer(name, "python")
    assert str(error.value) == (
        f"MCP server name {name!r} is not usable in tool names: use 1-32 letters, digits, "
        "'-' or single '_' (no '__', which separates server and tool in mcp__<server>__<tool>)"
    )
    with pytest.raises(InvalidInputError):
        HttpServer(name, "http://127.0.0.1/mcp")


def test_secrets_stay_out_of_reprs() -> None:
    http = HttpServer("web", "https://x/mcp", headers={"Authorization": "Bearer s3cret"})
    stdio = StdioServer("fs", "python", ["s.py"], env={"TOKEN": "s3cret"})
    assert "s3cret" not in repr(http)
    assert "s3cret" not in repr(stdio)
    assert "'Authorization': '***'" in repr(http)
    assert "'TOKEN': '***'" in repr(stdio)
    with pytest.raises(InvalidInputError, match="list of strings"):
        StdioServer("fs", "python", "s.py")  # type: ignore[arg-type]


def test_names_are_prefixed_sanitized_and_collisions_get_a_stable_suffix() -> None:
    names = tool_names("fs", ["read", "a.b", "a_b", "x" * 80])
    assert names["read"] == "mcp__fs__read"
    assert names["a.b"] == "mcp__fs__a_b"  # "a.b" sorts before "a_b": it keeps the name
    assert names["a_b"] == "mcp__fs__a_b_" + __import__("hashlib").sha256(b"a_b").hexdigest()[:8]
    assert names["x" * 80] == ("mcp__fs__" + "x" * 80)[:64]


@given(
    st.lists(st.text(min_size=1, max_size=90), max_size=12),
    st.randoms(use_true_random=False),
)
def test_names_are_valid_unique_and_independent_of_order(tools: list[str], rng: object) -> None:
    names = tool_names("srv", tools)
    assert set(names) == set(tools)
    assert all(VALID.match(name) and name.startswith("mcp__srv__") for name in names.values())
    assert len(set(names.values())) == len(names)
    shuffled = list(tools)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert tool_names("srv", shuffled) == names
