"""JSON-compatible values for hypothesis (the leaf strategy the others build on)."""

from __future__ import annotations

import functools
import string
from typing import Any

from hypothesis import strategies as st

__all__ = ["json_values"]

_keys = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)


@functools.cache
def json_values(*, max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """JSON-compatible values (no NaN or infinities), nested lists and objects."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**31), 2**31)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
        max_leaves=max_leaves,
    )
