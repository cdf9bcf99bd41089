"""Hypothesis strategies for the schema tests: random type hints and values of them."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional, Union

import attrs
from hypothesis import strategies as st


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    x: int
    label: str | None = None


BASE_TYPES: list[Any] = [
    str,
    int,
    float,
    bool,
    type(None),
    Any,
    Color,
    Level,
    Literal["a", 1, True],
    Point,
]


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    pairs = st.tuples(inner, inner)
    return st.one_of(
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: tuple[t, ...]),  # type: ignore[valid-type]
        pairs.map(lambda p: tuple[p[0], p[1]]),  # type: ignore[name-defined]
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        inner.map(lambda t: Optional[t]),  # noqa: UP045
        pairs.map(lambda p: Union[p[0], p[1]]),  # noqa: UP007
        inner.map(lambda t: Annotated[t, "described"]),
    )


type_hints = st.recursive(st.sampled_from(BASE_TYPES), _compound, max_leaves=4)

small_ints = st.integers(-(2**53), 2**53)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | small_ints | finite_floats | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def values_of(hint: Any) -> st.SearchStrategy[Any]:
    """Well-typed Python values of ``hint``."""
    origin = getattr(hint, "__origin__", None)
    args = getattr(hint, "__args__", ())
    if hint is Any:
        return json_values
    if origin is Annotated or (hasattr(hint, "__metadata__")):
        return values_of(args[0])
    if hint is str:
        return st.text(max_size=4)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return small_ints
    if hint is float:
        return finite_floats
    if hint is type(None):
        return st.none()
    if hint in (Color, Level):
        return st.sampled_from(list(hint))
    if hint is Point:
        return st.builds(Point, x=small_ints, label=st.none() | st.text(max_size=3))
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(values_of(args[0]), max_size=3)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(values_of(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(values_of(arg) for arg in args))
    if origin is dict:
        return st.dictionaries(st.text(max_size=3), values_of(args[1]), max_size=3)
    if origin is Union or type(hint).__name__ == "UnionType":
        return st.one_of(*(values_of(arg) for arg in args))
    raise AssertionError(f"no strategy for {hint!r}")


def to_json(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return {
            field.name: to_json(getattr(value, field.name)) for field in attrs.fields(type(value))
        }
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value
